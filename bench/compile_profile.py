"""Where the host time of a torch.compile step goes, per device: the diagnosis
behind bench/compile.py's steady-state ratio (bench/README.md).

Four parts, each on every device given, in one process:
  1. the host operations Inductor's generated wrapper performs around its
     kernels, each timed alone (ns per call): the device guard and set-device
     lines, get_raw_stream, the allocation, an extern mm into an out= buffer;
     the guard and stream lines are the ones Inductor generates for the device
     (its registered device op overrides), not hand-written equivalents;
  2. torch.profiler's CPU operator table of compiled steps (self time), in
     each mode of --modes (default; reduce-overhead: captured graphs replayed);
  3. cProfile of compiled steps (Python functions, by own time), the same;
  4. cProfile of a warm compile (Dynamo reset, caches filled), by cumulative time;
  5. the same warm compile in-process (compile_threads=1), cProfile by own time;
  6. what a fresh compile worker pays before its first kernel of the device
     (a subprocess: import torch, the plugin's entry point, devbridge's
     Triton driver, one cached kernel module loaded and precompiled);
  7. extern matmuls at the GPT block's shapes, host ns per call (queue kept short).

    TORCH_DEVICE_BACKEND_AUTOLOAD=0 python bench/compile_profile.py --plugin torch_cudadev \
        --devices cuda,cudadev --machine h200 --results-dir bench/results
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import io
import json
import os
import pathlib
import pstats
import statistics
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "python"))
CACHE = pathlib.Path(tempfile.mkdtemp(prefix="devbridge-compile-profile-"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(CACHE / "inductor"))
os.environ.setdefault("TRITON_CACHE_DIR", str(CACHE / "triton"))

import torch  # noqa: E402

import compile_cases as cases  # noqa: E402
from devbridge.check.timing import ns_per_call  # noqa: E402
from machine_info import git_commit  # noqa: E402


def synchronize(device: str) -> None:
    if device.startswith("cuda") and not device.startswith("cudadev"):
        torch.cuda.synchronize()
    else:
        torch.accelerator.synchronize()


def wrapper_operations(device: str) -> dict[str, float]:
    """Part 1: ns per call of each host operation of a generated wrapper."""
    from torch._inductor.codegen.common import get_device_op_overrides

    overrides = get_device_op_overrides(device)
    namespace = {"torch": torch}
    exec(overrides.import_get_raw_stream_as("get_raw_stream"), namespace)
    guard = compile(f"with {overrides.device_guard(0)}:\n    {overrides.set_device(0)}", "<guard>", "exec")
    get_raw_stream = namespace["get_raw_stream"]
    a, b = torch.randn(64, 32, device=device), torch.randn(32, 64, device=device)
    out = torch.empty(64, 64, device=device)
    results = {
        f"device guard + set device ({overrides.device_guard(0)})": ns_per_call(lambda: exec(guard, namespace)),
        "get_raw_stream(0)": ns_per_call(lambda: get_raw_stream(0)),
        "empty_strided((64, 64), (64, 1))": ns_per_call(
            lambda: torch.empty_strided((64, 64), (64, 1), device=device, dtype=torch.float32)),
        "torch.mm(a, b, out=buf), 64x32 @ 32x64": ns_per_call(lambda: torch.mm(a, b, out=out)),
        "torch.addmm(bias, a, b, out=buf), 64x32 @ 32x64": ns_per_call(
            lambda: torch.addmm(out, a, b, out=out)),
        "a.as_strided((32, 64), (1, 32))": ns_per_call(lambda: a.as_strided((32, 64), (1, 32))),
    }
    if device == "cuda":
        from torch._C._dynamo.guards import _empty_strided_cuda

        results["empty_strided_cuda((64, 64), (64, 1)) (cuda's fast path)"] = ns_per_call(
            lambda: _empty_strided_cuda((64, 64), (64, 1), torch.float32))
    synchronize(device)
    return results


def compiled_steps(device: str, batch: int, tokens: int, mode: str) -> dict[str, object]:
    """The steps of parts 2 and 3, compiled in torch.compile's `mode`; under
    reduce-overhead each call begins a new step, as a training loop's would."""
    torch.set_grad_enabled(False)
    torch.manual_seed(0)
    mode_arg = None if mode == "default" else mode
    x, y = cases.to((cases._randn(4096), cases._randn(4096, seed=1)), device)
    mlp = cases.MLP().to(device)
    x_mlp = cases._randn(64, 32).to(device)
    block = cases.Block(768, 12).to(device)
    x_block = cases._randn(batch, tokens, 768).to(device)
    fn_pointwise = torch.compile(cases.pointwise_chain, fullgraph=True, mode=mode_arg)
    fn_mlp, fn_block = torch.compile(mlp, mode=mode_arg), torch.compile(block, mode=mode_arg)
    steps = {"pointwise chain, 4096 elements": lambda: fn_pointwise(x, y),
             "MLP 32-64-32, batch 64": lambda: fn_mlp(x_mlp),
             f"GPT block 768/12, {batch}x{tokens}, forward": lambda: fn_block(x_block)}
    if mode == "reduce-overhead":
        mark = torch.compiler.cudagraph_mark_step_begin
        steps = {name: (lambda step=step: (mark(), step())) for name, step in steps.items()}
    return steps


def operator_table(step, device: str, iterations: int) -> str:
    """Part 2: torch.profiler's CPU operators, self time."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        step()
    synchronize(device)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(iterations):
            step()
        synchronize(device)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=70)


def python_profile(fn, sort: str, limit: int) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    fn()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).strip_dirs().sort_stats(sort).print_stats(limit)
    return text.getvalue()


def steady_state_profile(step, device: str, iterations: int, limit: int = 30) -> str:
    """Part 3: cProfile of compiled steps, by own time, in microseconds per
    step (pstats' own table rounds a step's functions to 0.000 s)."""
    for _ in range(3):
        step()
    synchronize(device)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(iterations):
        step()
    synchronize(device)
    profiler.disable()
    stats = pstats.Stats(profiler).strip_dirs().stats
    per_step = 1e6 / iterations
    rows = sorted(stats.items(), key=lambda item: -item[1][2])
    total = sum(own for _, _, own, _, _ in stats.values()) * per_step
    lines = [f"cProfile's own total: {total:.1f} us per step (profiled; includes cProfile's overhead)", "",
             "| function | calls per step | own us per step | cumulative us per step |", "|---|---:|---:|---:|"]
    for (filename, line, name), (_, calls, own, cumulative, _) in rows[:limit]:
        where = f"{filename}:{line}({name})" if line else name
        lines.append(f"| `{where}` | {calls / iterations:g} | {own * per_step:.1f} | {cumulative * per_step:.1f} |")
    return "\n".join(lines)


def block_compile(device: str, batch: int, tokens: int):
    """After a Dynamo reset: a function that compiles and runs the GPT block once."""
    torch.set_grad_enabled(False)
    torch._dynamo.reset()
    model = cases.Block(768, 12).to(device)
    x = cases._randn(batch, tokens, 768).to(device)

    def compile_and_run():
        torch.compile(model)(x)
        synchronize(device)

    return compile_and_run


def warm_compile_profile(device: str, batch: int, tokens: int) -> tuple[float, float, str]:
    """Part 4: cold compile (unprofiled), then a warm one under cProfile."""
    times = []
    report = ""
    for warm in (False, True):
        compile_and_run = block_compile(device, batch, tokens)
        began = time.perf_counter()
        if warm:
            report = python_profile(compile_and_run, "cumulative", 60)
        else:
            compile_and_run()
        times.append(time.perf_counter() - began)
    return times[0], times[1], report


def warm_compile_in_process(device: str, batch: int, tokens: int) -> str:
    """Part 5: as part 4 with compile_threads=1 (no worker pool), own caches."""
    from torch._inductor import config

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(CACHE / f"inductor-{device}-in-process")
    os.environ["TRITON_CACHE_DIR"] = str(CACHE / f"triton-{device}-in-process")
    with config.patch(compile_threads=1):
        cold, warm, _ = warm_compile_profile(device, batch, tokens)
        report = python_profile(block_compile(device, batch, tokens), "tottime", 30)
    return f"cold {cold:.2f} s, warm {warm:.2f} s; cProfile of one more warm compile, own time\n\n{report}"


FRESH_WORKER = r"""
import glob, os, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import importlib.metadata
hooks = [e for e in importlib.metadata.entry_points(group="torch.backends") if e.value.startswith(sys.argv[1])]
hooks[0].load()()
t2 = time.perf_counter()
import devbridge.triton
devbridge.triton.activate()
devbridge.triton.deactivate()
t3 = time.perf_counter()
from torch._inductor.codecache import PyCodeCache
times = []
for path in sorted(glob.glob(os.path.join(sys.argv[2], "**", "*.py"), recursive=True)):
    text = open(path).read()
    if "devbridge_worker" not in text or "@triton.jit" not in text:
        continue
    name = text.split("@triton.jit")[1].split("def ")[1].split("(")[0]
    began = time.perf_counter()
    kernel = getattr(PyCodeCache.load_by_key_path(os.path.basename(path)[:-3], path), name)
    kernel.precompile(warm_cache_only=True)
    times.append((name, time.perf_counter() - began))
    if len(times) == 3:
        break
print(f"import torch {t1 - t0:.3f} s; the plugin's entry point {t2 - t1:.3f} s; "
      f"devbridge's Triton driver activated {t3 - t2:.3f} s")
for name, took in times:
    print(f"kernel module loaded + precompile(warm_cache_only=True): {name} {took:.3f} s")
"""


def fresh_worker(device: str, plugin: str) -> str:
    """Part 6, in a subprocess started as Inductor starts its workers."""
    import subprocess

    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(CACHE / f"inductor-{device}"),
               TRITON_CACHE_DIR=str(CACHE / f"triton-{device}"))
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", FRESH_WORKER, plugin, str(CACHE / f"inductor-{device}")],
                          capture_output=True, text=True, env=env, timeout=240)
    took = time.perf_counter() - began
    return f"{done.stdout}{done.stderr[-3000:]}(whole subprocess {took:.2f} s, exit {done.returncode})\n"


def extern_matmuls(device: str, batch: int, tokens: int) -> dict[str, float]:
    """Part 7: host ns per call at the GPT block's shapes; 100 calls per
    sample, so the GPU queue never fills and the host time is what is timed."""
    rows = batch * tokens
    x = torch.randn(rows, 768, device=device)
    weight = torch.randn(2304, 768, device=device)
    out = torch.empty(rows, 2304, device=device)
    q = torch.randn(batch * 12, tokens, 64, device=device)
    scores = torch.empty(batch * 12, tokens, tokens, device=device)

    def timed(fn):
        samples = []
        for _ in range(9):
            synchronize(device)
            began = time.perf_counter_ns()
            for _ in range(100):
                fn()
            samples.append((time.perf_counter_ns() - began) / 100)
        synchronize(device)
        return statistics.median(samples)

    return {f"mm out=, ({rows}, 768) @ weight.t() (768, 2304)": timed(lambda: torch.mm(x, weight.t(), out=out)),
            f"bmm out=, ({batch * 12}, {tokens}, 64) @ ({batch * 12}, 64, {tokens})": timed(
                lambda: torch.bmm(q, q.transpose(1, 2), out=scores))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plugin", default="torch_cudadev", help="module that loads the plugin (claims PrivateUse1)")
    parser.add_argument("--devices", default="cuda,cudadev", help="comma list, e.g. cuda,cudadev or simdev")
    parser.add_argument("--machine", default="h200")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--results-dir", type=pathlib.Path, default=HERE / "results")
    parser.add_argument("--block-shape", default="8,512", help="batch,tokens of the GPT block's input")
    parser.add_argument("--skip-compile-profile", action="store_true", help="leave out parts 4 to 6")
    parser.add_argument("--modes", default="default",
                        help="comma list of torch.compile modes for parts 2 and 3: default, reduce-overhead")
    args = parser.parse_args()
    importlib.import_module(args.plugin)
    import devbridge.inductor

    devbridge.inductor.register()
    devices = args.devices.split(",")
    batch, tokens = (int(n) for n in args.block_shape.split(","))
    sections, operations = [], {}
    if not args.skip_compile_profile:
        for device in devices:  # first, while the caches are empty
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(CACHE / f"inductor-{device}")
            os.environ["TRITON_CACHE_DIR"] = str(CACHE / f"triton-{device}")
            cold, warm, report = warm_compile_profile(device, batch, tokens)
            sections.append(f"## 4. warm compile of the GPT block forward on {device}: cold {cold:.2f} s, "
                            f"warm {warm:.2f} s (cProfile of the warm one, cumulative)\n\n{report}")
    if not args.skip_compile_profile:
        for device in devices:
            if device != "cuda":
                sections.append(f"## 6. a fresh compile worker's first {device} kernels\n\n"
                                f"{fresh_worker(device, args.plugin)}")
        for device in devices:
            sections.append(f"## 5. warm compile in-process (compile_threads=1), {device}: "
                            f"{warm_compile_in_process(device, batch, tokens)}")
    for device in devices:
        operations[device] = {**wrapper_operations(device), **extern_matmuls(device, batch, tokens)}
        for mode in args.modes.split(","):
            torch._dynamo.reset()
            for name, step in compiled_steps(device, batch, tokens, mode).items():
                what = f"{name}, {device}, {mode} mode, {args.iterations} steps"
                sections.append(f"## 2. CPU operators, {what}\n\n{operator_table(step, device, args.iterations)}")
                sections.append(f"## 3. Python functions, {what} (own time)\n\n"
                                f"{steady_state_profile(step, device, args.iterations)}")
    lines = [f"# Host time of torch.compile steps ({args.machine}, torch {torch.__version__}, commit {git_commit()})",
             "", "## 1. the generated wrapper's host operations, ns per call", "",
             "| operation | " + " | ".join(devices) + " |", "|---|" + "---:|" * len(devices)]
    names = list(dict.fromkeys(n for ops in operations.values() for n in ops))
    for name in names:
        lines.append(f"| {name} | " + " | ".join(
            f"{operations[d][name]:.0f}" if name in operations[d] else "" for d in devices) + " |")
    text = "\n".join(lines) + "\n\n" + "\n\n".join(sections)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stem = args.results_dir / f"compile_profile_{args.machine}"
    stem.with_suffix(".txt").write_text(text)
    stem.with_suffix(".json").write_text(json.dumps(
        {"machine": args.machine, "torch": torch.__version__, "commit": git_commit(), "ns_per_call": operations},
        indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
