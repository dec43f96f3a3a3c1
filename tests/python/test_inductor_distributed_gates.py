"""Inductor's collective-aware scheduling on simdev: overlap scheduling
(aten_distributed_optimizations.enable_overlap_scheduling) and compute/comm
reordering (reorder_for_compute_comm_overlap), with the estimates they make
(python/devbridge/inductor/distributed.py says which gates were found and
which were left alone).

The collectives here are torch's fake process group's ("simdev:fake", one
process, hallucinated: each one leaves its input as it is, in eager mode as
compiled), so a compiled graph is compared with the same function run eagerly
on simdev. Tests with a real collective backend on simdev come with the
plugin's c10d backend."""

from __future__ import annotations

import contextlib
import math

import pytest
import torch

triton = pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")

import devbridge  # noqa: E402
import devbridge.inductor  # noqa: E402
import devbridge.triton  # noqa: E402
from devbridge.triton import hardware  # noqa: E402

import compile_cases as cases  # noqa: E402
from inductor_support import private_inductor, reset_dynamo_around_test  # noqa: E402
from launch_support import skip_without_simdev  # noqa: E402

pytestmark = skip_without_simdev
DEVICE = "simdev"


@pytest.fixture(scope="module", autouse=True)
def inductor_for_simdev(tmp_path_factory):
    with private_inductor(tmp_path_factory.mktemp("inductor-cache")):
        yield


fresh_dynamo = pytest.fixture(autouse=True)(reset_dynamo_around_test)


def _gbps(properties) -> float:
    # triton.testing.get_dram_gbps()'s formula
    return properties["mem_clock_rate"] * properties["mem_bus_width"] * 2 / 1e6 / 8


@contextlib.contextmanager
def declared_memory(clock_khz, bus_width):
    """simdev's declaration with memory, the one before restored afterwards."""
    before = devbridge.triton.declared(DEVICE)
    devbridge.triton.declare_hardware(DEVICE, compiler=before.compiler_type or before.compiler,
                                      kernel_runtime=before.kernel_runtime, memory_clock_khz=clock_khz,
                                      memory_bus_width=bus_width)
    try:
        yield
    finally:
        with hardware._lock:
            hardware._declared[DEVICE] = before


# ---------------------------------------------------------------- the DRAM bandwidth

def test_the_driver_reports_a_finite_nonzero_dram_bandwidth():
    """Inductor divides bytes by triton.testing.get_dram_gbps() of the active
    driver (torch/utils/_runtime_estimation.py get_transfer_time): a device
    declaring no memory gets the nominal 1024 GB/s, not 0."""
    from triton.testing import get_dram_gbps

    declared = devbridge.triton.declared(DEVICE)
    expected = _gbps(declared.memory_properties())
    if declared.memory_clock_khz is None:
        assert declared.memory_properties() == {"mem_clock_rate": hardware.NOMINAL_MEMORY[0],
                                                "mem_bus_width": hardware.NOMINAL_MEMORY[1]}
        assert expected == 1024.0
    with devbridge.triton.activate() as driver:
        properties = driver.utils.get_device_properties(0)
        assert _gbps(properties) == expected
        bandwidth = get_dram_gbps(0)
    assert math.isfinite(bandwidth) and bandwidth > 0
    assert bandwidth == expected


def test_declared_memory_is_the_bandwidth_the_driver_reports():
    from triton.testing import get_dram_gbps

    with declared_memory(2_619_000, 5120):  # an H100 SXM's HBM3: 2619 MHz over 5120 bits
        with devbridge.triton.activate() as driver:
            assert driver.utils.get_device_properties(0)["mem_clock_rate"] == 2_619_000
            assert driver.utils.get_device_properties(0)["mem_bus_width"] == 5120
            assert get_dram_gbps(0) == pytest.approx(3352.32)
    with devbridge.triton.activate():
        assert get_dram_gbps(0) == _gbps(devbridge.triton.declared(DEVICE).memory_properties())


@pytest.mark.parametrize("memory", [dict(memory_clock_khz=1_000_000), dict(memory_bus_width=4096),
                                    dict(memory_clock_khz=0, memory_bus_width=4096),
                                    dict(memory_clock_khz=1_000_000, memory_bus_width=-1),
                                    dict(memory_clock_khz=1.5e6, memory_bus_width=4096),
                                    dict(memory_clock_khz=True, memory_bus_width=4096)])
def test_a_partial_or_invalid_memory_declaration_is_refused(memory):
    before = devbridge.triton.declared(DEVICE)
    with pytest.raises(ValueError, match="memory_clock_khz|memory_bus_width"):
        devbridge.triton.declare_hardware(DEVICE, compiler=before.compiler_type or before.compiler,
                                          kernel_runtime=before.kernel_runtime, **memory)
    assert devbridge.triton.declared(DEVICE) is before


def test_inductor_estimates_a_memory_time_for_simdev_tensors():
    """The estimate that raised ZeroDivisionError under overlap scheduling,
    on simdev tensors: bytes read and written over the bandwidth, in ns."""
    from torch._inductor.utils import get_gpu_dram_gbps
    from torch.utils._runtime_estimation import get_transfer_time

    x = torch.ones(256, 64, device=DEVICE)
    y = torch.ones(256, 64, device=DEVICE)
    get_gpu_dram_gbps.cache_clear()  # functools.cache'd: read through the active driver
    try:
        with devbridge.triton.activate():
            nanoseconds = get_transfer_time([x], [y])
            expected = 2 * x.numel() * 4 / _gbps(devbridge.triton.declared(DEVICE).memory_properties())
    finally:
        get_gpu_dram_gbps.cache_clear()
    assert math.isfinite(nanoseconds) and nanoseconds == pytest.approx(expected)


# ---------------------------------------------------------------- compiling with the passes on

OVERLAP = {"aten_distributed_optimizations.enable_overlap_scheduling": True}
OVERLAP_WITH_FUSION_REGIONS = {**OVERLAP, "aten_distributed_optimizations.enable_fusion_regions": True}
REORDER = {"reorder_for_compute_comm_overlap": True,
           "reorder_for_compute_comm_overlap_passes": ["reorder_communication_preserving_peak_memory",
                                                      "sink_waits_iterative",
                                                      "reorder_communication_preserving_peak_memory"]}


def _compile_and_compare(fn, inputs, inductor_config, nccl_lib_estimations=False):
    from torch._inductor import config, config_comms

    expected = fn(*inputs)
    with config.patch(inductor_config), \
            config_comms.patch(runtime_estimations_use_nccl_lib_estimations=nccl_lib_estimations):
        actual = torch.compile(fn, fullgraph=True)(*inputs)
    cases.assert_close(actual, expected, 1e-4, 1e-4)


def _mlp(x, w1, w2):
    return torch.relu(x @ w1 + 1.0) @ w2


@pytest.mark.parametrize("inductor_config", [OVERLAP, REORDER], ids=["overlap", "reorder"])
def test_the_passes_without_collectives(inductor_config):
    inputs = (cases._randn(16, 32), cases._randn(32, 24, seed=1), cases._randn(24, 8, seed=2))
    _compile_and_compare(_mlp, cases.to(inputs, DEVICE), inductor_config)


@pytest.fixture(scope="module")
def fake_group():
    """A default process group of 2 ranks, this process being rank 0, whose
    simdev (and cpu) collectives are the fake backend's."""
    import torch.distributed as dist

    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    if dist.is_initialized():
        pytest.skip("a default process group is already initialized in this process")
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group(f"cpu:fake,{DEVICE}:fake", store=FakeStore(), rank=0, world_size=2)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


def _data_parallel_step(group):
    import torch.distributed._functional_collectives as funcol

    def step(x, w1, w2):
        hidden = torch.relu(x @ w1 + 1.0)
        hidden = funcol.all_reduce(hidden, "sum", group)  # as DDP's gradient all-reduce, in the graph
        out = hidden @ w2
        return out, funcol.all_gather_tensor(out.sum(0), 0, group)

    return step


def _step_inputs(rows):
    return cases.to((cases._randn(rows, 32), cases._randn(32, 24, seed=1), cases._randn(24, 8, seed=2)), DEVICE)


def test_overlap_scheduling_with_collectives_times_compute_on_simdev(fake_group, monkeypatch):
    """Was: InductorError: ZeroDivisionError (the DRAM bandwidth), then
    InductorError: AssertionError: Torch not compiled with CUDA enabled (the
    compute nodes timed on cuda)."""
    from torch._inductor.runtime import benchmarking

    timed = []
    benchmark = benchmarking.benchmarker.benchmark

    def spy(fn, fn_args=None, fn_kwargs=None, device=None, **kwargs):
        timed.append(torch.device(device) if isinstance(device, str) else device)
        return benchmark(fn, fn_args, fn_kwargs, device=device, **kwargs)

    monkeypatch.setattr(benchmarking.benchmarker, "benchmark", spy)
    _compile_and_compare(_data_parallel_step(fake_group), _step_inputs(17), OVERLAP)
    assert torch.device(DEVICE) in timed, timed


@pytest.mark.parametrize("inductor_config", [OVERLAP_WITH_FUSION_REGIONS, REORDER],
                         ids=["overlap-fusion-regions", "reorder"])
def test_the_passes_with_collectives_and_nccl_lib_estimations(fake_group, inductor_config):
    """reorder with runtime_estimations_use_nccl_lib_estimations was:
    InductorError: RuntimeError: No backend type associated with device type
    cuda (NCCL's estimator on cuda:<rank>)."""
    rows = 19 if "reorder_for_compute_comm_overlap" in inductor_config else 18
    _compile_and_compare(_data_parallel_step(fake_group), _step_inputs(rows), inductor_config,
                         nccl_lib_estimations=True)


# ---------------------------------------------------------------- comm_analysis on the plugin device

def test_the_nccl_lib_estimator_answers_none_for_simdev_collectives():
    from torch._inductor import comm_analysis, scheduler

    estimator = comm_analysis.estimate_nccl_collective_runtime_nccl_estimator
    assert estimator._devbridge_device == DEVICE
    assert scheduler.estimate_nccl_collective_runtime_nccl_estimator is estimator

    class Node:  # a scheduler node as the estimator reads it
        def __init__(self, device):
            self.device = device

        def get_device(self):
            return torch.device(self.device)

    assert estimator(Node(DEVICE)) is None  # the scheduler then takes Inductor's analytical estimate
    with pytest.raises(AttributeError, match="node"):
        estimator(Node("cpu"))  # torch's own, which reads snode.node


def test_the_analytical_estimate_runs_no_nvidia_smi_for_simdev(fake_group, monkeypatch):
    """torch's get_gpu_type asks `nvidia-smi -L` where torch.cuda is not
    available (torch.utils.collect_env.get_gpu_info); for the plugin device it
    answers as torch does for a GPU nvidia-smi does not name."""
    import torch.utils.collect_env as collect_env
    from torch._inductor import comm_analysis

    commands = []
    monkeypatch.setattr(collect_env, "run", lambda command: commands.append(command) or (1, "", ""))
    get_gpu_type = comm_analysis.get_gpu_type
    assert get_gpu_type._devbridge_device == DEVICE
    if not torch.cuda.is_available():
        uncached = get_gpu_type.__wrapped__
        uncached = getattr(uncached, "__wrapped__", uncached)  # torch's, under its lru_cache
        assert uncached() == comm_analysis.NVIDIA_GPU_TYPE.AMPERE
        assert any("nvidia-smi" in str(c) for c in commands), commands  # the gate: torch's own shells out
        commands.clear()
        get_gpu_type.cache_clear()
        assert get_gpu_type() == comm_analysis.NVIDIA_GPU_TYPE.AMPERE
    # a compile whose estimates reach get_gpu_type (2 ranks: the analytical model)
    _compile_and_compare(_data_parallel_step(fake_group), _step_inputs(21), REORDER)
    assert not any("nvidia-smi" in str(c) for c in commands), commands
