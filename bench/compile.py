"""torch.compile on cudadev vs torch.compile on cuda, same process, same GPU,
same inputs and weights (bench/README.md).

Per model: the steady-state time of one compiled iteration on each device
(median of batches, each batch synchronized once) and their ratio, target
<= 1.05 x cuda; models small enough to be launch-bound are reported apart
(no target: their time is Python and launch overhead, not kernels). Then
compile time of the GPT block forward, cold (empty Inductor and Triton
caches) and warm (Dynamo reset, the same caches).

    TORCH_DEVICE_BACKEND_AUTOLOAD=0 python bench/compile.py --machine h200 --results-dir bench/results
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import platform
import statistics
import sys
import tempfile
import time
from typing import Callable

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "python"))
CACHE = pathlib.Path(tempfile.mkdtemp(prefix="devbridge-bench-compile-"))
os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(CACHE / "inductor")
os.environ["TRITON_CACHE_DIR"] = str(CACHE / "triton")

import torch  # noqa: E402
import torch_cudadev  # noqa: E402,F401  (claims PrivateUse1; installs devbridge)

import compile_cases as cases  # noqa: E402
import devbridge  # noqa: E402
import devbridge.inductor  # noqa: E402
from machine_info import cpu_model, git_commit  # noqa: E402

TARGET = 1.05


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
    else:
        torch.accelerator.synchronize()


def steady_state_ms(step, device: str, iterations: int, repeats: int) -> tuple[float, list[float]]:
    for _ in range(3):
        step()
    synchronize(device)
    samples = []
    for _ in range(repeats):
        began = time.perf_counter()
        for _ in range(iterations):
            step()
        synchronize(device)
        samples.append((time.perf_counter() - began) * 1e3 / iterations)
    return statistics.median(samples), samples


def device_ms(step, device: str, iterations: int = 5) -> float | None:
    """GPU kernel time of one iteration (torch.profiler's CUDA activity sees
    the kernels of both devices): apart from host-side overhead."""
    try:
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        return None
    step()
    synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iterations):
            step()
        synchronize(device)
    total_us = sum(getattr(e, "self_device_time_total", 0.0) for e in prof.key_averages())
    return total_us / 1e3 / iterations


@dataclasses.dataclass(frozen=True)
class Model:
    name: str
    launch_bound: bool
    make: Callable[[str], Callable[[], object]]  # device -> one compiled step
    devices: tuple = ("cuda", "cudadev")  # measured on; without cuda, no ratio
    eager: Callable[[str], Callable[[], object]] | None = None  # device -> one eager step, also measured


def models() -> list[Model]:

    def pointwise(device):
        x, y = cases.to((cases._randn(4096), cases._randn(4096, seed=1)), device)
        fn = torch.compile(cases.pointwise_chain, fullgraph=True)
        return lambda: fn(x, y)

    def mlp_small(device):
        torch.set_grad_enabled(False)  # inference: see block_train
        model = cases.MLP().to(device)
        model.load_state_dict({k: v.to(device) for k, v in _weights(cases.MLP).items()})
        x = cases._randn(64, 32).to(device)
        fn = torch.compile(model)
        return lambda: fn(x)

    def block_forward(device):
        torch.set_grad_enabled(False)  # inference: see block_train
        model = cases.Block(768, 12).to(device)
        model.load_state_dict({k: v.to(device) for k, v in _weights(lambda: cases.Block(768, 12)).items()})
        x = cases._randn(8, 512, 768).to(device)
        fn = torch.compile(model)
        return lambda: fn(x)

    def block_train(device):
        # torch 2.11's autograd engine cannot run torch.cuda backward in a process
        # with a PrivateUse1 backend (test_cudadev_ops.py's xfail): cudadev only.
        torch.set_grad_enabled(True)
        model = cases.Block(768, 12).to(device)
        model.load_state_dict({k: v.to(device) for k, v in _weights(lambda: cases.Block(768, 12)).items()})
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x, target = cases.to((cases._randn(8, 512, 768), cases._randn(8, 512, 768, seed=1)), device)
        step = torch.compile(cases.train_step)
        return lambda: step(model, optimizer, x, target)

    def block_forward_eager(device):
        # What the plugin's own operators (cudadev's aliases of torch's CUDA
        # kernels) cost by themselves, for comparison.
        model = cases.Block(768, 12).to(device)
        x = cases._randn(8, 512, 768).to(device)
        return lambda: model(x)

    return [Model("pointwise chain, 4096 elements", True, pointwise),
            Model("MLP 32-64-32, batch 64", True, mlp_small),
            Model("GPT block 768/12 heads, 8x512 tokens, forward (inference)", False, block_forward,
                  eager=block_forward_eager),
            Model("GPT block 768/12 heads, 8x512 tokens, train step (fwd+bwd+AdamW)", False, block_train,
                  devices=("cudadev",))]

_weight_cache: dict = {}


def _weights(factory):
    key = getattr(factory, "__name__", repr(factory))
    if key not in _weight_cache:
        torch.manual_seed(0)
        _weight_cache[key] = factory().state_dict()
    return _weight_cache[key]


def compile_times(device: str) -> tuple[float, float]:
    """(cold, warm) ms to compile and run the GPT block forward once."""
    results = []
    for _ in range(2):
        torch._dynamo.reset()
        model = cases.Block(768, 12).to(device).requires_grad_(False)
        x = cases._randn(8, 512, 768).to(device)
        began = time.perf_counter()
        torch.compile(model)(x)
        synchronize(device)
        results.append((time.perf_counter() - began) * 1e3)
    return results[0], results[1]


def row(name, value, unit, *, target=None, target_met=None, **extra):
    return {"name": name, "value": value, "unit": unit, "target": target, "target_met": target_met, **extra}


def run(iterations: int, repeats: int) -> tuple[list[dict], dict]:
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    devbridge.inductor.register()
    rows = []
    # Compile times first, on empty caches (the steady-state runs fill them).
    for device in ("cuda", "cudadev"):
        # a cache of its own per device: each cold compile starts empty
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(CACHE / f"inductor-{device}")
        os.environ["TRITON_CACHE_DIR"] = str(CACHE / f"triton-{device}")
        cold, warm = compile_times(device)
        rows.append(row(f"compile, GPT block forward, cold caches: {device}", cold, "ms", group="compile",
                        device=device))
        rows.append(row(f"compile, GPT block forward, warm caches: {device}", warm, "ms", group="compile",
                        device=device))
    for model in models():
        name, launch_bound = model.name, model.launch_bound
        times = {}
        for device in model.devices:
            torch._dynamo.reset()
            step = model.make(device)
            value, samples = steady_state_ms(step, device, iterations, repeats)
            times[device] = value
            rows.append(row(f"{name}: torch.compile on {device}", value, "ms/iter", group="steady state",
                            device=device, launch_bound=launch_bound, samples=samples))
            if not launch_bound:
                rows.append(row(f"{name}: GPU kernel time on {device} (profiler)", device_ms(step, device),
                                "ms/iter", group="device time", device=device))
        if model.eager is not None:
            for device in model.devices:
                value, _ = steady_state_ms(model.eager(device), device, iterations, repeats)
                rows.append(row(f"{name}: eager on {device}", value, "ms/iter", group="eager", device=device))
        if "cuda" not in times:
            continue  # no peer in this process
        ratio = times["cudadev"] / times["cuda"]
        if launch_bound:
            rows.append(row(f"{name}: ratio cudadev/cuda (launch-bound, reported apart)", ratio, "ratio",
                            group="steady state", launch_bound=True))
        else:
            rows.append(row(f"{name}: ratio cudadev/cuda", ratio, "ratio", target=f"<= {TARGET}",
                            target_met=ratio <= TARGET, group="steady state", launch_bound=False))
    for kind in ("cold", "warm"):
        value = {r["device"]: r["value"] for r in rows if r["group"] == "compile" and f"{kind} caches" in r["name"]}
        rows.append(row(f"compile, GPT block forward, {kind}: ratio cudadev/cuda", value["cudadev"] / value["cuda"],
                        "ratio", group="compile"))
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_model(), "logical_cpus": os.cpu_count(), "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__, "python": platform.python_version(), "devbridge": devbridge.__version__,
        "commit": git_commit(), "iterations": iterations, "repeats": repeats,
    }  # fmt: skip
    import triton

    meta["triton"] = triton.__version__
    return rows, meta


def table(rows: list[dict], meta: dict) -> str:
    lines = [f"# torch.compile: cudadev vs cuda ({meta['gpu']}, torch {meta['torch']}, Triton {meta['triton']}, "
             f"commit {meta['commit']})", "", "| measurement | value | unit | target | met |", "|---|---|---|---|---|"]
    for r in rows:
        met = "" if r["target"] is None else ("met" if r["target_met"] else "NOT MET")
        value = "n/a" if r["value"] is None else f"{r['value']:.4g}"
        lines.append(f"| {r['name']} | {value} | {r['unit']} | {r['target'] or ''} | {met} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], meta: dict, path: pathlib.Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        return f"matplotlib is not available ({error})"
    steady = [r for r in rows if r["group"] == "steady state" and r["unit"] == "ms/iter"]
    names = list(dict.fromkeys(r["name"].split(": torch.compile")[0] for r in steady))
    figure, axis = plt.subplots(figsize=(10, 4.5))
    width = 0.38
    for offset, device in ((-width / 2, "cuda"), (width / 2, "cudadev")):
        values = [next((r["value"] for r in steady if r["device"] == device and r["name"].startswith(n)), 0.0)
                  for n in names]  # 0: no peer measured (the train step on cuda)
        axis.barh([i + offset for i in range(len(names))], values, height=width, label=f"torch.compile on {device}")
    axis.set_yticks(range(len(names)), [n.replace(", ", "\n", 1) for n in names], fontsize=8)
    axis.set_xscale("log")
    axis.set_xlabel("ms per iteration (log)")
    axis.set_title(f"torch.compile steady state, {meta['gpu']}, commit {meta['commit']}")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--machine", default="h200")
    parser.add_argument("--results-dir", type=pathlib.Path, default=HERE / "results")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rows, meta = run(args.iterations, args.repeats)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stem = args.results_dir / f"compile_{args.machine}"
    stem.with_suffix(".json").write_text(json.dumps({**meta, "machine": args.machine, "rows": rows}, indent=1))
    text = table(rows, meta)
    stem.with_suffix(".md").write_text(text)
    problem = plot(rows, meta, stem.with_suffix(".png"))
    print(text)
    if problem:
        print(problem)
    return 0


if __name__ == "__main__":
    sys.exit(main())
