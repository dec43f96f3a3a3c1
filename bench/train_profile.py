"""Where the time of a compiled train step goes, cuda and cudadev side by
side: the diagnosis behind bench/compile.py's train-step ratio (models
block, conv) and bench/attention.py's (the SDPA models gpt2, llama).

Each device runs in a process of its own (as in bench/compile.py: torch
2.11's autograd engine asserts on a cuda backward beside a PrivateUse1
backend), on the same model, seed and inputs. Per device:
  1. each phase of the step (zero_grad, forward + loss, backward, AdamW step)
     timed twice: with the queue drained before and after (host + GPU time of
     the phase), and host-only (the queue drained before, the clock stopped
     when the call returns: what the host spends enqueueing it);
  2. torch.profiler's operator table of whole steps (CPU and GPU activity),
     by self CPU time, the same by GPU time (the kernels each device runs),
     and the GPU's busy time per step;
  3. cProfile of whole steps, by own time.
Then, side by side: whether the host or the GPU sets each device's pace (the
step's host time with the queue kept full against the GPU's busy time), and
the operators whose host time differs most between the two devices, per step
(each fused-attention op paired with its peer's: cudadev's overrideable op
runs the kernel cuda's own op runs).

    TORCH_DEVICE_BACKEND_AUTOLOAD=0 python bench/train_profile.py --model block \\
        --machine h200 --results-dir bench/results
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import compile as bench  # noqa: E402  (sets the cache directories first)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from compile_profile import python_profile  # noqa: E402
from machine_info import git_commit  # noqa: E402

PHASES = ("zero_grad", "forward + loss", "backward", "optimizer.step")


ATTENTION_MODELS = ("gpt2", "llama")  # bench/attention.py's SDPA models, bf16, cross-entropy over the logits


def train_step(model_name: str, device: str):
    """(optimizer, step, forward_loss) of bench/compile.py's train step or,
    for an SDPA model, bench/attention.py's."""
    if model_name in ATTENTION_MODELS:
        import attention

        compiled, optimizer, step, (x, target) = attention.train_step(model_name, device)
        return optimizer, step, lambda: F.cross_entropy(compiled(x).flatten(0, 1).float(), target.flatten())
    compiled, optimizer, step, (x, target) = bench.train_step(model_name, device)
    return optimizer, step, lambda: F.mse_loss(compiled(x), target)


def phase_times(model_name: str, device: str, iterations: int) -> tuple[dict, str, str, str]:
    optimizer, step, forward_loss = train_step(model_name, device)
    sync = lambda: bench.synchronize(device)  # noqa: E731
    for _ in range(5):
        step()
    sync()
    state = {}
    phases = {
        "zero_grad": lambda: optimizer.zero_grad(set_to_none=True),
        "forward + loss": lambda: state.__setitem__("loss", forward_loss()),
        "backward": lambda: state["loss"].backward(),
        "optimizer.step": lambda: optimizer.step(),
    }
    host = {name: [] for name in PHASES}
    total = {name: [] for name in PHASES}
    for _ in range(iterations):
        for name in PHASES:
            sync()
            began = time.perf_counter()
            phases[name]()
            returned = time.perf_counter()
            sync()
            ended = time.perf_counter()
            host[name].append((returned - began) * 1e6)
            total[name].append((ended - began) * 1e6)
    times = {name: {"host_us": statistics.median(host[name]), "with_gpu_us": statistics.median(total[name])}
             for name in PHASES}
    times["whole step, queue kept full"] = {"host_us": bench.batch_ms(step, device, iterations) * 1e3,
                                            "with_gpu_us": None}

    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with profile(activities=activities) as prof:
        for _ in range(iterations):
            step()
        sync()
    events = prof.key_averages()
    gpu_us = device_busy_us(prof.events()) / iterations
    times["GPU kernel time per step (profiler)"] = {"host_us": None, "with_gpu_us": gpu_us}
    operators = [{"name": event.key, "calls": event.count, "cpu_total_us": event.cpu_time_total,
                  "self_cpu_us": event.self_cpu_time_total} for event in events]
    table = events.table(sort_by="self_cpu_time_total", row_limit=40, max_name_column_width=60)
    # The same steps by GPU time: which kernels each device runs, and how long.
    kernels = events.table(sort_by="self_device_time_total", row_limit=30, max_name_column_width=90)

    def steps():
        for _ in range(iterations):
            step()
        sync()

    return times, operators, table, kernels, python_profile(steps, "tottime", 35)


def device_busy_us(events) -> float:
    """The device's own time in a profile: its kernels' and memory operations'
    events, as torch.profiler's tables sum it in their footer ("Self CUDA time
    total"). Not events.total_average(), which adds to them the device time each
    CPU operator is credited with (the same kernels again) and the spans of
    record_function annotations such as Optimizer.step (host time, when the
    host sets the pace): 2.4-2.7x the device time in the profiles this script
    wrote before."""
    from torch.autograd import DeviceType

    return sum(event.self_device_time_total for event in events
               if event.device_type != DeviceType.CPU and not getattr(event, "is_user_annotation", False))


# torch's fused-attention ops on cuda and the overrideable op a plugin runs
# in their place (the same kernels underneath), paired in the comparison.
PEER_ATTENTION_OP = re.compile(r"aten::_scaled_dot_product_(?:flash|efficient|cudnn)_attention(_backward)?$")
PLUGIN_ATTENTION_OP = re.compile(r"aten::_scaled_dot_product_fused_attention_overrideable(_backward)?$")


def operator_role(name: str, plugin: bool) -> str:
    """The row an operator is compared in: its name, but for the compiled
    graphs' code (whose name carries a hash) and the fused-attention op, which
    on the peer is cuda's own op and on the plugin the overrideable one (a
    plugin running cuda's op inside it, as cudadev does, keeps that one under
    its own name, so that no call is counted twice)."""
    if name.startswith("## Call CompiledFxGraph"):
        return "## Call CompiledFxGraph (the compiled graphs' code, all graphs)"
    match = (PLUGIN_ATTENTION_OP if plugin else PEER_ATTENTION_OP).match(name)
    if match is None:
        return name
    return "SDPA fused op" + (", backward" if match.group(1) else "") + " (cuda's own / the overrideable)"


def pace(times: dict) -> str:
    """Which side sets the pace of a step: the host, when enqueueing a step
    takes longer than the GPU is busy with it."""
    host = times["whole step, queue kept full"]["host_us"]
    gpu = times["GPU kernel time per step (profiler)"]["with_gpu_us"]
    if not host or not gpu:
        return "no GPU time measured"
    return (f"host {host / 1e3:.2f} ms per step with the queue kept full, GPU busy {gpu / 1e3:.2f} ms: "
            + ("the host sets the pace" if host >= gpu else "the GPU sets the pace"))


def host_time_by_operator(peer: list[dict], plugin: list[dict], iterations: int, devices: list[str],
                          limit: int = 15) -> list[str]:
    """Markdown lines: the operators whose self host time per step differs
    most between the devices (matched by name, fused-attention ops by role),
    with calls per step and host time per call (children included)."""
    empty = {"calls": 0, "cpu_total_us": 0.0, "self_cpu_us": 0.0}

    def by_role(operators, on_plugin):
        merged: dict = {}
        for op in operators:
            row = merged.setdefault(operator_role(op["name"], on_plugin), dict(empty))
            for key in row:
                row[key] += op[key]
        return merged

    a, b = by_role(peer, False), by_role(plugin, True)
    rows = []
    for role in set(a) | set(b):
        x, y = a.get(role, empty), b.get(role, empty)
        rows.append((abs(y["self_cpu_us"] - x["self_cpu_us"]) / iterations, role, x, y))
    rows.sort(key=lambda row: row[0], reverse=True)
    per_call = lambda r: f"{r['cpu_total_us'] / r['calls']:.1f}" if r["calls"] else ""  # noqa: E731
    peer_name, plugin_name = devices
    lines = [f"| operator | calls per step, {peer_name} / {plugin_name} | host us per call, {peer_name} | "
             f"host us per call, {plugin_name} | self host us per step, {plugin_name} - {peer_name} |",
             "|---|---:|---:|---:|---:|"]
    for _, role, x, y in rows[:limit]:
        lines.append(f"| {role} | {x['calls'] / iterations:g} / {y['calls'] / iterations:g} | {per_call(x)} | "
                     f"{per_call(y)} | {(y['self_cpu_us'] - x['self_cpu_us']) / iterations:+.0f} |")
    total = sum(r["self_cpu_us"] for r in b.values()) - sum(r["self_cpu_us"] for r in a.values())
    lines += ["", f"All operators' self host time per step, {plugin_name} - {peer_name}: {total / iterations:+.0f} us "
              "(the profiler's own cost per operator included, alike on both)."]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=("block", "conv", "mlp") + ATTENTION_MODELS, default="block")
    parser.add_argument("--machine", default="h200")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--results-dir", type=pathlib.Path, default=HERE / "results")
    parser.add_argument("--devices", default="cuda,cudadev",
                        help="the peer and the plugin device (e.g. cpu,simdev with DEVBRIDGE_BENCH_PLUGIN=torch_simdev)")
    parser.add_argument("--child-device", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_device:
        times, operators, table, kernels, python = phase_times(args.model, args.child_device, args.iterations)
        print(json.dumps({"times": times, "per_operator": operators, "operators": table, "kernels": kernels,
                          "python": python}))
        return 0
    results = {}
    devices = args.devices.split(",")
    for device in devices:
        env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        done = subprocess.run([sys.executable, __file__, "--model", args.model, "--child-device", device,
                               "--iterations", str(args.iterations)],
                              env=env, capture_output=True, text=True, timeout=280)
        if done.returncode != 0:
            raise RuntimeError(f"{device} child failed:\n{done.stderr[-4000:]}")
        results[device] = json.loads(done.stdout.strip().splitlines()[-1])
    lines = [f"# Train step of the {args.model} model, per phase ({args.machine}, torch {torch.__version__}, "
             f"commit {git_commit()})", "",
             "| phase | " + " | ".join(f"{d} host us" for d in devices) + " | "
             + " | ".join(f"{d} with GPU us" for d in devices) + " |",
             "|---|---:|---:|---:|---:|"]
    fmt = lambda v: "" if v is None else f"{v:.0f}"  # noqa: E731
    for name in results[devices[0]]["times"]:
        cells = [fmt(results[d]["times"][name]["host_us"]) for d in devices]
        cells += [fmt(results[d]["times"][name]["with_gpu_us"]) for d in devices]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [""] + [f"- {device}: {pace(results[device]['times'])}" for device in devices]
    lines += ["", f"## host time by operator, {devices[1]} against {devices[0]}, per step", "",
              *host_time_by_operator(results[devices[0]]["per_operator"], results[devices[1]]["per_operator"],
                                     args.iterations, devices)]
    for device in devices:
        lines += ["", f"## operators, {device}, {args.iterations} steps", "", "```",
                  results[device]["operators"], "```", "",
                  f"## by GPU time, {device}, {args.iterations} steps", "", "```", results[device]["kernels"], "```", "",
                  f"## Python functions, {device}, {args.iterations} steps (own time)", "", "```",
                  results[device]["python"], "```"]
    text = "\n".join(lines) + "\n"
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stem = args.results_dir / f"train_profile_{args.model}_{args.machine}"
    stem.with_suffix(".md").write_text(text)
    stem.with_suffix(".json").write_text(json.dumps(
        {"machine": args.machine, "torch": torch.__version__, "commit": git_commit(),
         "phases_us": {d: results[d]["times"] for d in results},
         "pace": {d: pace(results[d]["times"]) for d in results}}, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
