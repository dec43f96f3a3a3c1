"""Runs a torch.distributed program as N rank processes on one machine, on
simdev, for tests/python/test_distributed_training.py.

The harness (`launch`) starts one fresh interpreter per rank with
subprocess.Popen, not torch.multiprocessing.spawn: spawn's join kills the
surviving ranks as soon as one fails, which hides what the test is about (how
the other ranks fail). Each rank's return code, stdout and stderr are kept,
and a harness deadline ends any rank still running, so that a hang is a test
failure, never a hung CI job.

Rendezvous is a FileStore in the run's directory (no ports). Every rank uses
simdev:0 of its own process (SIMDEV_DEVICE_COUNT=1) and Inductor caches of
its own (a cache directory shared by concurrent ranks once gave "Can't pickle
<function triton_poi_...>"), compiling in-process (TORCHINDUCTOR_COMPILE_THREADS=1).

The rank side (`rank_main`, run as `python -c "import distributed_ranks; ..."`)
runs one of the SCENARIOS below and writes what it measured (losses, the
parameters after training, Inductor's counters, the errors it saw) with
torch.save to the run's directory, for the test to compare in its own process.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Any, Callable

import torch
import torch.nn.functional as F

from compile_cases import Block

HERE = pathlib.Path(__file__).resolve().parent

# ------------------------------------------------------------------ the model and its data (both sides)

GLOBAL_BATCH = 8  # divisible by every world size tested (2, 4)
LENGTH, WIDTH, IN_FEATURES, OUT_FEATURES = 6, 32, 16, 8
LR = 0.1


class Net(torch.nn.Module):
    """A small transformer-ish model, as user classes (Dynamo inlines them and
    Inductor compiles their graphs; nn.Sequential of torch.nn modules alone
    left nothing for Inductor after the graph breaks around DDP/FSDP)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(IN_FEATURES, WIDTH)
        self.blocks = torch.nn.ModuleList([Block(WIDTH, heads=4), Block(WIDTH, heads=4)])
        self.norm = torch.nn.LayerNorm(WIDTH)
        self.head = torch.nn.Linear(WIDTH, OUT_FEATURES)

    def forward(self, x):
        # The blocks called one by one, not in a loop: under FSDP2 each call is
        # a graph break (its hooks), and a graph break inside a loop would make
        # Dynamo run this whole frame eagerly (the embedding and the head too).
        h = self.blocks[0](self.embed(x))
        h = self.blocks[1](h)
        return self.head(F.gelu(self.norm(h)))


class MLP(torch.nn.Module):
    """Two layers, for tensor parallelism: `up` split by columns, `down` by rows."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(IN_FEATURES, WIDTH)
        self.down = torch.nn.Linear(WIDTH, OUT_FEATURES)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


def make_mlp() -> MLP:
    torch.manual_seed(2)
    return MLP()


def make_model() -> Net:
    """The same initial parameters in every process (CPU, float32)."""
    torch.manual_seed(0)
    return Net()


def global_batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(GLOBAL_BATCH, LENGTH, IN_FEATURES, generator=generator)
    y = torch.randn(GLOBAL_BATCH, LENGTH, OUT_FEATURES, generator=generator)
    return x, y


def shard(tensor: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    per_rank = tensor.shape[0] // world_size
    return tensor[rank * per_rank:(rank + 1) * per_rank]


def loss_fn(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Separable over the batch: the mean of per-sample losses, so that the
    mean of equal-sized shards' losses (and of their gradients, which is what
    DDP's all-reduce and FSDP's reduce-scatter compute) is the full batch's."""
    per_sample = ((out - target) ** 2).mean(dim=(1, 2))
    return per_sample.mean()


def train(model: Callable, optimizer: torch.optim.Optimizer, x, y, steps: int) -> list[float]:
    losses = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return [float(loss) for loss in losses]  # the host waits only after the last step


def reference(steps: int) -> dict[str, Any]:
    """One process, the whole global batch, eager on the CPU: the result the
    ranks' data-parallel training must reproduce."""
    model = make_model()
    x, y = global_batch()
    losses = train(model, torch.optim.SGD(model.parameters(), lr=LR), x, y, steps)
    return {"losses": losses, "params": {name: p.detach().clone() for name, p in model.named_parameters()}}


# ------------------------------------------------------------------ the harness (the test's side)

@dataclasses.dataclass
class RankRun:
    rank: int
    returncode: int | None  # None: killed by the harness (still running at the deadline or after wait_for)
    elapsed: float  # seconds from the start of the launch to its exit (or to the kill)
    stdout: str
    stderr: str
    killed: bool

    def tail(self, chars: int = 4000) -> str:
        return self.stderr[-chars:]


@dataclasses.dataclass
class Run:
    world_size: int
    directory: pathlib.Path
    ranks: list[RankRun]
    wall: float

    def result(self, rank: int) -> dict[str, Any]:
        path = self.directory / f"rank{rank}.pt"
        if not path.exists():
            raise AssertionError(f"rank {rank} wrote no results\n{self.describe()}")
        return torch.load(path, weights_only=False)

    def describe(self) -> str:
        """Each rank's return code, time and stderr tail: the assertion message."""
        parts = [f"{self.world_size} ranks in {self.directory}, {self.wall:.1f} s"]
        for run in self.ranks:
            state = "killed by the harness, still running" if run.killed else f"rc={run.returncode}"
            parts.append(f"--- rank {run.rank}: {state} after {run.elapsed:.1f} s; stdout tail:\n"
                         f"{run.stdout[-1500:]}\n--- rank {run.rank} stderr tail:\n{run.tail()}")
        return "\n".join(parts)


RANK_ENTRY = "import distributed_ranks, sys; distributed_ranks.rank_main(sys.argv[1])"


def launch(scenario: str, world_size: int, directory: pathlib.Path, *, deadline: float,
           group_timeout: float = 20.0, wait_for: list[int] | None = None, **params: Any) -> Run:
    """Runs `scenario` as `world_size` rank processes and waits for them.

    `deadline`: seconds after which any rank still running is killed (and
    reported as killed). `wait_for`: the ranks whose exit ends the run (default:
    all); the others are then killed (a rank that stalls on purpose).
    """
    directory.mkdir(parents=True, exist_ok=True)
    config_path = directory / "config.json"
    config_path.write_text(json.dumps({
        "scenario": scenario, "world_size": world_size, "store": str(directory / "store"),
        "directory": str(directory), "group_timeout": group_timeout, "params": params,
    }))
    wait_for = list(range(world_size)) if wait_for is None else wait_for
    processes, files = [], []
    start = time.monotonic()
    for rank in range(world_size):
        env = dict(os.environ)
        env.update({
            "RANK": str(rank),
            "PYTHONPATH": os.pathsep.join([str(HERE)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])),
            "TORCHINDUCTOR_CACHE_DIR": str(directory / f"rank{rank}-cache" / "inductor"),
            "TRITON_CACHE_DIR": str(directory / f"rank{rank}-cache" / "triton"),
            "TORCHINDUCTOR_COMPILE_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "SIMDEV_DEVICE_COUNT": "1",
            "PYTHONUNBUFFERED": "1",
        })
        out = open(directory / f"rank{rank}.stdout", "w+")
        err = open(directory / f"rank{rank}.stderr", "w+")
        files.append((out, err))
        # A session of its own, so that a kill at the deadline ends the rank and anything it started.
        processes.append(subprocess.Popen([sys.executable, "-c", RANK_ENTRY, str(config_path)], env=env,
                                          cwd=str(directory), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                          start_new_session=True))
    ended: dict[int, float] = {}
    killed: set[int] = set()
    try:
        while True:
            now = time.monotonic()
            for rank, process in enumerate(processes):
                if rank not in ended and process.poll() is not None:
                    ended[rank] = now - start
            if all(rank in ended for rank in wait_for) or now - start > deadline:
                break
            time.sleep(0.05)
    finally:
        for rank, process in enumerate(processes):
            if process.poll() is None:
                killed.add(rank)
                ended[rank] = time.monotonic() - start
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            process.wait()
    wall = time.monotonic() - start
    ranks = []
    for rank, (process, (out, err)) in enumerate(zip(processes, files)):
        out.seek(0)
        err.seek(0)
        ranks.append(RankRun(rank, None if rank in killed else process.returncode, ended[rank], out.read(),
                             err.read(), rank in killed))
        out.close()
        err.close()
    return Run(world_size, directory, ranks, wall)


# ------------------------------------------------------------------ the ranks' side

def _compile_counters() -> dict[str, Any]:
    """What Dynamo and Inductor did in this process (for the test to check and
    for a failure's message)."""
    from torch._dynamo.utils import counters

    return {"inductor": dict(counters["inductor"]), "unique_graphs": counters["stats"]["unique_graphs"],
            "graph_breaks": sum(counters["graph_break"].values())}


def _compiled_training(wrap: str, rank: int, world_size: int, params: dict) -> dict[str, Any]:
    """`wrap`: "ddp" (torch.compile of DDP) or "fsdp2" (fully_shard each block,
    then the root, then torch.compile)."""
    device = torch.device("simdev", 0)
    model = make_model().to(device)
    if wrap == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        compiled = torch.compile(DistributedDataParallel(model, device_ids=[0]))
    elif wrap == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        compiled = torch.compile(model)
    else:
        raise ValueError(wrap)
    x, y = (shard(t, rank, world_size).to(device) for t in global_batch())
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    losses = train(compiled, optimizer, x, y, params["steps"])
    if wrap == "fsdp2":  # DTensor shards: gather the full parameters (a collective: every rank)
        final = {name: p.full_tensor().detach().cpu() for name, p in model.named_parameters()}
    else:
        final = {name: p.detach().cpu() for name, p in model.named_parameters()}
    return {"losses": losses, "params": final, **_compile_counters()}


def _failing_step(rank: int, world_size: int, params: dict) -> dict[str, Any]:
    """Eager training on simdev, `params["wrap"]` "ddp" (DDP) or "fsdp2"
    (fully_shard): one good step on every rank, then rank 1 fails in the
    middle of the second, after its forward and before the backward whose
    collectives (DDP's all-reduce; FSDP2's all-gathers and reduce-scatters)
    the others wait on: `params["how"]` "exit" (the process dies, os._exit(3))
    or "stall" (it stays alive but never joins the collective). Rank 0 records
    the error its step ends with and when, then tries one more collective,
    whose error (uncaught) ends the process."""
    import torch.distributed as dist

    device = torch.device("simdev", 0)
    model = make_model().to(device)
    if params["wrap"] == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        wrapped = DistributedDataParallel(model, device_ids=[0])
    else:
        from torch.distributed.fsdp import fully_shard

        for block in model.blocks:
            fully_shard(block)
        wrapped = fully_shard(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    x, y = (shard(t, rank, world_size).to(device) for t in global_batch())
    result: dict[str, Any] = {"first_loss": train(wrapped, optimizer, x, y, 1)[0]}
    save = _saver(rank)

    started = time.monotonic()
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(wrapped(x), y)
    if rank == 1:
        if params["how"] == "exit":
            os._exit(3)
        time.sleep(3600)  # the harness kills it once rank 0 is done
    try:
        loss.backward()  # queues the collectives on simdev streams
        optimizer.step()
        result["second_loss"] = loss.item()  # the host sync where a failed collective surfaces
        torch.accelerator.synchronize()
    except Exception as error:  # noqa: BLE001 - recorded for the test to judge
        result["error_type"] = type(error).__name__
        result["error"] = str(error)
    result["error_after"] = time.monotonic() - started
    save(result)
    print("rank 0: the step ended; one more collective", flush=True)
    dist.all_reduce(torch.ones(4, device=device))  # refused after a failure: raises, uncaught
    torch.accelerator.synchronize()
    result["later_collective"] = "succeeded"
    save(result)


# Inductor's distributed optimizations (off by default), as users turn them on
# (test_inductor_distributed_gates.py runs them on the fake process group).
INDUCTOR_PASSES = {
    "overlap": {"aten_distributed_optimizations.enable_overlap_scheduling": True},
    "reorder": {"reorder_for_compute_comm_overlap": True,
                "reorder_for_compute_comm_overlap_passes": ["reorder_communication_preserving_peak_memory",
                                                            "sink_waits_iterative",
                                                            "reorder_communication_preserving_peak_memory"]},
}


def _compiled_collectives(rank: int, world_size: int, params: dict) -> dict[str, Any]:
    """A data-parallel step written with functional collectives (in the graph,
    unlike DDP's and FSDP2's), compiled with one of Inductor's distributed
    optimizations (`params["passes"]`): its results and eager's, on this rank."""
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    from torch._inductor import config

    group = dist.group.WORLD

    def step(x, w1, w2):
        hidden = funcol.all_reduce(torch.relu(x @ w1 + 1.0), "sum", group)
        out = hidden @ w2
        return out, funcol.all_gather_tensor(out.sum(0), 0, group)

    device = torch.device("simdev", 0)
    generator = torch.Generator().manual_seed(rank)
    inputs = [torch.randn(*shape, generator=generator).to(device) for shape in ((16, 32), (32, 24), (24, 8))]
    eager = [t.cpu() for t in step(*inputs)]
    with config.patch(INDUCTOR_PASSES[params["passes"]]):
        compiled = [t.cpu() for t in torch.compile(step, fullgraph=True)(*inputs)]
    return {"eager": eager, "compiled": compiled, **_compile_counters()}


def _tensor_parallel(rank: int, world_size: int, params: dict) -> dict[str, Any]:
    """Tensor parallelism (DTensor): a DTensor redistributed across the ranks,
    and a two-layer MLP split column-wise then row-wise
    (torch.distributed.tensor.parallel), compiled: its output, for the test to
    compare with the unsplit model."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    device = torch.device("simdev", 0)
    mesh = init_device_mesh("simdev", (world_size,))
    x, _ = global_batch()
    gathered = distribute_tensor(x.to(device), mesh, [Shard(0)]).redistribute(mesh, [Replicate()]).to_local()
    model = make_mlp()
    parallelize_module(model.to(device), mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    out = torch.compile(model)(x.to(device))
    return {"gathered": gathered.cpu(), "out": out.cpu(), **_compile_counters()}


def _saver(rank: int) -> Callable[[dict], None]:
    directory = pathlib.Path(_CONFIG["directory"])

    def save(result: dict) -> None:
        torch.save(result, directory / f"rank{rank}.pt.tmp")
        os.replace(directory / f"rank{rank}.pt.tmp", directory / f"rank{rank}.pt")

    return save


SCENARIOS: dict[str, Callable[[int, int, dict], dict | None]] = {
    "ddp": lambda rank, world, params: _compiled_training("ddp", rank, world, params),
    "fsdp2": lambda rank, world, params: _compiled_training("fsdp2", rank, world, params),
    "failing_step": _failing_step,
    "compiled_collectives": _compiled_collectives,
    "tensor_parallel": _tensor_parallel,
}

_CONFIG: dict[str, Any] = {}


def rank_main(config_path: str) -> None:
    import torch.distributed as dist

    import torch_simdev  # noqa: F401 - registers simdev and its collective backend, sdgloo

    _CONFIG.update(json.loads(pathlib.Path(config_path).read_text()))
    rank, world_size = int(os.environ["RANK"]), _CONFIG["world_size"]
    dist.init_process_group(init_method="file://" + _CONFIG["store"], rank=rank, world_size=world_size,
                            device_id=torch.device("simdev", 0),
                            timeout=datetime.timedelta(seconds=_CONFIG["group_timeout"]))
    backend = dist.get_backend()
    if backend != "sdgloo":
        raise AssertionError(f"init_process_group chose {backend!r} for simdev, not sdgloo")
    started = time.monotonic()
    result = SCENARIOS[_CONFIG["scenario"]](rank, world_size, _CONFIG["params"])
    if result is not None:
        result["seconds"] = time.monotonic() - started
        _saver(rank)(result)
    dist.destroy_process_group()
