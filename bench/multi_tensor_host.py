"""Host time of the multi-tensor operators an AdamW(foreach=True) step calls,
torch.cuda beside cudadev on the same GPU: where an optimizer step's extra
host time on a plugin goes (bench/train_profile.py's optimizer.step phase).

Each device runs in a process of its own (the cuda peer without a plugin
loaded), twice, alternating; a value is the median host time per call over
the repeats of both processes. The tensors are small (1024 floats), so the
GPU keeps up and the time is what the host spends per call. Every operator
is timed on lists of 1, 12 and 48 tensors: the slope between 12 and 48 is
the cost per tensor, the rest the cost per call. On cudadev every one of
them is torch.cuda's kernel run through cudadev's fallback on CUDA aliases
of the tensors (plugins/cudadev/csrc/foreach.cpp, fallback.cpp); x.mul_ (one
tensor, whatever the list length) is the fallback's cost per call alone.
Then a whole AdamW(foreach=True) step over the parameters of
bench/attention.py's GPT-2-style and Llama-style models (bf16, their real
shapes, random gradients), the queue drained after the timed steps: host and
GPU together, the optimizer phase of those models' train steps alone.

    TORCH_DEVICE_BACKEND_AUTOLOAD=0 python bench/multi_tensor_host.py --machine h200 --results-dir bench/results
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from machine_info import git_commit  # noqa: E402

SIZES = (1, 12, 48)
CALLS = 200
REPEATS = 5
MODEL_CALLS = 20  # a model's step takes milliseconds of GPU time
MODELS = ("gpt2", "llama")


def operations(torch, device: str):
    def adamw_step(n):
        params = [torch.nn.Parameter(torch.randn(1024, device=device)) for _ in range(n)]
        for p in params:
            p.grad = torch.randn_like(p)
        optimizer = torch.optim.AdamW(params, lr=1e-3, foreach=True)
        return optimizer.step

    def lists(n, count):
        return [[torch.rand(1024, device=device) + 1 for _ in range(n)] for _ in range(count)]

    def on_lists(count, call):
        def make(n):
            tensors = lists(n, count)
            return lambda: call(n, *tensors)
        return make

    return {
        "x.mul_ (one tensor)": on_lists(1, lambda n, xs: xs[0].mul_(1.0)),
        "_foreach_mul_.Scalar": on_lists(1, lambda n, xs: torch._foreach_mul_(xs, 1.0)),
        "_foreach_lerp_.Scalar": on_lists(2, lambda n, xs, ys: torch._foreach_lerp_(xs, ys, 0.0)),
        "_foreach_addcdiv_.ScalarList": on_lists(
            3, lambda n, xs, ys, zs: torch._foreach_addcdiv_(xs, ys, zs, [0.0] * n)),
        "_foreach_sqrt (fresh results)": on_lists(1, lambda n, xs: torch._foreach_sqrt(xs)),
        "AdamW(foreach=True).step": adamw_step,
    }


def child(device: str) -> None:
    import torch

    if device == "cudadev":
        import torch_cudadev  # noqa: F401

    def synchronize():
        if device != "cpu":  # the CPU, to try this script on a machine without a GPU
            torch.accelerator.synchronize()

    results = {}
    for name, make in operations(torch, device).items():
        for n in SIZES:
            try:
                call = make(n)
                for _ in range(20):
                    call()
            except (RuntimeError, TypeError) as error:  # an overload this torch lacks
                results[f"{name}|{n}"] = {"error": str(error).splitlines()[0]}
                continue
            results[f"{name}|{n}"] = {"samples_us": per_call_us(call, CALLS, synchronize, drained=False)}
    for kind in MODELS:
        step, count = model_adamw_step(torch, device, kind)
        for _ in range(3):
            step()
        # Keyed by the model, not the count: a device whose Module.to() untied
        # shared weights has more parameter tensors, and must show as such.
        results[f"AdamW(foreach=True).step, {kind} parameters (bf16, with the GPU)|model"] = {
            "samples_us": per_call_us(step, MODEL_CALLS, synchronize, drained=True), "tensors": count}
    print(json.dumps(results))


def per_call_us(call, calls: int, synchronize, drained: bool) -> list[float]:
    """REPEATS samples of the time per call over `calls` calls, each begun on
    an empty queue; `drained`: the queue is emptied inside the timing too (the
    GPU's time counted), else only the host's time is."""
    samples = []
    for _ in range(REPEATS):
        synchronize()
        began = time.perf_counter()
        for _ in range(calls):
            call()
        if drained:
            synchronize()
        samples.append((time.perf_counter() - began) / calls * 1e6)
    synchronize()
    return samples


def model_adamw_step(torch, device: str, kind: str):
    """AdamW's step over the parameters of bench/attention.py's model `kind`,
    each with a random gradient; and how many parameter tensors it has."""
    import attention_models

    params = list(attention_models.make(kind).to(device=device, dtype=torch.bfloat16).parameters())
    generator = torch.Generator().manual_seed(1)
    for p in params:
        p.grad = torch.randn(p.shape, generator=generator).to(device=device, dtype=p.dtype)
    return torch.optim.AdamW(params, lr=1e-4, foreach=True).step, len(params)


def run_child(device: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child-device", device], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machine", default="h200")
    parser.add_argument("--results-dir", type=pathlib.Path, default=HERE / "results")
    parser.add_argument("--child-device", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_device:
        child(args.child_device)
        return 0

    import torch

    samples = {"cuda": {}, "cudadev": {}}
    for _ in range(2):
        for device in ("cuda", "cudadev"):
            for key, value in run_child(device).items():
                samples[device].setdefault(key, []).extend(value.get("samples_us", []))
                if "error" in value:
                    samples[device].setdefault(key + "|error", value["error"])
                if "tensors" in value:
                    samples[device][key + "|tensors"] = value["tensors"]
    rows = []
    for key in samples["cuda"]:
        if key.endswith(("|error", "|tensors")):
            continue
        name, n = key.rsplit("|", 1)
        values = {d: statistics.median(samples[d][key]) if samples[d].get(key) else None for d in samples}
        ratio = values["cudadev"] / values["cuda"] if values["cuda"] and values["cudadev"] else None
        error = samples["cuda"].get(key + "|error") or samples["cudadev"].get(key + "|error")
        counts = {d: samples[d].get(key + "|tensors") for d in samples}
        if n == "model" and counts["cuda"] != counts["cudadev"]:
            ratio = None  # two different models: no ratio
            error = (f"the model has {counts['cudadev']} parameter tensors on cudadev and "
                     f"{counts['cuda']} on cuda: not the same model (did Module.to() untie shared weights?)")
        rows.append({"name": name, "tensors": counts["cuda"] if n == "model" else int(n), "unit": "us/call",
                     "cuda": values["cuda"], "cudadev": values["cudadev"], "ratio": ratio, "target": None,
                     "target_met": None, "error": error})
    meta = {"machine": args.machine, "commit": git_commit(), "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(0)}
    lines = [f"# Host time per call of the multi-tensor operators of an AdamW step "
             f"({meta['gpu']}, torch {meta['torch']}, commit {meta['commit']})", "",
             "| operator | tensors | cuda us | cudadev us | cudadev/cuda |", "|---|---:|---:|---:|---:|"]
    def fmt(value, digits=1):
        return "—" if value is None else f"{value:.{digits}f}"

    for r in rows:
        lines.append(f"| {r['name']} | {r['tensors']} | {fmt(r['cuda'])} | {fmt(r['cudadev'])} | "
                     f"{fmt(r['ratio'], 2)} |")
    errors = [f"- {r['name']}: {r['error']}" for r in rows if r["error"]]
    if errors:
        lines += ["", "Rows with an error:", "", *errors]
    lines += ["", "Per tensor (slope from 12 to 48 tensors), us:", ""]
    by_name = {}
    for r in rows:
        by_name.setdefault(r["name"], {})[r["tensors"]] = r
    for name, per_n in by_name.items():
        if 12 in per_n and 48 in per_n and all(per_n[k]["cuda"] and per_n[k]["cudadev"] for k in (12, 48)):
            slope = {d: (per_n[48][d] - per_n[12][d]) / 36 for d in ("cuda", "cudadev")}
            lines.append(f"- {name}: cuda {slope['cuda']:.2f}, cudadev {slope['cudadev']:.2f}")
    text = "\n".join(lines) + "\n"
    print(text)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stem = f"multi_tensor_host_{args.machine}"
    (args.results_dir / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    (args.results_dir / f"{stem}.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
