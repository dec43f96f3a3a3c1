"""torch.distributed's compile-time optimizations on the plugin device.

DDP and FSDP2 under torch.compile put the collectives in the graph
(torch.ops._c10d_functional), and Inductor can schedule compute around them:
aten_distributed_optimizations.enable_overlap_scheduling (an FX pass) and
reorder_for_compute_comm_overlap (scheduler passes), both off by default.
Both estimate how long each node takes, and parts of those estimates assume
CUDA. The collectives themselves are the plugin's: its c10d backend, which
devbridge never registers (docs/design.md: query, never register); here only
Inductor's estimates are adapted, for the plugin device, and every other
device keeps torch's answer.

Found on simdev (torch 2.13.0, Triton 3.7.1; torch 2.11.0 and 2.14.1 read),
with the collectives of torch's fake process group ("simdev:fake"), world
sizes 1 and 2:

  the DRAM bandwidth  every node's memory time divides its bytes by
      torch._inductor.utils.get_gpu_dram_gbps(), triton.testing.
      get_dram_gbps() of the active driver, 0 from devbridge's driver until
      now: enable_overlap_scheduling raised "InductorError:
      ZeroDivisionError: float division by zero" (torch/utils/
      _runtime_estimation.py get_transfer_time, from fusion_regions.
      estimate_fused_node_costs and overlap_scheduling.
      estimate_roofline_runtime_ms). Fixed where the number comes from, not
      here: the driver reports the declared memory, or a nominal 1024 GB/s
      (devbridge.triton.hardware.NOMINAL_MEMORY). The scheduler's own use
      (BaseSchedulerNode._get_estimated_runtime) treats a bandwidth <= 0 as
      "no estimate" and now gets the nominal one; it still answers 0 on a
      CUDA-less host, where get_device_tflops() is 0.

Patched here (install(), from register()):

  1. overlap_scheduling.benchmark_node_with_cache_key (wrapped) and
     get_collective_do_bench (replaced), 2.11, 2.13, 2.14: the overlap
     scheduler times each compute node (compute_estimator="benchmark", the
     default) with benchmarker.benchmark_gpu and no device type, which is
     CUDA's: "InductorError: AssertionError: Torch not compiled with CUDA
     enabled" on simdev, and CUDA events around plugin work on a CUDA host.
     A node on the plugin device is timed with benchmarker.benchmark(fn,
     device=<plugin>), which devbridge's benchmarker entry serves on the
     plugin's stream and events (_torch_api.register_benchmarker), with
     devbridge's Triton driver active (driver_routing). Both are
     module functions the scheduler calls by name; the module is patched when
     it is first imported (Inductor imports it only for the pass).
  2. comm_analysis.estimate_nccl_collective_runtime_nccl_estimator (replaced,
     there and where scheduler.py bound it), 2.11, 2.13, 2.14: under
     config_comms.runtime_estimations_use_nccl_lib_estimations the scheduler
     asks NCCL's time estimator on torch.device(f"cuda:{rank}") for every
     collective: "InductorError: RuntimeError: No backend type associated
     with device type cuda" for a collective on the plugin device, whose
     process group has no cuda backend (and on a host with one, NCCL's
     estimate of another device's collective). For the plugin device it
     answers None, on which the scheduler falls back to Inductor's analytical
     estimate (estimate_nccl_collective_runtime).
  3. comm_analysis.get_gpu_type (replaced, called by name in its module),
     2.11, 2.13, 2.14: the analytical estimate asks for the NVIDIA generation,
     from torch.cuda's compute capability where CUDA is available (2.13,
     2.14), else from `nvidia-smi -L` (torch.utils.collect_env.get_gpu_info),
     a subprocess of a GPU tool at the first estimate of each process on a
     host without CUDA (always, on 2.11). Where torch.cuda is not available
     and the plugin device is, the answer is torch's own answer for a GPU
     nvidia-smi does not name (NVIDIA_GPU_TYPE.AMPERE), without the
     subprocess.

Not patched, because they do not fail on the plugin device:

  comm_analysis._has_nvlink (2.13, 2.14; 2.11 has none): without CUDA it
      answers True before running `nvidia-smi topo -m`.
  gpus per node (comm_analysis.detect_interconnect and _nccl_algo_time, 2.13
      and 2.14; 2.11's estimate has a constant 8): torch.cuda.device_count()
      where CUDA is available, else 8. A plugin node of another size only
      shifts the analytical estimate between the intra- and inter-node
      models.
  estimate_nccl_collective_runtime_from_fx_node's _nccl_estimate (the overlap
      scheduler's NCCL estimate, asked by default): it returns None for the
      fake process group, for a process group without a cuda backend
      (2.13, 2.14: pg._get_backend(torch.device("cuda")) raises RuntimeError,
      which it catches) and for a backend without supports_time_estimate
      (2.11 asks the group's default device's backend), and then the
      analytical estimate is used. On a host whose group also has NCCL for
      cuda (2.13, 2.14) it would time a plugin collective's sizes with NCCL:
      an estimate, not a failure, and not reachable on simdev.
  node_runtime_estimation.benchmark_collective_with_cuda_events
      (collective_estimator="benchmark", not the default): CUDA events around
      the plugin's collectives; it returns None for the fake process group,
      and has not been run on a plugin's real backend (simdev's sdgloo:
      tests/python/test_distributed_training.py runs the default estimators).
"""

from __future__ import annotations

import contextvars
import functools

import torch

from .after_import import call_after_import

OVERLAP_SCHEDULING = "torch._inductor.fx_passes.overlap_scheduling"

# The device of the compute node the overlap scheduler is timing (set by the
# wrapped benchmark_node_with_cache_key, read by get_collective_do_bench).
_timed_device: contextvars.ContextVar = contextvars.ContextVar("devbridge_overlap_timed_device", default=None)


def _node_device_type(node) -> str | None:
    """The device type of an FX node's value (its FakeTensor), else of its
    inputs'."""
    from torch.utils._pytree import tree_leaves

    for candidate in (node, *node.all_input_nodes):
        for leaf in tree_leaves(candidate.meta.get("val")):
            if isinstance(leaf, torch.Tensor):
                return leaf.device.type
    return None


def time_compute_nodes_on(device: str, module) -> str:
    """Patch 1 on overlap_scheduling `module` (2.11, 2.13, 2.14)."""
    original_bench = module.get_collective_do_bench
    if getattr(original_bench, "_devbridge_device", None) == device:
        return "already"
    original_benchmark_node = module.benchmark_node_with_cache_key

    def benchmark_node_with_cache_key(n, *args, **kwargs):
        token = _timed_device.set(_node_device_type(n))
        try:
            return original_benchmark_node(n, *args, **kwargs)
        finally:
            _timed_device.reset(token)

    def get_collective_do_bench():
        if _timed_device.get() != device:
            return original_bench()
        from torch._inductor.runtime import benchmarking

        from . import driver_routing

        def bench(fn):
            # devbridge's benchmarker entry for the device (2.13, 2.14), or
            # its wrapped benchmark() (2.11: Triton's do_bench through the
            # active driver, devbridge's inside): the plugin's stream and events
            with driver_routing._PLUGIN_KERNEL:
                return benchmarking.benchmarker.benchmark(fn, device=torch.device(device), warmup=5)

        return bench

    benchmark_node_with_cache_key._devbridge_device = device
    benchmark_node_with_cache_key.__wrapped__ = original_benchmark_node
    get_collective_do_bench._devbridge_device = device
    get_collective_do_bench.__wrapped__ = original_bench
    module.benchmark_node_with_cache_key = benchmark_node_with_cache_key
    module.get_collective_do_bench = get_collective_do_bench
    return "wrapped"


def _snode_device_type(snode) -> str | None:
    try:
        found = snode.get_device()
    except Exception:  # noqa: BLE001 - a node without one: not ours
        return None
    return getattr(found, "type", None)


def no_nccl_estimates_for(device: str) -> str:
    """Patch 2 (2.11, 2.13, 2.14)."""
    from torch._inductor import comm_analysis, scheduler

    original = comm_analysis.estimate_nccl_collective_runtime_nccl_estimator
    if getattr(original, "_devbridge_device", None) == device:
        return "already"

    def estimate_nccl_collective_runtime_nccl_estimator(snode):
        if _snode_device_type(snode) == device:
            return None  # the scheduler falls back to the analytical estimate
        return original(snode)

    estimate_nccl_collective_runtime_nccl_estimator._devbridge_device = device
    estimate_nccl_collective_runtime_nccl_estimator.__wrapped__ = original
    comm_analysis.estimate_nccl_collective_runtime_nccl_estimator = estimate_nccl_collective_runtime_nccl_estimator
    if getattr(scheduler, "estimate_nccl_collective_runtime_nccl_estimator", None) is original:
        scheduler.estimate_nccl_collective_runtime_nccl_estimator = estimate_nccl_collective_runtime_nccl_estimator
    return "replaced"


def no_nvidia_smi_for(device: str, available) -> str:
    """Patch 3 (2.11, 2.13, 2.14); `available()` says whether the plugin
    device is."""
    from torch._inductor import comm_analysis

    original = comm_analysis.get_gpu_type
    if getattr(original, "_devbridge_device", None) == device:
        return "already"

    @functools.cache
    def get_gpu_type():
        if not torch.cuda.is_available() and available():
            return comm_analysis.NVIDIA_GPU_TYPE.AMPERE  # torch's answer for a GPU nvidia-smi does not name
        return original()

    get_gpu_type._devbridge_device = device
    get_gpu_type.__wrapped__ = original
    comm_analysis.get_gpu_type = get_gpu_type
    return "replaced"


# ---------------------------------------------------------------- arming

def install(device: str, available) -> list[str]:
    """Arm the three patches for `device`; returns what was patched, one line
    each (devbridge.inductor.patched_torch_apis())."""
    patched = []
    no_nccl_estimates_for(device)
    patched.append("torch._inductor.comm_analysis.estimate_nccl_collective_runtime_nccl_estimator: replaced (None "
                   f"for {device!r} collectives: Inductor's analytical estimate, not NCCL's on cuda)")
    no_nvidia_smi_for(device, available)
    patched.append("torch._inductor.comm_analysis.get_gpu_type: replaced (no nvidia-smi where torch.cuda is not "
                   f"available and {device!r} is)")
    # Inductor imports overlap_scheduling only when the pass runs; importing it
    # here would cost every process about 40 ms.
    call_after_import(OVERLAP_SCHEDULING, functools.partial(time_compute_nodes_on, device))
    patched.append("torch._inductor.fx_passes.overlap_scheduling.{benchmark_node_with_cache_key, "
                   f"get_collective_do_bench}}: wrapped, replaced ({device!r} compute nodes timed on its stream)")
    return patched
