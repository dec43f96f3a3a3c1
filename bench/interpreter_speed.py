"""How long a Triton launch takes on simdev's Triton target, next to the same
launch under TRITON_INTERPRET=1 on CPU tensors (Triton's interpreter alone),
in one run: the TRITON_INTERPRET=1 side runs in a subprocess (the variable is
read when @triton.jit decorates), the simdev side in this process.

    python3 bench/interpreter_speed.py [--repeat 20] [--rounds 3] [--out bench/results/interpreter_speed_vm]

Each kernel is launched once to compile (and warm), then timed `--repeat`
times, each launch followed by a synchronize (simdev) so the time is the
whole launch: argument packing, the stream worker running every program in
the interpreter, and the wait. Per side, the best of the rounds' medians is
reported; the target is simdev within 1.5x of TRITON_INTERPRET=1 (issue #22).
Each kernel's first launch in the process is reported too, without a target:
simdev's includes Triton's front end compiling it (a cache of its own, cold).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

TARGET_RATIO = 1.5
FIRST = ": first launch"  # the key suffix of a kernel's first launch in the process


HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "python"))


def _kernels():
    # Imported here, not at the top: TRITON_INTERPRET=1 is read when @triton.jit
    # decorates, so each side decorates the kernels in its own process. Vector
    # add, softmax and matmul are the simdev Triton tests' own kernels.
    import triton
    import triton.language as tl
    from triton_test_kernels import add_kernel, matmul_kernel, softmax_kernel

    @triton.jit
    def cumsum_kernel(x, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out + offs, tl.cumsum(tl.load(x + offs, mask=mask, other=0.0), axis=0), mask=mask)

    return add_kernel, softmax_kernel, matmul_kernel, cumsum_kernel


def _cases(device):
    import torch

    add_kernel, softmax_kernel, matmul_kernel, cumsum_kernel = _kernels()
    g = torch.Generator().manual_seed(0)

    def t(*shape):
        return torch.randn(*shape, generator=g).to(device)

    n = 1 << 14
    return {
        "vector_add (16384 fp32, 16 programs)": (add_kernel, (16,), [t(n), t(n), t(n), n], {"BLOCK": 1024}),
        "softmax (64 x 256 fp32, 64 programs)": (softmax_kernel, (64,), [t(64, 256), t(64, 256), 256, 256],
                                                 {"BLOCK": 256}),
        "matmul (64 x 64 fp32, tl.dot, 16 programs)": (matmul_kernel, (4, 4), [t(64, 64), t(64, 64), t(64, 64),
                                                                                64, 64, 64],
                                                       {"BM": 16, "BN": 16, "BK": 16}),
        "cumsum (4096 fp32, 8 programs)": (cumsum_kernel, (8,), [t(4096), t(4096), 4096], {"BLOCK": 512}),
    }


def measure(device: str, repeat: int) -> dict:
    """{case: median seconds per launch, case + FIRST: seconds of its first launch} on `device`
    ("cpu" under TRITON_INTERPRET=1, or "simdev")."""
    import torch

    sync = torch.accelerator.synchronize if device != "cpu" else (lambda: None)
    results = {}
    for name, (kernel, grid, args, kwargs) in _cases(device).items():
        start = time.perf_counter()
        kernel[grid](*args, **kwargs)  # compile (simdev: Triton's front end), load, warm
        sync()
        results[name + FIRST] = time.perf_counter() - start
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            kernel[grid](*args, **kwargs)
            sync()
            times.append(time.perf_counter() - start)
        results[name] = statistics.median(times)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20, help="timed launches per kernel and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both sides, alternating")
    parser.add_argument("--out", help="write OUT.json, OUT.md (and OUT.png with matplotlib)")
    parser.add_argument("--reference-side", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.reference_side:  # the subprocess: TRITON_INTERPRET=1 on CPU tensors
        print(json.dumps(measure("cpu", options.repeat)))
        return 0
    import devbridge.triton
    import torch_simdev  # noqa: F401 - the simdev device

    # Rounds alternate the two sides, and each side keeps its best median: a
    # machine shared with other work slows one round, not the comparison.
    env = {**os.environ, "TRITON_INTERPRET": "1", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    # simdev's first launches compile: with a cache of their own, the first round compiles cold.
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="devbridge-interpreter-speed-")
    reference, ours = {}, {}
    for round_index in range(options.rounds):
        done = subprocess.run([sys.executable, __file__, "--reference-side", "--repeat", str(options.repeat)],
                              env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            return 1
        for name, seconds in json.loads(done.stdout.strip().splitlines()[-1]).items():
            reference[name] = min(seconds, reference.get(name, seconds))
        with devbridge.triton.activate():
            for name, seconds in measure("simdev", options.repeat).items():
                if name.endswith(FIRST) and round_index > 0:
                    continue  # compiled and loaded in round 1: no longer a first launch here
                ours[name] = min(seconds, ours.get(name, seconds))
    from machine_info import git_commit

    commit = git_commit()
    rows = []
    print(f"{'kernel':60} {'TRITON_INTERPRET=1':>19} {'simdev':>10} {'ratio':>7}  (target <= {TARGET_RATIO}x)")
    for name, seconds in ours.items():
        ratio = seconds / reference[name]
        first = name.endswith(FIRST)  # informational: simdev's includes the front end's compile
        target = None if first else TARGET_RATIO
        print(f"{name:60} {reference[name] * 1e3:16.2f} ms {seconds * 1e3:7.2f} ms {ratio:6.2f}x"
              f"{'  (no target: includes the compile)' if first else ''}")
        rows.append({"name": f"{name}: TRITON_INTERPRET=1", "value": round(reference[name] * 1e3, 3), "unit": "ms",
                     "target": None, "target_met": None, "commit": commit})
        rows.append({"name": f"{name}: simdev", "value": round(seconds * 1e3, 3), "unit": "ms", "target": None,
                     "target_met": None, "commit": commit})
        rows.append({"name": f"{name}: simdev / TRITON_INTERPRET=1", "value": round(ratio, 3), "unit": "x",
                     "target": target, "target_met": None if first else ratio <= TARGET_RATIO, "commit": commit})
    if options.out:
        _write(pathlib.Path(options.out), rows, reference, ours, commit)
    return 0 if all(row["target_met"] is not False for row in rows) else 2


def _write(out: pathlib.Path, rows, reference, ours, commit) -> None:
    import torch
    import triton

    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = [f"# simdev's Triton target vs TRITON_INTERPRET=1 (commit {commit})", "",
             "Time per launch (launch + synchronize), after a warm-up launch: the best of the rounds' "
             "medians per side, the rounds alternating the sides; `python3 bench/interpreter_speed.py`. "
             f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
             f"{platform.python_version()}, torch {torch.__version__}, Triton {triton.__version__}.", "",
             "| kernel | TRITON_INTERPRET=1 | simdev | ratio | target |", "| --- | ---: | ---: | ---: | --- |"]
    for name, seconds in ours.items():
        ratio = seconds / reference[name]
        verdict = (f"<= {TARGET_RATIO}x {'met' if ratio <= TARGET_RATIO else 'NOT met'}" if not name.endswith(FIRST)
                   else "none (simdev's includes the front end's compile, cold cache)")
        lines.append(f"| {name} | {reference[name] * 1e3:.2f} ms | {seconds * 1e3:.2f} ms | {ratio:.2f}x | {verdict} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    names = [name for name in ours if not name.endswith(FIRST)]
    figure, axis = plt.subplots(figsize=(8, 3.5))
    positions = range(len(names))
    axis.barh([p + 0.2 for p in positions], [reference[n] * 1e3 for n in names], 0.4, label="TRITON_INTERPRET=1")
    axis.barh([p - 0.2 for p in positions], [ours[n] * 1e3 for n in names], 0.4, label="simdev")
    axis.set_yticks(list(positions), names, fontsize=7)
    axis.set_xlabel("ms per launch (median)")
    axis.legend()
    figure.tight_layout()
    figure.savefig(out.with_suffix(".png"), dpi=120)


if __name__ == "__main__":
    sys.exit(main())
