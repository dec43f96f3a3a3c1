"""A compiled DDP training step, cudadev vs cuda, world size 1 on one GPU
(bench/README.md): the same model, weights and batch. As bench/compile.py's
train steps, each device runs in a process of its own (autograd in one
process serves one accelerator type), both alive for the whole run and
sampled in turn. cuda's process group backend is NCCL; cudadev's is
cudadev's own (cdnccl: NCCL on cudadev's current stream,
plugins/cudadev/csrc/distributed.cpp). Models (--models): "ddp", a stack of
pre-norm MLP blocks in bfloat16 (8 blocks, 1024 wide, batch 16x256 tokens),
and "ddp_gpt2", bench/attention.py's GPT-2-style model (6 layers, attention
through scaled_dot_product_attention, 4x512 tokens, cross-entropy), both
with AdamW and torch.compile(DDP(model)) with DDP's default buckets. Rows: the
ratio cudadev/cuda per model, target <= 1.05; a run of some models keeps the
others' rows.

    TORCH_DEVICE_BACKEND_AUTOLOAD=0 python bench/distributed.py --machine h200 --results-dir bench/results
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import compile as harness  # noqa: E402  (bench/compile.py: sampling, rows, tables, plots)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

TARGET = 1.05
WIDTH, BLOCKS, BATCH = 1024, 8, (16, 256)


class Block(torch.nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Stack(torch.nn.Module):
    def __init__(self, width: int, blocks: int):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(width) for _ in range(blocks))
        self.head = torch.nn.Linear(width, width)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


BACKENDS = {"cuda": "nccl", "cudadev": "cdnccl"}
MODELS = {"ddp": f"compiled DDP train step, world size 1, {BLOCKS} MLP blocks {WIDTH} wide, bf16, AdamW",
          "ddp_gpt2": "compiled DDP train step, world size 1, GPT-2-style 6 layers (SDPA), 4x512 tokens, bf16, AdamW"}


def model_and_loss(model_name: str, device: str):
    """(model in bf16 on `device`, loss(model) -> scalar) of `model_name`."""
    torch.manual_seed(0)
    if model_name == "ddp":
        model = Stack(WIDTH, BLOCKS).to(device=device, dtype=torch.bfloat16)
        x = torch.randn(*BATCH, WIDTH, generator=torch.Generator().manual_seed(1)).to(device=device,
                                                                                       dtype=torch.bfloat16)
        return model, lambda forward: forward(x).float().square().mean()
    import attention  # bench/attention.py: its models and token batches
    import attention_models

    model = attention_models.make("gpt2").to(device=device, dtype=torch.bfloat16)
    x, target = attention.tokens(attention.FULL, device), attention.tokens(attention.FULL, device, seed=1)
    return model, lambda forward: torch.nn.functional.cross_entropy(forward(x).flatten(0, 1).float(),
                                                                     target.flatten())


def ddp_train_step(model_name: str, device: str):
    """One device's compiled DDP train step, in the child process of
    bench/compile.py's train_steps: (model, optimizer, step, None)."""
    if device != "cuda":
        harness.load_plugin()
    store = os.path.join(tempfile.mkdtemp(prefix="devbridge-bench-distributed-"), "store")
    dist.init_process_group(backend=BACKENDS[device], init_method=f"file://{store}", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=120))
    model, loss_of = model_and_loss(model_name, device)
    ddp = torch.compile(DDP(model, device_ids=[0]))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(ddp)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return ddp, optimizer, step, None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--machine", default="h200")
    parser.add_argument("--results-dir", type=pathlib.Path, default=HERE / "results")
    parser.add_argument("--iterations", type=int, default=20, help="steps per sample")
    parser.add_argument("--pairs", type=int, default=9, help="alternating cuda/cudadev samples")
    parser.add_argument("--models", default="ddp", help=f"comma list of {', '.join(MODELS)} (default: ddp)")
    parser.add_argument("--child-train", choices=tuple(MODELS), help=argparse.SUPPRESS)
    parser.add_argument("--child-device", help=argparse.SUPPRESS)
    parser.add_argument("--child-cpu", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_train:
        harness.train_step_child(args.child_train, args.child_device, args.iterations, args.child_cpu,
                                 make_step=ddp_train_step)
        return 0
    models = [name for name in args.models.split(",") if name]
    if not models or set(models) - set(MODELS):
        parser.error(f"--models takes a comma list of {', '.join(MODELS)}; got {args.models!r}")
    import devbridge
    import triton

    harness.load_plugin()
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "cpu": harness.cpu_model(), "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "triton": triton.__version__, "python": platform.python_version(), "devbridge": devbridge.__version__,
            "commit": harness.git_commit(), "iterations": args.iterations, "pairs": args.pairs,
            "machine": args.machine, "parts": models}
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(harness.CACHE / "inductor"))
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stem = args.results_dir / f"distributed_{args.machine}"
    # rows of the models this run leaves out stay (the ratio row of the MLP
    # stack predates the model tag: its label names it)
    rows = harness.earlier_rows(stem.with_suffix(".json"), lambda row: row.get("ddp_model", "ddp") in models)
    for model_name in models:
        results = harness.train_steps(model_name, args.pairs, args.iterations, script=__file__)
        samples = {device: results[device]["samples"] for device in results}
        label = MODELS[model_name]
        for device in results:
            rows.append(harness.row(f"{label}: on {device}, a process of its own", statistics.median(samples[device]),
                                    "ms/iter", group="ddp", device=device, samples=samples[device], model=label,
                                    series=f"torch.compile on {device}", loss=results[device]["loss"],
                                    backend=BACKENDS[device], ddp_model=model_name, commit=meta["commit"]))
        summary = harness.ratio_summary(samples)
        rows.append(harness.row(f"{label}: ratio cudadev/cuda", summary["median"], "ratio", target=f"<= {TARGET}",
                                target_met=summary["median"] <= TARGET, spread=summary, group="ddp",
                                ddp_model=model_name, commit=meta["commit"]))
        stem.with_suffix(".json").write_text(json.dumps({**meta, "rows": rows}, indent=1))
        stem.with_suffix(".md").write_text(harness.table(rows, meta).replace(
            "# torch.compile:", "# torch.distributed (DDP, world size 1), torch.compile:", 1))
        harness.plot(rows, meta, stem.with_suffix(".png"))
    print(stem.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
