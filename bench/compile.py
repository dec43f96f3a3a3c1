"""torch.compile on cudadev vs torch.compile on cuda, same GPU, same inputs
and weights (bench/README.md).

Forward models run in one process: cuda and cudadev samples alternate (the
host is shared and noisy), and each device's value is the median of the
samples, with the median of the per-pair ratios and their spread; target
<= 1.05 x cuda; models small enough to be launch-bound are reported apart
(no target: their time is Python and launch overhead, not kernels). For the
GPT block, a per-kernel table of GPU time on each device (torch.profiler).
Train steps run each device in a process of its own (torch 2.11's autograd
engine asserts on a cuda backward beside a PrivateUse1 backend, so the cuda
peer runs without a plugin loaded), same seed and inputs: both processes stay
alive and are sampled in turn, their launching threads pinned to one CPU;
target <= 1.02 x cuda (GPT block), <= 1.05 x (conv block); the launch-bound
MLP's train step with mode="reduce-overhead" (--train-models mlp,mlp_step: its
AdamW step eager, then compiled too), <= 1.05 x. Then
compile time of the GPT block forward, cold (empty Inductor and Triton
caches) and warm (Dynamo reset, the same caches). The graphs part: the
pointwise chain, the MLP and the GPT block forward compiled with
mode="reduce-overhead" (captured graphs replayed) on cudadev, beside the same
on cuda (Inductor's CUDA graph trees) and beside default mode on cudadev,
alternating in one process; targets <= 1.05 x cuda, and >= 2 x faster than
default mode for the launch-bound models.

    TORCH_DEVICE_BACKEND_AUTOLOAD=0 python bench/compile.py --machine h200 --results-dir bench/results
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import importlib
import datetime
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "python"))
CACHE = pathlib.Path(os.environ.get("DEVBRIDGE_BENCH_CACHE") or tempfile.mkdtemp(prefix="devbridge-bench-compile-"))
os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(CACHE / "inductor")
os.environ["TRITON_CACHE_DIR"] = str(CACHE / "triton")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import compile_cases as cases  # noqa: E402
from machine_info import cpu_model, git_commit  # noqa: E402

TARGET = 1.05
TRAIN_TARGET = {"block": 1.02, "conv": 1.05, "mlp": 1.05, "mlp_step": 1.05}
GRAPH_TARGET = 1.05  # reduce-overhead on cudadev / reduce-overhead on cuda
GRAPH_SPEEDUP_TARGET = 2.0  # default mode / reduce-overhead on cudadev, launch-bound models
TRAIN_MODELS = {"block": "GPT block 768/12 heads, 8x512 tokens", "conv": "ResNet basic block 64 channels, 32x56x56",
                # launch-bound: a few microseconds of GPU work per kernel, captured
                "mlp": "MLP 8x256 (LayerNorm, GELU), batch 32, mode=reduce-overhead",
                "mlp_step": "MLP 8x256 (LayerNorm, GELU), batch 32, mode=reduce-overhead, AdamW step compiled (capturable)"}


def load_plugin() -> None:
    """cudadev, where it is measured (a child process measuring cuda loads no
    plugin); DEVBRIDGE_BENCH_PLUGIN names another plugin module, e.g. to try
    the train-step scripts on torch_simdev without a GPU."""
    importlib.import_module(os.environ.get("DEVBRIDGE_BENCH_PLUGIN", "torch_cudadev"))  # claims PrivateUse1

    import devbridge.inductor

    devbridge.inductor.register()


def synchronize(device: str) -> None:
    """`device` may be a sample's label: its first word is the device."""
    if device.split()[0] == "cuda":
        torch.cuda.synchronize()
    else:
        torch.accelerator.synchronize()


def batch_ms(step, device: str, iterations: int) -> float:
    began = time.perf_counter()
    for _ in range(iterations):
        step()
    synchronize(device)
    return (time.perf_counter() - began) * 1e3 / iterations


def alternating_ms(steps: dict, iterations: int, pairs: int) -> dict:
    """Samples of each device's step, alternating device by device (the
    order flips every pair): {device: samples}."""
    for device, step in steps.items():
        for _ in range(3):
            step()
        synchronize(device)
    samples = {device: [] for device in steps}
    order = list(steps)
    for pair in range(pairs):
        for device in (order if pair % 2 == 0 else order[::-1]):
            samples[device].append(batch_ms(steps[device], device, iterations))
    return samples


def kernel_times_us(step, device: str, iterations: int = 5) -> dict:
    """GPU time per iteration of each kernel (torch.profiler's CUDA activity
    sees the kernels of both devices): {kernel name: us}."""
    from torch.profiler import ProfilerActivity, profile

    step()
    synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iterations):
            step()
        synchronize(device)
    times = collections.defaultdict(float)
    for event in prof.key_averages():
        total = getattr(event, "self_device_time_total", 0.0)
        if total > 0:
            times[event.key] += total / iterations
    return dict(times)


def ratio_summary(samples: dict, numerator: str = "cudadev", denominator: str = "cuda") -> dict:
    pair_ratios = [b / a for a, b in zip(samples[denominator], samples[numerator])]
    return {"median": statistics.median(pair_ratios), "min": min(pair_ratios), "max": max(pair_ratios),
            "pairs": len(pair_ratios)}


@dataclasses.dataclass(frozen=True)
class Model:
    name: str
    launch_bound: bool
    make: Callable[[str], Callable[[], object]]  # device -> one compiled step
    devices: tuple = ("cuda", "cudadev")  # measured on; without cuda, no ratio
    eager: Callable[[str], Callable[[], object]] | None = None  # device -> one eager step, also measured
    graphs: bool = False  # also measured with mode="reduce-overhead" (the graphs part)


def models() -> list[Model]:

    # mode: torch.compile's (None: default mode).
    def pointwise(device, mode=None):
        x, y = cases.to((cases._randn(4096), cases._randn(4096, seed=1)), device)
        fn = torch.compile(cases.pointwise_chain, fullgraph=True, mode=mode)
        return lambda: fn(x, y)

    def mlp_small(device, mode=None):
        torch.set_grad_enabled(False)  # inference: see block_train
        model = cases.MLP().to(device)
        model.load_state_dict({k: v.to(device) for k, v in _weights(cases.MLP).items()})
        x = cases._randn(64, 32).to(device)
        fn = torch.compile(model, mode=mode)
        return lambda: fn(x)

    def block_forward(device, mode=None):
        torch.set_grad_enabled(False)  # inference: see block_train
        model = cases.Block(768, 12).to(device)
        model.load_state_dict({k: v.to(device) for k, v in _weights(lambda: cases.Block(768, 12)).items()})
        x = cases._randn(8, 512, 768).to(device)
        fn = torch.compile(model, mode=mode)
        return lambda: fn(x)

    def conv_forward(device):
        torch.set_grad_enabled(False)
        model = ConvBlock().to(device).eval()
        model.load_state_dict({k: v.to(device) for k, v in _weights(ConvBlock).items()})
        x = cases._randn(*CONV_INPUT).to(device)
        fn = torch.compile(model)
        return lambda: fn(x)

    def block_forward_eager(device):
        # What the plugin's own operators (cudadev's aliases of torch's CUDA
        # kernels) cost by themselves, for comparison.
        model = cases.Block(768, 12).to(device)
        x = cases._randn(8, 512, 768).to(device)
        return lambda: model(x)

    return [Model("pointwise chain, 4096 elements", True, pointwise, graphs=True),
            Model("MLP 32-64-32, batch 64", True, mlp_small, graphs=True),
            Model("GPT block 768/12 heads, 8x512 tokens, forward (inference)", False, block_forward,
                  eager=block_forward_eager, graphs=True),
            Model("ResNet basic block 64 channels, 32x56x56, forward (inference)", False, conv_forward)]


class ConvBlock(torch.nn.Module):
    """A ResNet basic block: conv3x3-BN-ReLU-conv3x3-BN, residual, ReLU."""

    def __init__(self, channels=64):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(channels)
        self.conv2 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(channels)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


CONV_INPUT = (32, 64, 56, 56)


def launch_bound_mlp() -> torch.nn.Module:
    """8 layers of LayerNorm, Linear 256x256 and GELU: each kernel a few
    microseconds of GPU work, so a step costs what launching it costs."""
    layers = []
    for _ in range(8):
        layers += [torch.nn.LayerNorm(256), torch.nn.Linear(256, 256), torch.nn.GELU()]
    return torch.nn.Sequential(*layers)

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


# The two devices' final losses after the same train steps (same seed, model
# and inputs) differ by well under this where the program is the same (0.05-0.2%
# in bf16, from kernels' rounding); a GPT-2 model whose output layer Module.to()
# had untied on the plugin device differed by 2.4%.
LOSS_TOLERANCE = 0.01


def train_ratio_row(name: str, results: dict, target: float, **extra) -> dict:
    """The ratio row of a train step measured by train_steps: the median of
    the pairs' cudadev/cuda ratios against `target`, met only where the two
    devices' final losses also agree within LOSS_TOLERANCE (a ratio between
    two programs means nothing; the row says so)."""
    summary = ratio_summary({device: results[device]["samples"] for device in results})
    loss_cuda, loss_cudadev = results["cuda"]["loss"], results["cudadev"]["loss"]
    difference = abs(loss_cudadev - loss_cuda) / max(abs(loss_cuda), 1e-12)
    problem = {}
    if not difference <= LOSS_TOLERANCE:  # a NaN loss fails too
        problem["problem"] = (f"final losses differ by {difference:.1%} ({loss_cuda:.5g} on cuda, {loss_cudadev:.5g} "
                              "on cudadev): not the same program")
    return row(name, summary["median"], "ratio", target=f"<= {target}",
               target_met=summary["median"] <= target and not problem, spread=summary, loss_cuda=loss_cuda,
               loss_cudadev=loss_cudadev, loss_difference=difference, **problem, **extra)


# ---------------------------------------------------------------- train steps, a process per device

def adamw(parameters, compiled_step: bool):
    """AdamW (foreach) and the step a train step calls: eager, or compiled.

    A compiled step is built capturable: torch.compile turns capturable on for
    cuda and xpu parameters only (torch/_dynamo/variables/optimizer.py,
    _set_capturable), so without it cuda would run the capturable update (step
    counts on the GPU, bias corrections computed there) and a plugin device the
    other one (step counts on the CPU, read on the host): two programs, not one
    program on two devices."""
    optimizer = torch.optim.AdamW(parameters, lr=1e-4, foreach=True, capturable=compiled_step)
    return optimizer, torch.compile(optimizer.step) if compiled_step else optimizer.step


def train_step(model_name: str, device: str):
    """One device's compiled train step (fwd + bwd + AdamW, eager foreach
    optimizer) as the benchmark runs it: (model, optimizer, step, x)."""
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    if device != "cuda":
        load_plugin()
    torch.manual_seed(0)
    if model_name == "block":
        model = cases.Block(768, 12)
        shape = (8, 512, 768)
    elif model_name == "conv":
        model = ConvBlock()
        shape = CONV_INPUT
    else:
        model = launch_bound_mlp()
        shape = (32, 256)
    model = model.to(device)
    # The eager AdamW step is ~10 multi-tensor launches with host work per
    # tensor; compiled, Inductor fuses it into a few kernels (the step the
    # launch-bound model is timed with both ways).
    optimizer, optimizer_step = adamw(model.parameters(), compiled_step=model_name == "mlp_step")
    x, target = cases.to((cases._randn(*shape), cases._randn(*shape, seed=1)), device)
    compiled = torch.compile(model, mode="reduce-overhead" if model_name.startswith("mlp") else None)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(compiled(x), target)
        loss.backward()
        optimizer_step()
        return loss.detach()

    return compiled, optimizer, step, (x, target)


CHILD_REPLY = "@@devbridge-bench "  # marks the child's replies among whatever else it prints


def train_step_child(model_name: str, device: str, iterations: int, cpu: int, make_step=None) -> None:
    """One device's train step, kept alive and sampled on request: it answers
    "sample" on stdin with one sample's ms per step and "end" with the loss
    reached. Before the first request it compiles, warms up and pins its main
    thread (the one that launches) to `cpu`, the CPU the other device's child
    is pinned to as well. `make_step`: the script's train_step (default this one's)."""
    _, optimizer, step, _ = (make_step or train_step)(model_name, device)
    params = [p for group in optimizer.param_groups for p in group["params"]] if optimizer is not None else []
    began = time.perf_counter()
    step()
    synchronize(device)
    first = (time.perf_counter() - began) * 1e3
    for _ in range(3):
        step()
    synchronize(device)
    os.sched_setaffinity(0, {cpu})

    def reply(**message):
        print(CHILD_REPLY + json.dumps(message), flush=True)

    reply(ready_at=time.time(), first_step_ms=first,
          parameters=[len(params), sum(p.numel() for p in params)])
    for request in sys.stdin:
        if request.strip() == "sample":
            step()  # the other process ran last: one untimed step refills caches and queues
            synchronize(device)
            reply(ms=batch_ms(step, device, iterations))
        else:
            reply(loss=float(step().cpu()))
            return


class TrainChild:
    """A process of its own for one device's train step (see train_steps)."""

    def __init__(self, model_name: str, device: str, iterations: int, cpu: int, script: str = __file__):
        self.device = device
        env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0",
                   DEVBRIDGE_BENCH_CACHE=str(CACHE / f"train-{model_name}-{device}"))
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.began = time.time()  # wall clock: the child reports when it became ready on the same clock
        self.process = subprocess.Popen(
            [sys.executable, script, "--child-train", model_name, "--child-device", device,
             "--iterations", str(iterations), "--child-cpu", str(cpu)],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True)

    def ask(self, request: str | None = None) -> dict:
        if request is not None:
            self.process.stdin.write(request + "\n")
            self.process.stdin.flush()
        for line in self.process.stdout:
            if line.startswith(CHILD_REPLY):
                return json.loads(line[len(CHILD_REPLY):])
        self.process.wait()
        self.stderr.seek(0)
        raise RuntimeError(f"train step child on {self.device} exited ({self.process.returncode}) without "
                           f"answering {request or 'ready'!r}:\n{self.stderr.read()[-4000:]}")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.stderr.close()


def check_same_parameters(model_name: str, results: dict) -> None:
    """Raises when the devices' optimizers got different parameters (count,
    elements): then the two steps are two programs, and their ratio means
    nothing. A plugin whose Module.to() untied shared weights (no PrivateUse1
    answer to aten::_has_compatible_shallow_copy_type) gave a GPT-2 model one
    parameter more on cudadev, unnoticed, before this check."""
    seen = {device: tuple(r["parameters"]) for device, r in results.items() if r.get("parameters")}
    if len(set(seen.values())) > 1:
        raise RuntimeError(
            f"train step {model_name}: the devices' optimizers hold different parameters ("
            + ", ".join(f"{device}: {n} tensors, {numel} elements" for device, (n, numel) in seen.items())
            + "): not the same model, so no ratio. Did Module.to() make new Parameters on one device "
            "(untying shared weights)? A PrivateUse1 plugin answers aten::_has_compatible_shallow_copy_type.")


def train_steps(model_name: str, pairs: int, iterations: int, devices: tuple[str, str] = ("cuda", "cudadev"),
                script: str = __file__) -> dict:
    """Both devices' train steps, each in a process of its own, both alive
    for the whole run and sampled in turn (the order flips every pair), their
    launching threads pinned to the same CPU: the host's drift and a process's
    placement then weigh on both sides of a pair alike, where a process per
    sample measured each device on whatever core and in whatever moment it got
    (pairs from 0.80 to 1.37 on one H200 host). {device: {"samples": [...],
    "loss": ..., "first_step_ms": ..., "start_s": ...}}."""
    cpu = max(os.sched_getaffinity(0))
    children = {device: TrainChild(model_name, device, iterations, cpu, script) for device in devices}
    try:
        results = {}
        for device, child in children.items():  # both compile at once; each waits for its own
            ready = child.ask()
            results[device] = {"samples": [], "first_step_ms": ready["first_step_ms"],
                               "start_s": ready["ready_at"] - child.began, "parameters": ready.get("parameters")}
            print(f"train step {model_name} on {device}: ready after {results[device]['start_s']:.0f} s", flush=True)
        check_same_parameters(model_name, results)
        for pair in range(pairs):
            for device in (devices if pair % 2 == 0 else devices[::-1]):
                results[device]["samples"].append(children[device].ask("sample")["ms"])
            print(f"train step {model_name}, pair {pair}: " + ", ".join(
                f"{device} {results[device]['samples'][-1]:.3f} ms" for device in devices), flush=True)
        for device, child in children.items():
            results[device]["loss"] = child.ask("end")["loss"]
        return results
    finally:
        for child in children.values():
            child.close()


PARTS = ("compile", "steady", "train", "graphs")
PART_GROUPS = {"compile": ("compile",), "steady": ("steady state", "device time", "eager"), "train": ("train step",),
               "graphs": ("graphs",)}  # --parts -> the groups of the rows they make


def earlier_rows(path: pathlib.Path, measured_again: Callable[[dict], bool]) -> list[dict]:
    """The rows of the machine's current result that this run does not
    measure again, each with the commit it was measured at: the file stays
    one current result for everything when a run measures some of it."""
    if not path.is_file():
        return []
    earlier = json.loads(path.read_text())
    return [{**row, "commit": row.get("commit", earlier["commit"])} for row in earlier["rows"]
            if not measured_again(row)]


def train_model_of(row: dict) -> str | None:
    """The train model a train-step row is of (rows written before they were
    tagged: the longest TRAIN_MODELS label its name starts with)."""
    if "train_model" in row:
        return row["train_model"]
    labels = [(len(label), model) for model, label in TRAIN_MODELS.items() if row["name"].startswith(label + ",")]
    return max(labels)[1] if labels else None


def run(iterations: int, pairs: int, train_pairs: int, save,
        parts: tuple[str, ...] = PARTS, train_models: tuple[str, ...] = tuple(TRAIN_MODELS),
        train_iterations: int = 50) -> tuple[list[dict], dict]:
    """The measurements of `parts` (compile times, steady-state forward rows,
    train steps); save(rows, meta) is called after each model, so a run cut
    short still leaves what it measured."""
    import devbridge
    import triton

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    load_plugin()
    rows = []
    kernels = {}
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_model(), "logical_cpus": os.cpu_count(), "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__, "python": platform.python_version(), "devbridge": devbridge.__version__,
        "commit": git_commit(), "iterations": iterations, "pairs": pairs, "train_pairs": train_pairs,
        "train_iterations": train_iterations,
        "kernels": kernels, "triton": triton.__version__, "parts": list(parts), "train_models": list(train_models),
    }  # fmt: skip
    if "compile" in parts:
        compile_rows(rows)
        save(rows, meta)
    if "steady" in parts:
        steady_rows(rows, kernels, iterations, pairs, save, meta)
    if "train" in parts:
        train_rows(rows, train_iterations, train_pairs, save, meta, train_models)
    if "graphs" in parts:
        graph_rows(rows, iterations, pairs, save, meta)
    return rows, meta


def compile_rows(rows: list[dict]) -> None:
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
    for kind in ("cold", "warm"):
        value = {r["device"]: r["value"] for r in rows if r["group"] == "compile" and f"{kind} caches" in r["name"]}
        ratio = value["cudadev"] / value["cuda"]
        extra = {"target": "<= 1.2", "target_met": ratio <= 1.2} if kind == "warm" else {}
        rows.append(row(f"compile, GPT block forward, {kind}: ratio cudadev/cuda", ratio, "ratio", group="compile",
                        **extra))


def steady_rows(rows: list[dict], kernels: dict, iterations: int, pairs: int, save, meta: dict) -> None:
    for model in models():
        name, launch_bound = model.name, model.launch_bound
        torch._dynamo.reset()
        steps = {device: model.make(device) for device in model.devices}
        samples = alternating_ms(steps, iterations, pairs)
        for device in model.devices:
            rows.append(row(f"{name}: torch.compile on {device}", statistics.median(samples[device]), "ms/iter",
                            group="steady state", device=device, launch_bound=launch_bound,
                            samples=samples[device], model=name, series=f"torch.compile on {device}"))
        if not launch_bound:
            per_kernel = {device: kernel_times_us(step, device) for device, step in steps.items()}
            kernels[name] = per_kernel
            for device in model.devices:
                rows.append(row(f"{name}: GPU kernel time on {device} (profiler)",
                                sum(per_kernel[device].values()) / 1e3, "ms/iter", group="device time",
                                device=device))
            gpu_ratio = sum(per_kernel["cudadev"].values()) / sum(per_kernel["cuda"].values())
            rows.append(row(f"{name}: GPU kernel time ratio cudadev/cuda", gpu_ratio, "ratio", target="<= 1.02",
                            target_met=gpu_ratio <= 1.02, group="device time"))
        if model.eager is not None:
            eager = alternating_ms({device: model.eager(device) for device in model.devices}, iterations, 3)
            for device in model.devices:
                rows.append(row(f"{name}: eager on {device}", statistics.median(eager[device]), "ms/iter",
                                group="eager", device=device))
        summary = ratio_summary(samples)
        if launch_bound:
            rows.append(row(f"{name}: ratio cudadev/cuda (launch-bound, reported apart)", summary["median"], "ratio",
                            group="steady state", launch_bound=True, spread=summary))
        else:
            rows.append(row(f"{name}: ratio cudadev/cuda", summary["median"], "ratio", target=f"<= {TARGET}",
                            target_met=summary["median"] <= TARGET, group="steady state", launch_bound=False,
                            spread=summary))
        save(rows, meta)


def train_rows(rows: list[dict], iterations: int, train_pairs: int, save, meta: dict,
               train_models: tuple[str, ...] = tuple(TRAIN_MODELS)) -> None:
    for model_name in train_models:
        label = TRAIN_MODELS[model_name]
        results = train_steps(model_name, train_pairs, iterations)
        samples = {device: results[device]["samples"] for device in results}
        for device in results:
            rows.append(row(f"{label}, train step (compiled fwd+bwd, AdamW foreach): torch.compile on {device}, "
                            "a process of its own", statistics.median(samples[device]), "ms/iter", group="train step",
                            device=device, samples=samples[device], loss=results[device]["loss"],
                            first_step_ms=results[device]["first_step_ms"], start_s=results[device]["start_s"],
                            model=f"{label}, train step", series=f"torch.compile on {device}",
                            train_model=model_name))
        rows.append(train_ratio_row(f"{label}, train step: ratio cudadev/cuda", results, TRAIN_TARGET[model_name],
                                    group="train step", train_model=model_name))
        save(rows, meta)


# ---------------------------------------------------------------- reduce-overhead (graph capture)

GRAPH_SERIES = {"cuda": "reduce-overhead on cuda", "cudadev": "reduce-overhead on cudadev",
                "cudadev default": "default mode on cudadev", "cuda default": "default mode on cuda"}


def _each_step_begins(step):
    """The step as graph trees expect a loop over it: a new step begins each
    call (torch.compiler.cudagraph_mark_step_begin; it only counts, and is
    called for every series alike)."""

    def marked():
        torch.compiler.cudagraph_mark_step_begin()
        return step()

    return marked


def graph_rows(rows: list[dict], iterations: int, pairs: int, save, meta: dict) -> None:
    """reduce-overhead on cudadev against reduce-overhead on cuda and against
    default mode on cudadev and on cuda, the four alternating in this process."""
    from devbridge.inductor import graph_capture_counts

    for model in models():
        if not model.graphs:
            continue
        name = model.name
        torch._dynamo.reset()
        before = graph_capture_counts()
        steps = {"cuda": model.make("cuda", mode="reduce-overhead"),
                 "cudadev": model.make("cudadev", mode="reduce-overhead"),
                 "cudadev default": model.make("cudadev"), "cuda default": model.make("cuda")}
        samples = alternating_ms({label: _each_step_begins(step) for label, step in steps.items()}, iterations, pairs)
        after = graph_capture_counts()
        counts = {key: after[key] - before.get(key, 0) for key in after}
        for label, series in GRAPH_SERIES.items():
            rows.append(row(f"{name}: {series}", statistics.median(samples[label]), "ms/iter", group="graphs",
                            device=label.split()[0], launch_bound=model.launch_bound, samples=samples[label],
                            model=name, series=series))
        # without a capture on cudadev there is nothing to compare: the targets are not met
        captured = counts.get("captures", 0) > 0 and counts.get("not_captured", 0) == 0
        parity = ratio_summary(samples, "cudadev", "cuda")
        rows.append(row(f"{name}: reduce-overhead ratio cudadev/cuda (graphs captured on cudadev: "
                        f"{counts.get('captures', 0)}, left uncaptured: {counts.get('not_captured', 0)})",
                        parity["median"], "ratio", target=f"<= {GRAPH_TARGET}",
                        target_met=captured and parity["median"] <= GRAPH_TARGET, group="graphs",
                        launch_bound=model.launch_bound, spread=parity, graph_counts=counts))
        speedup = ratio_summary(samples, "cudadev default", "cudadev")
        extra = ({"target": f">= {GRAPH_SPEEDUP_TARGET}",
                  "target_met": captured and speedup["median"] >= GRAPH_SPEEDUP_TARGET} if model.launch_bound else {})
        rows.append(row(f"{name}: on cudadev, default mode / reduce-overhead (speed-up)", speedup["median"], "ratio",
                        group="graphs", launch_bound=model.launch_bound, spread=speedup, **extra))
        # The peer's own speed-up, graph trees over default mode on cuda: what
        # reduce-overhead buys on the same GPU where torch supports it.
        peer = ratio_summary(samples, "cuda default", "cuda")
        rows.append(row(f"{name}: on cuda, default mode / reduce-overhead (speed-up, for comparison)",
                        peer["median"], "ratio", group="graphs", launch_bound=model.launch_bound, spread=peer))
        save(rows, meta)


def kernel_table(meta: dict) -> str:
    lines = []
    for model, per_device in meta.get("kernels", {}).items():
        cuda, cudadev = per_device.get("cuda", {}), per_device.get("cudadev", {})
        lines += ["", f"## GPU time per kernel: {model} (us per iteration)", "",
                  "| kernel | cuda | cudadev | cudadev/cuda |", "|---|---:|---:|---:|"]
        for name in sorted(set(cuda) | set(cudadev), key=lambda n: -max(cuda.get(n, 0), cudadev.get(n, 0))):
            a, b = cuda.get(name), cudadev.get(name)
            ratio = f"{b / a:.3f}" if a and b else ("only on cudadev" if b else "only on cuda")
            lines.append(f"| `{name[:90]}` | {'' if a is None else f'{a:.1f}'} | "
                         f"{'' if b is None else f'{b:.1f}'} | {ratio} |")
        lines.append(f"| total | {sum(cuda.values()):.1f} | {sum(cudadev.values()):.1f} | "
                     f"{sum(cudadev.values()) / max(sum(cuda.values()), 1e-9):.3f} |")
    return "\n".join(lines) + "\n"


def table(rows: list[dict], meta: dict) -> str:
    lines = [f"# torch.compile: cudadev vs cuda ({meta['gpu']}, torch {meta['torch']}, Triton {meta['triton']}, "
             f"commit {meta['commit']}, parts: {', '.join(meta.get('parts', PARTS))})", ""]
    commits = collections.Counter(r["commit"] for r in rows if r.get("commit"))
    if len(commits) > 1:  # rows kept from earlier runs
        lines += ["Rows measured at: " + ", ".join(f"{commit} ({n})" for commit, n in commits.items()) + ".", ""]
    lines += ["| measurement | value | unit | target | met |", "|---|---|---|---|---|"]
    for r in rows:
        met = "" if r["target"] is None else ("met" if r["target_met"] else "NOT MET")
        if r.get("problem"):
            met += f" ({r['problem']})"
        value = "n/a" if r["value"] is None else f"{r['value']:.4g}"
        spread = r.get("spread")
        if spread:
            value += f" (pairs {spread['min']:.3f}-{spread['max']:.3f}, n={spread['pairs']})"
        lines.append(f"| {r['name']} | {value} | {r['unit']} | {r['target'] or ''} | {met} |")
    return "\n".join(lines) + "\n" + kernel_table(meta)


def plot(rows: list[dict], meta: dict, path: pathlib.Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        return f"matplotlib is not available ({error})"
    bars = [r for r in rows if r["unit"] == "ms/iter" and "series" in r]
    if not bars:
        return "no per-iteration rows to plot"
    names = list(dict.fromkeys(r["model"] for r in bars))
    series = list(dict.fromkeys(r["series"] for r in bars))
    figure, axis = plt.subplots(figsize=(10, 1.0 + 0.45 * len(names) * len(series)))
    width = 0.8 / len(series)
    for k, label in enumerate(series):
        offset = (k - (len(series) - 1) / 2) * width
        values = [next((r["value"] for r in bars if r["series"] == label and r["model"] == n), 0.0)
                  for n in names]  # 0: not measured in this series
        axis.barh([i + offset for i in range(len(names))], values, height=width, label=label)
    axis.set_yticks(range(len(names)), [n.replace(", ", "\n", 1) for n in names], fontsize=8)
    axis.set_xscale("log")
    axis.set_xlabel("ms per iteration (log)")
    axis.set_title(f"torch.compile, {meta['gpu']}, commit {meta['commit']}")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--machine", default="h200")
    parser.add_argument("--results-dir", type=pathlib.Path, default=HERE / "results")
    parser.add_argument("--iterations", type=int, default=20, help="steps per sample of a forward model")
    parser.add_argument("--train-iterations", type=int, default=50,
                        help="train steps per sample (a sample of 20 steps, 60 ms, caught the host's jitter)")
    parser.add_argument("--pairs", type=int, default=5, help="alternating cuda/cudadev samples (at least 5)")
    parser.add_argument("--train-pairs", type=int, default=15,
                        help="alternating cuda/cudadev train-step samples, from two live processes (at least 5)")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma list of {', '.join(PARTS)} (default: all); every run saves to "
                             "compile_<machine>.*, the parts it ran recorded in the JSON")
    parser.add_argument("--train-models", default=",".join(TRAIN_MODELS),
                        help=f"comma list of the train steps to run: {', '.join(TRAIN_MODELS)} (default: all)")
    parser.add_argument("--child-train", choices=tuple(TRAIN_MODELS), help=argparse.SUPPRESS)
    parser.add_argument("--child-device", help=argparse.SUPPRESS)
    parser.add_argument("--child-cpu", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_train:
        train_step_child(args.child_train, args.child_device, args.iterations, args.child_cpu)
        return 0
    parts = tuple(part for part in args.parts.split(",") if part)
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        parser.error(f"--parts takes a comma list of {', '.join(PARTS)}; got {args.parts!r}")
    train_models = tuple(model for model in args.train_models.split(",") if model)
    if not train_models or set(train_models) - set(TRAIN_MODELS):
        parser.error(f"--train-models takes a comma list of {', '.join(TRAIN_MODELS)}; got {args.train_models!r}")
    args.results_dir.mkdir(parents=True, exist_ok=True)
    # One current result per machine (bench/README.md): a run of some parts
    # or train models replaces their rows and keeps the others, each row with
    # the commit it was measured at.
    stem = args.results_dir / f"compile_{args.machine}"

    groups = {group for part in parts for group in PART_GROUPS[part]}
    kept = earlier_rows(stem.with_suffix(".json"), lambda row: row["group"] in groups and (
        row["group"] != "train step" or train_model_of(row) in train_models))
    order = [group for part in PARTS for group in PART_GROUPS[part]]

    def save(rows, meta):
        rows = sorted(kept + [{**row, "commit": meta["commit"]} for row in rows],
                      key=lambda row: order.index(row["group"]) if row["group"] in order else len(order))
        stem.with_suffix(".json").write_text(json.dumps({**meta, "machine": args.machine, "rows": rows}, indent=1))
        stem.with_suffix(".md").write_text(table(rows, meta))
        plot(rows, meta, stem.with_suffix(".png"))
        print(f"saved {len(rows)} rows", flush=True)

    rows, meta = run(args.iterations, args.pairs, args.train_pairs, save, parts, train_models, args.train_iterations)
    print(table(rows, meta))
    problem = plot(rows, meta, stem.with_suffix(".png"))
    if problem:
        print(problem)
    return 0


if __name__ == "__main__":
    sys.exit(main())
