"""Transformer models whose attention is scaled_dot_product_attention, in
bfloat16, compiled: cudadev vs cuda on the same GPU, same weights and inputs
(bench/README.md). Models: bench/attention_models.py (a GPT-2-style and a
Llama-style grouped-query configuration of `transformers` where it is
installed). cuda runs its fused kernels (flash, cuDNN, memory-efficient);
cudadev runs the same ones through the overrideable op PyTorch gives plugins
(plugins/cudadev/csrc/attention.cpp).

Rows, each a ratio cudadev/cuda with target <= 1.05: forward (inference,
4x512 tokens), train step (forward, backward, AdamW; each device in a process
of its own, sampled in turn, as bench/compile.py does; --train-models
gpt2_step,llama_step,llama_reduce_overhead_step: the same with AdamW's step
compiled too, built capturable on both devices), reduce-overhead
forward and train step, and a decode-sized forward (1x16 tokens), default
and reduce-overhead. Forward models alternate cuda and cudadev samples in
one process. Every compiled cudadev graph is checked to call the fused op.
The fallback part: one causal grouped-query attention call (the Llama-style
model's heads, 512 tokens), forward and forward+backward, on cudadev with its
own kernel switched off, lowered by devbridge.inductor.sdpa_flex_attention to
the flex-attention Triton templates against the math decomposition, and
against torch.cuda's fused kernel (reported); with the GPU time per call of
either lowering. At 32 sequences the GPU sets the pace and the speed-up over
the math decomposition has its target (>= 2x); at the model's 4 one call is
short enough for the host to set it (a compiled forward and backward costs
~0.8 ms of host time against 0.1 ms of flex kernels), and it is reported. A run of some parts (--parts) keeps the other parts' rows of
the machine's current result file; every row names the commit it was measured at.

    TORCH_DEVICE_BACKEND_AUTOLOAD=0 python bench/attention.py --machine h200 --results-dir bench/results
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import re
import statistics
import sys
import types

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import compile as harness  # noqa: E402  (bench/compile.py: sampling, train-step processes, tables)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import attention_models  # noqa: E402

TARGET = 1.05
FULL, DECODE = (4, 512), (1, 16)
FUSED_OP = "_scaled_dot_product_fused_attention_overrideable"
# name -> (model, torch.compile mode, whether AdamW's step is compiled too). The
# _step variants tell the compiled model's share of a train step from the eager
# optimizer step's (multi-tensor operators of the plugin's own, outside devbridge).
TRAIN = {"gpt2": ("gpt2", None, False), "llama": ("llama", None, False),
         "llama_reduce_overhead": ("llama", "reduce-overhead", False),
         "gpt2_step": ("gpt2", None, True), "llama_step": ("llama", None, True),
         "llama_reduce_overhead_step": ("llama", "reduce-overhead", True)}
DEFAULT_TRAIN = ("gpt2", "llama", "llama_reduce_overhead")
# label, model, mode, tokens
FORWARD = [
    ("GPT-2-style, 6 layers, 4x512, forward", "gpt2", None, FULL),
    ("Llama-style GQA, 8 layers, 4x512, forward", "llama", None, FULL),
    ("Llama-style GQA, 8 layers, 4x512, reduce-overhead forward", "llama", "reduce-overhead", FULL),
    ("Llama-style GQA, 8 layers, 1x16 (decode-sized), forward", "llama", None, DECODE),
    ("Llama-style GQA, 8 layers, 1x16 (decode-sized), reduce-overhead forward", "llama", "reduce-overhead", DECODE),
]


def tokens(shape, device, seed=0):
    return torch.randint(0, attention_models.VOCAB, shape, generator=torch.Generator().manual_seed(seed)).to(device)


def forward_step(kind: str, device: str, mode, shape):
    torch.set_grad_enabled(False)
    model = attention_models.make(kind).to(device=device, dtype=torch.bfloat16).eval()
    x = tokens(shape, device)
    compiled = torch.compile(model, mode=mode)

    def step():
        return compiled(x)

    return harness._each_step_begins(step) if mode is not None else step


def train_step(name: str, device: str):
    """One device's compiled train step (the child of bench/compile.py's
    train_steps): bf16 weights, cross-entropy over the logits, AdamW foreach.
    FALLBACK_BATCHES' children: the fallback part's attention forward and
    backward at that batch, on the device's own kernel."""
    batch = {child: batch for batch, child in FALLBACK_BATCHES.items()}.get(name)
    if batch is not None:
        attend = attention_step(device, "fused", backward=True, batch=batch)
        return None, None, lambda: attend().float().sum().detach(), None
    kind, mode, compiled_step = TRAIN[name]
    torch.backends.cuda.matmul.allow_tf32 = True
    if device != "cuda":
        harness.load_plugin()
    model = attention_models.make(kind).to(device=device, dtype=torch.bfloat16)
    optimizer, optimizer_step = harness.adamw(model.parameters(), compiled_step)
    x, target = tokens(FULL, device), tokens(FULL, device, seed=1)
    compiled = torch.compile(model, mode=mode)

    def step():
        if mode is not None:
            torch.compiler.cudagraph_mark_step_begin()
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(compiled(x).flatten(0, 1).float(), target.flatten())
        loss.backward()
        optimizer_step()
        return loss.detach()

    return compiled, optimizer, step, (x, target)


def uses_fused_op(step) -> bool:
    from torch._inductor.utils import run_and_get_code

    _, code = run_and_get_code(step)
    return any(FUSED_OP in source for source in code)


def ratio_row(label, samples, **extra):
    summary = harness.ratio_summary(samples)
    return harness.row(f"{label}: ratio cudadev/cuda", summary["median"], "ratio", target=f"<= {TARGET}",
                       target_met=summary["median"] <= TARGET, spread=summary, **extra)


def forward_rows(rows, iterations, pairs, save, meta):
    for label, kind, mode, shape in FORWARD:
        torch._dynamo.reset()
        steps = {device: forward_step(kind, device, mode, shape) for device in ("cuda", "cudadev")}
        fused = uses_fused_op(steps["cudadev"])  # compiles cudadev's graph, and says what it calls
        samples = harness.alternating_ms(steps, iterations, pairs)
        for device in steps:
            rows.append(harness.row(f"{label}: torch.compile on {device}", statistics.median(samples[device]),
                                    "ms/iter", group="forward", device=device, samples=samples[device], model=label,
                                    series=f"torch.compile on {device}"))
        rows.append(ratio_row(label, samples, group="forward", cudadev_calls_fused_op=fused))
        save(rows, meta)


# ---------------------------------------------------------------- the Triton fallback

FALLBACK_TARGET = 2.0  # math decomposition / flex-attention templates, on cudadev
# The fallback's attention call at two batch sizes: the Llama-style model's
# (4), where one call is short enough for the host to set its pace (reported),
# and 32, where the GPU sets it and the wall time measures the attention
# itself (the target's row). Each batch's torch.cuda backward runs in a child
# process of its own, named here.
FALLBACK_BATCHES = {32: "attention_backward_batch32", 4: "attention_backward"}  # the target's first
ATTENTION_SHAPE = dict(heads=16, kv_heads=4, length=512, head=64)  # the Llama-style model's attention


def attention_step(device: str, variant: str, backward: bool, batch: int):
    """One compiled causal grouped-query SDPA call in bf16, `batch` sequences
    (with its backward
    when `backward`): "fused" (the device's own choice), "math" (cudadev with
    its kernel switched off: the math decomposition) or "flex" (the same, with
    devbridge.inductor.sdpa_flex_attention("fallback"): Inductor's
    flex-attention Triton templates)."""
    import devbridge.inductor
    from torch._inductor.utils import run_and_get_code
    from torch.nn.attention import SDPBackend, sdpa_kernel

    shape = ATTENTION_SHAPE
    generator = torch.Generator().manual_seed(0)

    def randn(heads):
        return torch.randn(batch, heads, shape["length"], shape["head"], generator=generator).to(
            device=device, dtype=torch.bfloat16).requires_grad_(backward)

    q, k, v = randn(shape["heads"]), randn(shape["kv_heads"]), randn(shape["kv_heads"])
    grad = torch.ones_like(q)

    def attend(q, k, v):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        if backward:
            out.backward(grad)
        return out

    # A code object of its own per variant: Dynamo keeps compiled graphs on the
    # function's code object and does not guard on the SDPA lowering switch, so
    # a second variant of the same code would reuse the first one's graph.
    attend = types.FunctionType(attend.__code__.replace(co_name=f"attend_{variant}_on_{device}_batch{batch}"), attend.__globals__,
                                attend.__name__, attend.__defaults__, attend.__closure__)

    # cudadev without its own kernel: every backend but OVERRIDEABLE (its route)
    backends = [SDPBackend.MATH, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                SDPBackend.CUDNN_ATTENTION] + ([SDPBackend.OVERRIDEABLE] if variant == "fused" else [])
    mode = "fallback" if variant == "flex" else "off"
    compiled = torch.compile(attend)

    def step():
        # The variant's mode around every call, not only the first: a later
        # recompile (run_and_get_code resets Dynamo, dropping every variant
        # compiled before) must lower SDPA as this variant does.
        previous = devbridge.inductor.sdpa_flex_attention(mode)
        try:
            with torch.enable_grad(), sdpa_kernel(backends):
                return compiled(q, k, v)
        finally:
            devbridge.inductor.sdpa_flex_attention(previous)

    code = "\n".join(run_and_get_code(step)[1])
    uses_flex = re.search(r"def triton_tem_fused_\w*flex_attention", code) is not None
    if uses_flex != (variant == "flex"):
        raise RuntimeError(f"the {variant!r} variant on {device} compiled "
                           f"{'the' if uses_flex else 'no'} flex-attention templates:\n{code[-3000:]}")

    return step


def fallback_label(batch: int, backward: bool) -> str:
    return (f"causal GQA attention, bf16, {batch}x16 heads (4 key/value), 512 tokens, head 64, "
            + ("forward and backward" if backward else "forward"))


def fallback_rows(rows, iterations, pairs, save, meta):
    for batch, child in FALLBACK_BATCHES.items():
        # The target holds where the GPU sets the pace; at the model's batch
        # the host does, and the speed-up is reported with the GPU time.
        gpu_bound = batch == max(FALLBACK_BATCHES)
        for backward in (False, True):
            label = fallback_label(batch, backward)
            torch._dynamo.reset()
            steps = {"cudadev math": attention_step("cudadev", "math", backward, batch),
                     "cudadev flex": attention_step("cudadev", "flex", backward, batch)}
            if not backward:
                steps["cuda"] = attention_step("cuda", "fused", backward, batch)
            samples = harness.alternating_ms(steps, iterations, pairs)
            if backward:
                # torch.cuda's backward in a process of its own: torch 2.11's autograd
                # engine asserts (opt_ready_stream && opt_parent_stream) on a cuda
                # backward in a process that ran a PrivateUse1 one (bench/compile.py).
                samples["cuda"] = harness.train_steps(child, pairs, iterations, devices=("cuda",),
                                                      script=__file__)["cuda"]["samples"]
            for name, series in (("cudadev math", "math decomposition on cudadev (its kernel off)"),
                                 ("cudadev flex", "flex-attention templates on cudadev (its kernel off)"),
                                 ("cuda", "torch.cuda's fused kernel")):
                rows.append(harness.row(f"{label}: {series}", statistics.median(samples[name]), "ms/iter",
                                        group="fallback", samples=samples[name], model=label, series=series))
            speedup = harness.ratio_summary(samples, "cudadev math", "cudadev flex")
            target = dict(target=f">= {FALLBACK_TARGET}", target_met=speedup["median"] >= FALLBACK_TARGET) \
                if gpu_bound else {}
            rows.append(harness.row(f"{label}: math decomposition / flex templates on cudadev (speed-up"
                                    + ("" if gpu_bound else "; reported, the host sets the pace") + ")",
                                    speedup["median"], "ratio", group="fallback", spread=speedup, **target))
            peer = harness.ratio_summary(samples, "cudadev flex", "cuda")
            rows.append(harness.row(f"{label}: flex templates on cudadev / cuda's fused kernel (reported)",
                                    peer["median"], "ratio", group="fallback", spread=peer))
            # The GPU time per call is what the attention costs inside a
            # model's compiled graph, where the host runs ahead of the GPU.
            gpu_us = {name: sum(harness.kernel_times_us(steps[name], "cudadev", iterations).values())
                      for name in ("cudadev math", "cudadev flex")}
            for name in gpu_us:
                rows.append(harness.row(f"{label}: GPU time per call, {name.removeprefix('cudadev ')} on cudadev",
                                        gpu_us[name], "us", group="fallback"))
            rows.append(harness.row(f"{label}: GPU time per call, math decomposition / flex templates (reported)",
                                    gpu_us["cudadev math"] / gpu_us["cudadev flex"], "ratio", group="fallback"))
            save(rows, meta)


def train_label(name: str) -> str:
    kind, mode, compiled_step = TRAIN[name]
    return (f"{'GPT-2-style' if kind == 'gpt2' else 'Llama-style GQA'}, 4x512, train step"
            + (" (reduce-overhead)" if mode else "") + (", AdamW step compiled (capturable)" if compiled_step else ""))


def train_model_of(row: dict) -> str | None:
    """The TRAIN name a train-step row is of (rows written before they were
    tagged: the one whose label their name starts with)."""
    if "train_model" in row:
        return row["train_model"]
    return next((name for name in TRAIN if row["name"].startswith(train_label(name) + ":")), None)


def train_rows(rows, iterations, pairs, save, meta, names):
    for name in names:
        label = train_label(name)
        results = harness.train_steps(name, pairs, iterations, script=__file__)
        samples = {device: results[device]["samples"] for device in results}
        for device in results:
            rows.append(harness.row(f"{label}: torch.compile on {device}, a process of its own",
                                    statistics.median(samples[device]), "ms/iter", group="train step", device=device,
                                    samples=samples[device], loss=results[device]["loss"], model=label,
                                    series=f"torch.compile on {device}", train_model=name))
        rows.append(harness.train_ratio_row(f"{label}: ratio cudadev/cuda", results, TARGET, group="train step",
                                            train_model=name))
        save(rows, meta)


PART_GROUPS = {"forward": "forward", "train": "train step", "fallback": "fallback"}  # --parts -> rows' group


def earlier_parts(path: pathlib.Path, parts: list[str], names: list[str]) -> tuple[list[dict], dict]:
    """The rows this run does not measure again (the parts it leaves out, the
    train models it leaves out), from the machine's current result
    (harness.earlier_rows), and the commits each kept part was measured at."""
    groups = {PART_GROUPS[part] for part in parts}
    rows = harness.earlier_rows(path, lambda row: row["group"] in groups and (
        row["group"] != PART_GROUPS["train"] or train_model_of(row) in names))
    commits: dict = {}
    for row in rows:
        part = next(part for part, group in PART_GROUPS.items() if group == row["group"])
        commits.setdefault(part, [])
        if row["commit"] not in commits[part]:
            commits[part].append(row["commit"])
    return rows, {part: ", ".join(found) for part, found in commits.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--machine", default="h200")
    parser.add_argument("--results-dir", type=pathlib.Path, default=HERE / "results")
    parser.add_argument("--iterations", type=int, default=20, help="steps per sample")
    parser.add_argument("--pairs", type=int, default=7, help="alternating cuda/cudadev samples")
    parser.add_argument("--train-iterations", type=int, default=10)
    parser.add_argument("--train-pairs", type=int, default=9)
    parser.add_argument("--parts", default="forward,train,fallback", help="comma list of forward, train, fallback")
    parser.add_argument("--train-models", default=",".join(DEFAULT_TRAIN),
                        help=f"comma list of {', '.join(TRAIN)} (default {','.join(DEFAULT_TRAIN)})")
    parser.add_argument("--child-train", choices=(*TRAIN, *FALLBACK_BATCHES.values()), help=argparse.SUPPRESS)
    parser.add_argument("--child-device", help=argparse.SUPPRESS)
    parser.add_argument("--child-cpu", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_train:
        harness.train_step_child(args.child_train, args.child_device, args.iterations, args.child_cpu,
                                 make_step=train_step)
        return 0
    parts = [part for part in args.parts.split(",") if part]
    names = [name for name in args.train_models.split(",") if name]
    if set(parts) - {"forward", "train", "fallback"} or set(names) - set(TRAIN):
        parser.error(f"--parts takes forward,train,fallback and --train-models {','.join(TRAIN)}")
    import devbridge
    import triton

    harness.load_plugin()
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "cpu": harness.cpu_model(), "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "triton": triton.__version__, "python": platform.python_version(), "devbridge": devbridge.__version__,
            "commit": harness.git_commit(), "models": attention_models.source(), "parts": parts,
            "iterations": args.iterations, "pairs": args.pairs, "train_iterations": args.train_iterations,
            "train_pairs": args.train_pairs, "machine": args.machine}
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stem = args.results_dir / f"attention_{args.machine}"

    kept, part_commits = earlier_parts(stem.with_suffix(".json"), parts, names)
    for part in parts:  # a train part that kept other models' rows names their commits too
        earlier = part_commits.get(part)
        part_commits[part] = meta["commit"] + (f" (its other rows at {earlier})" if earlier else "")
    meta["part_commits"] = part_commits

    def save(rows, meta):
        rows = kept + [{**row, "commit": meta["commit"]} for row in rows]
        rows.sort(key=lambda row: list(PART_GROUPS.values()).index(row["group"]))
        shown = [part for part in PART_GROUPS if part in part_commits]
        stem.with_suffix(".json").write_text(json.dumps({**meta, "parts": shown, "rows": rows}, indent=1))
        measured = ", ".join(f"{part} at {part_commits[part]}" for part in shown)
        stem.with_suffix(".md").write_text(harness.table(rows, {**meta, "parts": shown}).replace(
            "# torch.compile:", f"# SDPA models ({meta['models']}), torch.compile:", 1).replace(
            "\n\n", f"\n\nParts measured: {measured}.\n\n", 1))
        harness.plot(rows, meta, stem.with_suffix(".png"))
        print(f"saved {len(rows)} rows", flush=True)

    rows: list[dict] = []
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(harness.CACHE / "inductor"))
    if "forward" in parts:
        forward_rows(rows, args.iterations, args.pairs, save, meta)
    if "train" in parts:
        train_rows(rows, args.train_iterations, args.train_pairs, save, meta, names)
    if "fallback" in parts:
        fallback_rows(rows, args.iterations, args.pairs, save, meta)
    print(stem.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
