"""Data-parallel training on simdev with torch.distributed: 2 and 4 ranks as
processes on this machine, on simdev's collective backend (sdgloo, Gloo over
simdev memory), each rank on simdev:0 of its own process.

- DDP and FSDP2 training steps, compiled with torch.compile (Inductor, Triton
  kernels for simdev), give the losses and parameters of one process training
  the same model on the whole global batch (eager, on the CPU).
- A rank that fails in the middle of a step (its process dies, or it stalls
  and never joins the collective) makes the others fail with a clear error
  within the group's timeout, never a hang; and the group then refuses any
  later collective, naming the failure.

The ranks run through distributed_ranks.py (fresh interpreters, FileStore
rendezvous, a harness deadline). One multi-rank run at a time: each run
already takes every core of a small CI machine.
"""

from __future__ import annotations

import re

import pytest
import torch

pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")

from launch_support import SIMDEV, skip_without_simdev  # noqa: E402


def _sdgloo_available() -> bool:
    if not SIMDEV:
        return False
    try:
        import torch_simdev.distributed
    except ImportError:
        return False
    return torch_simdev.distributed.is_available()


pytestmark = [
    skip_without_simdev,
    pytest.mark.skipif(not _sdgloo_available(),
                       reason="torch.distributed or simdev's collective backend (sdgloo) is not available"),
]

import distributed_ranks as ranks  # noqa: E402

STEPS = 2
TRAINING_DEADLINE = 300.0  # s for a whole compiled run (about 15-35 s on 2 cores); past it: a hang
GROUP_TIMEOUT = 6.0  # s: the failure runs' group timeout (Gloo's)
FAILURE_DEADLINE = 90.0  # s for a whole failure run
MARGIN = 10.0  # s allowed past the group timeout for the error to reach rank 0's Python
PEER_GONE = re.compile(r"Connection (reset|closed) by peer|Broken pipe|Connection refused")


@pytest.fixture(scope="module")
def reference():
    return ranks.reference(STEPS)


# ------------------------------------------------------------------------------------ training


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("wrap", ["ddp", "fsdp2"])
def test_compiled_training_matches_one_process(tmp_path, reference, wrap, world_size):
    run = ranks.launch(wrap, world_size, tmp_path, deadline=TRAINING_DEADLINE, steps=STEPS)
    assert all(r.returncode == 0 for r in run.ranks), run.describe()
    results = [run.result(rank) for rank in range(world_size)]
    context = run.describe()

    for rank, result in enumerate(results):
        # Inductor compiled the forward and backward graphs, and generated kernels, in every rank.
        counters = result["inductor"]
        graphs = sum(counters.get(f"fxgraph_cache_{kind}", 0) for kind in ("miss", "hit", "bypass"))
        kernels = counters.get("async_compile_cache_miss", 0) + counters.get("async_compile_cache_hit", 0)
        assert graphs >= 2 and kernels >= 1, f"rank {rank}: Inductor's counters {counters}\n{context}"

    # Each rank trained on a shard of its own: the mean of their losses is the full batch's loss.
    losses = torch.tensor([result["losses"] for result in results])  # [rank, step]
    assert len({tuple(row) for row in losses.tolist()}) == world_size, losses
    torch.testing.assert_close(losses.mean(0), torch.tensor(reference["losses"]), rtol=1e-4, atol=1e-5,
                               msg=lambda m: f"{m}\nrank losses {losses.tolist()}, reference {reference['losses']}")

    # The parameters after the steps: the same in every rank, and those of the one-process reference.
    for rank, result in enumerate(results):
        assert result["params"].keys() == reference["params"].keys()
        for name, expected in reference["params"].items():
            actual = result["params"][name]
            assert torch.equal(actual, results[0]["params"][name]), f"rank {rank} and rank 0 disagree on {name}"
            torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5,
                                       msg=lambda m, name=name: f"rank {rank}, {name}: {m}")


# ------------------------------------------------------------------------------------ failures

_failure_runs: dict = {}


@pytest.fixture(scope="module")
def failure_run(tmp_path_factory):
    """Runs the failing-step scenario once per (wrap, how), for the tests that judge it."""

    def run(wrap: str, how: str):
        key = (wrap, how)
        if key not in _failure_runs:
            directory = tmp_path_factory.mktemp(f"failing-{wrap}-{how}")
            _failure_runs[key] = ranks.launch("failing_step", 2, directory, deadline=FAILURE_DEADLINE,
                                              group_timeout=GROUP_TIMEOUT, wait_for=[0], wrap=wrap, how=how)
        return _failure_runs[key]

    yield run
    _failure_runs.clear()


def _rank0_error(run) -> dict:
    rank0 = run.ranks[0]
    assert not rank0.killed, f"rank 0 hung: still running after {FAILURE_DEADLINE} s\n{run.describe()}"
    assert rank0.returncode not in (0, None), f"rank 0 did not fail\n{run.describe()}"
    result = run.result(0)
    assert "error" in result, f"rank 0's step succeeded although rank 1 failed in it: {result}\n{run.describe()}"
    return result


@pytest.mark.parametrize("wrap", ["ddp", "fsdp2"])
def test_a_rank_that_dies_mid_step_fails_the_others_promptly(failure_run, wrap):
    run = failure_run(wrap, "exit")
    assert run.ranks[1].returncode == 3, run.describe()  # the injected failure, not another
    result = _rank0_error(run)
    # The lost peer surfaces as an error of the collective at the next synchronization
    # (or as the refusal of the next collective), not as wrong numbers or a wait for the timeout.
    assert result["error_type"] in ("AcceleratorError", "DistBackendError"), result
    assert "sdgloo" in result["error"] and PEER_GONE.search(result["error"]), result["error"]
    assert result["error_after"] < GROUP_TIMEOUT, (result["error_after"], run.describe())


@pytest.mark.parametrize("wrap", ["ddp", "fsdp2"])
def test_a_rank_that_stalls_mid_step_fails_the_others_at_the_timeout(failure_run, wrap):
    run = failure_run(wrap, "stall")
    assert run.ranks[1].killed, run.describe()  # it was still alive, stalled, when rank 0 ended
    result = _rank0_error(run)
    assert result["error_type"] in ("AcceleratorError", "DistBackendError"), result
    assert "sdgloo" in result["error"] and re.search(r"Timed out waiting \d+ms for (recv|send)", result["error"]), \
        result["error"]
    assert 0.9 * GROUP_TIMEOUT <= result["error_after"] <= GROUP_TIMEOUT + MARGIN, (result["error_after"],
                                                                                   run.describe())


@pytest.mark.parametrize("wrap", ["ddp", "fsdp2"])
def test_after_a_failed_collective_the_group_refuses_the_next(failure_run, wrap):
    run = failure_run(wrap, "exit")
    result = _rank0_error(run)
    assert "later_collective" not in result, f"a collective after the failure ran\n{run.describe()}"
    stderr = run.ranks[0].stderr
    refusal = re.search(r"torch\.distributed\.DistBackendError: sdgloo allreduce: "
                        r"an earlier collective of this process group failed \((.*)", stderr)
    assert refusal, f"no refusal of the later all_reduce in rank 0's stderr\n{run.describe()}"
    # It names the earlier failure: the lost peer.
    assert PEER_GONE.search(refusal.group(1)), refusal.group(0)


# ------------------------------------------------------------------------------------ collectives in the graph


@pytest.mark.parametrize("passes", ["overlap", "reorder"])
def test_functional_collectives_compiled_with_inductors_distributed_passes(tmp_path, passes):
    """The collectives in the graph, scheduled by Inductor's overlap passes on
    the plugin device (devbridge.inductor.distributed adapts their estimates),
    run on sdgloo and give eager's results on every rank."""
    run = ranks.launch("compiled_collectives", 2, tmp_path, deadline=TRAINING_DEADLINE, passes=passes)
    assert all(r.returncode == 0 for r in run.ranks), run.describe()
    for rank in range(2):
        result = run.result(rank)
        assert result["inductor"].get("async_compile_cache_miss", 0) + \
            result["inductor"].get("async_compile_cache_hit", 0) >= 1, result["inductor"]
        for compiled, eager in zip(result["compiled"], result["eager"]):
            torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-4)
    # The all-gather of the compiled step has every rank's rows, the same on both.
    torch.testing.assert_close(run.result(0)["compiled"][1], run.result(1)["compiled"][1])


def test_tensor_parallel_mlp_compiled_matches_the_unsplit_model(tmp_path):
    """DTensor on simdev: a sharded tensor redistributed to every rank, and an
    MLP split column-wise then row-wise (its collectives are DTensor's, in the
    compiled graph), giving the unsplit model's output on every rank."""
    run = ranks.launch("tensor_parallel", 2, tmp_path, deadline=TRAINING_DEADLINE)
    assert all(r.returncode == 0 for r in run.ranks), run.describe()
    x, _ = ranks.global_batch()
    with torch.no_grad():
        expected = ranks.make_mlp()(x)
    for rank in range(2):
        result = run.result(rank)
        torch.testing.assert_close(result["gathered"], x)
        torch.testing.assert_close(result["out"], expected, rtol=1e-4, atol=1e-5)
        assert result["inductor"].get("async_compile_cache_miss", 0) + \
            result["inductor"].get("async_compile_cache_hit", 0) >= 1, result["inductor"]
