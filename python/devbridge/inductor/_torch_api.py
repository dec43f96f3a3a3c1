"""Every private torch API devbridge's torch.compile integration touches, and
nothing else. Checked on torch 2.11.0, 2.13.0 and 2.14.1 (2.12 lies between
two of them and is accepted; the ranges are in _versions.py); another version
is refused by check_version(), which
register() calls first, so an unknown torch fails at registration with the
fix instead of compiling wrongly.

Sources: torch/_dynamo/, torch/_inductor/ and torch/utils/_triton.py of pytorch
2.11.0, 2.13.0 and 2.14.1, where the names below live. Each function names what it touches:

  Dynamo   torch._dynamo.device_interface: DeviceInterface (the base class),
           register_interface_for_device;
           type(torch._dynamo.callback.callback_handler).run_start_callbacks
  codegen  torch._inductor.codegen.common: register_backend_for_device
           (with device_custom_config: devbridge's part of the FX-graph
           cache key, cache_key.py), torch.utils._config_module.
           install_config_module,
           get_scheduling_for_device, register_device_op_overrides,
           DeviceOpOverrides; codegen.triton: TritonScheduling, TritonKernel
           (gen_common_triton_imports); codegen.wrapper: PythonWrapperCodegen
           (subclassed: create, write_header, make_allocation,
           codegen_python_shape_tuple); config.test_configs.
           track_memory_lifecycle
  gates    torch._inductor.utils.GPU_TYPES (appended in place) and
           get_gpu_type (replaced where bound); torch.utils._triton.has_triton
           (replaced where bound)
  driver   torch._inductor.runtime.triton_helpers.set_driver_to_gpu
           (replaced; 2.14's _skip_gpu_driver_setup honoured); triton_heuristics.CachingAutotuner: precompile,
           _precompile_config, _make_launchers, benchmark_all_configs,
           coordinate_descent_tuning (wrapped) and its device_props.type;
           triton_heuristics.knobs, the `triton.knobs` module
           TritonCompileResult.make_launcher reads the launch hooks from
           (shadowed while a plugin kernel's launchers are built: see
           launch_hooks_burnt_in_when_empty)
  rewrites torch._inductor.fx_passes.post_grad.prepare_softmax_extra_check
           (replaced: online softmax for the plugin device too)
  gates    torch._inductor.utils.is_big_gpu (replaced: no SM-count warning
           for the plugin device unless max-autotune was asked for)
  fusions  torch._inductor.scheduler._is_gpu_triton_backend (replaced, 2.13 and 2.14;
           2.11 has none): mix-order and nested reductions fused on the
           plugin device too
  templates torch._inductor.template_heuristics.registry.
           get_template_heuristic (replaced where bound) and
           _TEMPLATE_HEURISTIC_REGISTRY (read): the GEMM template configs of
           the Triton backend the plugin's compiler targets;
           choices.InductorChoices.get_config_heuristics (replaced on the
           class) and torch.cuda.get_device_capability (wrapped, answering
           the declared capability inside those heuristics only): the flex-
           attention and convolution templates' configs of the same backend
  layouts  torch._C._conv_determine_backend_memory_format (wrapped: the
           plugin's convolution format for its Overrideable convolutions)
  static   torch._inductor.runtime.triton_heuristics.StaticTritonCompileResult:
           can_statically_launch and reload_cubin_path (wrapped for plugin
           kernels), CannotStaticallyLaunchKernel, triton_cache_dir,
           triton_hash_to_path_key, log; hints.HeuristicType.USER_AUTOTUNE;
           config.use_static_triton_launcher, cpp_wrapper,
           static_launch_user_defined_triton_kernels,
           strict_static_triton_launcher; triton_helpers.get_constexprs
  graphs   torch._inductor.cudagraph_utils.check_multiple_devices_or_any_cpu_nodes
           (replaced), compile_fx.cudagraphify (replaced),
           output_code.cudagraph_post_compile and
           cudagraph_partition_post_compile (wrapped), utils.
           is_using_cudagraph_partition, GraphLowering.module: reduce-overhead
           on the plugin device (accept_graph_capture);
           config.triton.cudagraph_unexpected_rerecord_limit and
           torch._C._tensors_data_ptrs_at_indices_equal (captures per set of
           static input addresses), torch._C._storage_Use_Count and
           UntypedStorage._cdata (whether a backward graph's earlier outputs
           are still in use)
  timing   torch._inductor.runtime.benchmarking.register_benchmarker and
           Benchmarker.benchmark_gpu(device_type=) (2.13 and 2.14; 2.11 has no
           registry: benchmarking.benchmarker.benchmark wrapped for the
           plugin device, TritonBenchmarker.benchmark_gpu;
           config.inductor_default_autotune_warmup/_rep)
  flex     torch.nn.attention.flex_attention._validate_device (replaced),
           _apply_kernel_options, _create_empty_block_mask, BlockMask.
           as_tuple; torch._higher_order_ops.flex_attention.flex_attention
           (the operator); torch._inductor.kernel.flex.flex_decoding.
           get_split_k (replaced) and create_flex_decoding_kernel (wrapped,
           also where kernel.flex.flex_attention binds it); BlockMask's
           constructor, positionally (causal_mask.py)
  sdpa     torch._inductor.config.pre_grad_custom_pass, custom_graph_pass.
           CustomGraphPass; torch.utils._python_dispatch.TorchDispatchMode,
           FakeTensor.fake_mode, the FX node meta "example_value" (Dynamo's)
  distrib  distributed.py (collective-aware scheduling, 2.11, 2.13 and
           2.14): torch._inductor.fx_passes.overlap_scheduling.
           benchmark_node_with_cache_key (wrapped) and get_collective_do_bench
           (replaced), patched when that module is first imported (a
           sys.meta_path finder, as for Dynamo); comm_analysis.
           estimate_nccl_collective_runtime_nccl_estimator (replaced, also
           where scheduler binds it) and get_gpu_type (replaced),
           NVIDIA_GPU_TYPE.AMPERE; BaseSchedulerNode.get_device; the FX node
           meta "val" and all_input_nodes; torch.utils._pytree.tree_leaves;
           runtime.benchmarking.benchmarker.benchmark(fn, device=) (the
           timing entry above). Read, not touched: utils.get_gpu_dram_gbps
           and torch.utils._runtime_estimation.get_transfer_time divide by
           triton.testing.get_dram_gbps() of the active driver, whose memory
           properties devbridge's driver reports (triton/hardware.py,
           NOMINAL_MEMORY)
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading

import torch

from .._versions import TORCH_ACCEPTED as CHECKED_VERSIONS  # noqa: F401  (the range, in _versions.py)
from .._versions import require_checked, torch_minor  # noqa: F401  (also inductor/__init__.py's)


def check_version() -> None:
    """Refuse a torch outside _versions.TORCH_ACCEPTED (or warn, with the opt-in)."""
    require_checked("torch", "devbridge.inductor")


# ------------------------------------------------------------------ classes to subclass

def device_interface_base():
    from torch._dynamo.device_interface import DeviceInterface

    return DeviceInterface


def device_op_overrides_base():
    from torch._inductor.codegen.common import DeviceOpOverrides

    return DeviceOpOverrides


def tracking_allocations() -> bool:
    """Inductor's test mode that tracks every buffer's lifetime
    (config.test_configs.track_memory_lifecycle, 2.11, 2.13 and 2.14): its own
    allocation line is kept then."""
    from torch._inductor import config

    return bool(getattr(config.test_configs, "track_memory_lifecycle", False))


def triton_scheduling_classes():
    """(TritonScheduling, PythonWrapperCodegen)."""
    from torch._inductor.codegen.triton import TritonScheduling
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen

    return TritonScheduling, PythonWrapperCodegen


# ------------------------------------------------------------------ registration

def on_compile_start(callback) -> None:
    """Run callback() when Dynamo starts compiling a frame (before tracing:
    Dynamo caches its device handlers while tracing the first frame).
    Wrapped at the class of torch._dynamo.callback.callback_handler
    (run_start_callbacks): torch._dynamo.reset() clears the registered
    callbacks, not the class."""
    from torch._dynamo.callback import callback_handler

    handler_class = type(callback_handler)
    original = handler_class.run_start_callbacks
    if getattr(original, "_devbridge_callback", None) is callback:
        return

    def run_start_callbacks(self, *args, **kwargs):
        callback()
        return original(self, *args, **kwargs)

    run_start_callbacks._devbridge_callback = callback
    handler_class.run_start_callbacks = run_start_callbacks


def register_device_interface(device: str, interface) -> None:
    from torch._dynamo import device_interface

    device_interface.register_interface_for_device(device, interface)


def register_codegen(device: str, scheduling, wrapper, cache_config=None) -> None:
    from torch._inductor.codegen import common

    common.register_backend_for_device(device, scheduling, wrapper, device_custom_config=cache_config)


def make_config_module(module) -> None:
    """torch.utils._config_module.install_config_module: `module` becomes a
    ConfigModule (the type register_backend_for_device's device_custom_config
    must have, and what FxGraphHashDetails hashes)."""
    from torch.utils._config_module import install_config_module

    install_config_module(module)


def registered_scheduling(device: str):
    from torch._inductor.codegen import common

    return common.get_scheduling_for_device(device)


def register_op_overrides(device: str, overrides) -> None:
    from torch._inductor.codegen import common

    # torch 2.11 registers the built-in overrides (cuda's among them) at the
    # first lookup only while its table is empty: look one up first, or cuda
    # would get the CPU's empty ones (a wrapper that does not parse).
    common.get_device_op_overrides("cpu")
    common.register_device_op_overrides(device, overrides)


# ------------------------------------------------------------------ gates

def _rebind_everywhere(original, replacement) -> list[str]:
    """Replace every module global bound to `original` (the functions are
    imported by name into several Inductor modules at their import time)."""
    rebound = []
    for name, module in list(sys.modules.items()):
        if not name.startswith("torch.") or module is None:
            continue
        namespace = getattr(module, "__dict__", None)
        if not namespace:
            continue
        for attribute, value in list(namespace.items()):
            if value is original:
                namespace[attribute] = replacement
                rebound.append(f"{name}.{attribute}")
    return rebound


def add_gpu_type(device: str, available) -> None:
    """GPU_TYPES gains the device (in place: freezing_patterns holds the same
    list). get_gpu_type() asserts that at most one GPU type is available, so
    it is replaced by one that answers what it answered before for the
    built-in types and the plugin device only when none of them is available;
    a graph on the plugin device with CUDA also available therefore keeps
    "cuda" as the type constructors move to, which moves none of its nodes."""
    import torch._inductor.fx_passes.joint_graph  # noqa: F401  (binds get_gpu_type by name)
    import torch._inductor.fx_passes.post_grad  # noqa: F401
    from torch._inductor import utils

    if device not in utils.GPU_TYPES:
        utils.GPU_TYPES.append(device)
    original = utils.get_gpu_type
    if getattr(original, "_devbridge_device", None) == device:
        return
    builtin = [t for t in utils.GPU_TYPES if t != device]

    import functools

    @functools.cache
    def get_gpu_type() -> str:
        present = [t for t in builtin if getattr(torch, t, None) is not None and getattr(torch, t).is_available()]
        if present:
            return present[0]
        return device if available() else "cuda"

    get_gpu_type._devbridge_device = device
    _rebind_everywhere(original, get_gpu_type)
    utils.get_gpu_type = get_gpu_type


def accept_triton(device: str) -> None:
    """has_triton() is true when the plugin device serves Triton (its table
    knows only cuda / xpu / cpu / mtia). Cached and bound by name in
    scheduler, compile_fx, pad_mm, mm_grouped and autotune_cache."""
    import torch._inductor.compile_fx  # noqa: F401  (bind has_triton by name)
    import torch._inductor.fx_passes.pad_mm  # noqa: F401
    import torch._inductor.scheduler  # noqa: F401
    import torch.utils._triton as triton_utils

    original = triton_utils.has_triton
    if getattr(original, "_devbridge_device", None) == device:
        return

    import functools

    @functools.cache
    def has_triton() -> bool:
        return triton_utils.has_triton_package() or original()

    has_triton._devbridge_device = device
    _rebind_everywhere(original, has_triton)
    triton_utils.has_triton = has_triton


def add_kernel_prelude(device: str, prelude: str) -> None:
    """Every Triton kernel module Inductor writes for `device` starts with
    `prelude`: TritonKernel.gen_common_triton_imports (a classmethod every
    kernel kind uses: pointwise, reductions, split scans, combo kernels,
    templates, user @triton.jit kernels) gains it when the graph being
    generated is on the device (torch._inductor.virtualized.V.graph)."""
    from torch._inductor.codegen.triton import TritonKernel
    from torch._inductor.virtualized import V

    original = TritonKernel.__dict__["gen_common_triton_imports"]
    if getattr(original, "_devbridge_device", None) == device:
        return
    imports = original.__func__

    def gen_common_triton_imports(cls) -> str:
        text = imports(cls)
        try:
            on_device = V.graph.get_current_device_or_throw().type == device
        except Exception:  # no graph being generated (or no device yet): not ours
            on_device = False
        return text + prelude if on_device else text

    wrapped = classmethod(gen_common_triton_imports)
    gen_common_triton_imports._devbridge_device = device
    wrapped._devbridge_device = device
    TritonKernel.gen_common_triton_imports = wrapped


# ------------------------------------------------------------------ the active Triton driver

def triton_helpers():
    from torch._inductor.runtime import triton_helpers as module

    return module


def gpu_driver_setup_skipped() -> bool:
    """torch 2.14: compile workers load and precompile a kernel inside
    triton_helpers.skip_gpu_driver_setup() (runtime/compile_tasks.py), a
    ContextVar (_skip_gpu_driver_setup) that makes set_driver_to_gpu a no-op:
    they only warm the compile cache. 2.11 and 2.13 have none: False."""
    flag = getattr(triton_helpers(), "_skip_gpu_driver_setup", None)
    return bool(flag is not None and flag.get())


def caching_autotuner():
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    return CachingAutotuner


#: CachingAutotuner methods that compile, load or time a kernel through
#: Triton's active driver (the steady-state run() fast path needs none).
DRIVER_METHODS = ("precompile", "_precompile_config", "_make_launchers", "benchmark_all_configs",
                  "coordinate_descent_tuning")


def autotuner_device_type(autotuner) -> str:
    return autotuner.device_props.type


class _RuntimeWithoutLaunchHooks:
    """triton.knobs.runtime as make_launcher reads it, with no launch hooks."""

    launch_enter_hook = None
    launch_exit_hook = None

    def __init__(self, runtime):
        self._runtime = runtime

    def __getattr__(self, name):
        return getattr(self._runtime, name)


class _KnobsWithoutLaunchHooks:
    def __init__(self, knobs):
        self._knobs = knobs
        self.runtime = _RuntimeWithoutLaunchHooks(knobs.runtime)

    def __getattr__(self, name):
        return getattr(self._knobs, name)


_knobs_lock = threading.Lock()
_knobs_shadowed = 0  # plugin-kernel launcher builds in progress, all threads
_knobs_original = None


@contextlib.contextmanager
def launch_hooks_burnt_in_when_empty():
    """While a plugin kernel's launchers are built (CachingAutotuner.
    _make_launchers): with no Triton launch hook installed, make_launcher sees
    None for both hooks.

    make_launcher burns `None` into a launcher for its launch metadata when
    `knobs.runtime.launch_enter_hook` is falsy, "with zero overhead"; since
    Triton 3.5 the hooks are HookChain objects, never falsy, so every launch
    would evaluate CompiledKernel.launch_metadata (a dict built per launch:
    a few microseconds of host time on the H200, by cProfile) for hooks that
    do not exist. Only Inductor's own module global is shadowed (triton_heuristics.
    knobs, checked on 2.11.0, 2.13.0 and 2.14.1), never Triton's knobs: a hook added
    later does not reach these launchers, as with PyTorch's static CUDA
    launcher; one installed before the compile does. Nests across threads."""
    global _knobs_shadowed, _knobs_original
    from torch._inductor.runtime import triton_heuristics

    from .._triton_api import launch_hooks_empty

    with _knobs_lock:
        if _knobs_shadowed == 0:
            knobs = getattr(triton_heuristics, "knobs", None)
            if knobs is not None and launch_hooks_empty(knobs.runtime):
                _knobs_original = knobs
                triton_heuristics.knobs = _KnobsWithoutLaunchHooks(knobs)
        _knobs_shadowed += 1
    try:
        yield
    finally:
        with _knobs_lock:
            _knobs_shadowed -= 1
            if _knobs_shadowed == 0 and _knobs_original is not None:
                triton_heuristics.knobs = _knobs_original
                _knobs_original = None


# ------------------------------------------------------------------ the same graph rewrites as cuda

def online_softmax_for(device: str) -> str:
    """Inductor rewrites softmax into its online form (one pass computing max
    and sum, inductor_prims.prepare_softmax_online) only for "cuda" and "xpu"
    tensors (fx_passes.post_grad.prepare_softmax_extra_check), although the
    rewrite is plain Triton: the plugin device gets it too, under the same
    config.online_softmax. The check is captured when post_grad.lazy_init
    registers the pattern (once per input device, at the first post-grad
    pass), so this runs at register(), before any compile. Checked on 2.11.0
    and 2.13.0. Returns what was done."""
    from torch._inductor import config
    from torch._inductor.fx_passes import post_grad

    original = post_grad.prepare_softmax_extra_check
    if getattr(original, "_devbridge_device", None) == device:
        return "already"

    def prepare_softmax_extra_check(match):
        value = match.kwargs["x"].meta["val"]
        if value.device.type == device:
            return bool(config.online_softmax)
        return original(match)

    prepare_softmax_extra_check._devbridge_device = device
    post_grad.prepare_softmax_extra_check = prepare_softmax_extra_check
    return "replaced"


def quiet_small_gpu_gate(device: str) -> str:
    """Inductor asks utils.is_big_gpu (too few SMs for its GEMM templates:
    under 68, a GPU below an RTX 3080) even in the default mode, for the
    templates of addmm and int_mm, and warns "Not enough SMs to use
    max_autotune_gemm mode" when the answer is no. On cuda that warning
    concerns small GPUs; a plugin device declaring fewer SMs would print it at
    every compile of a Linear although the user asked for no autotuning. For
    `device` the answer stays torch's own, and its warning is kept for when
    the user asked for max-autotune (config.max_autotune or
    max_autotune_gemm). Checked on 2.11.0, 2.13.0 and 2.14.1 (a functools.cache'd
    function, looked up by name from _use_template_for_gpu)."""
    import functools
    import logging

    from torch._inductor import config, utils

    original = utils.is_big_gpu
    if getattr(original, "_devbridge_device", None) == device:
        return "already"
    uncached = getattr(original, "__wrapped__", original)

    class _DropSmWarning(logging.Filter):
        def filter(self, record):
            return "Not enough SMs" not in str(record.msg)

    @functools.cache
    def quiet(index_or_device):
        drop = _DropSmWarning()
        utils.log.addFilter(drop)
        try:
            return uncached(index_or_device)
        finally:
            utils.log.removeFilter(drop)

    def is_big_gpu(index_or_device=0):
        asked = config.max_autotune or config.max_autotune_gemm
        if not asked and isinstance(index_or_device, torch.device) and index_or_device.type == device:
            return quiet(index_or_device)
        return original(index_or_device)

    is_big_gpu._devbridge_device = device
    is_big_gpu.cache_clear = lambda: (original.cache_clear(), quiet.cache_clear())
    utils.is_big_gpu = is_big_gpu
    return "replaced"


# ------------------------------------------------------------------ reduction fusions
def fuse_reductions_as_on_cuda(device: str) -> str:
    """Inductor fuses sibling reductions of one input over different
    dimensions (mix-order reduction: a layer norm's backward sums the weight's
    gradient down the columns and the input's along the rows in one pass) and,
    under config.triton.nested_reduction, a reduction with the one it feeds,
    for cuda and xpu only: scheduler._is_gpu_triton_backend. For `device` the
    answer is the one cuda gets: a GPU device whose backend is Triton.
    Checked on 2.13.0 (a module function, called by name from the scheduler's
    classes); 2.11.0 tests the device type inline in
    MixOrderReduction.can_fuse, which is left as it is: "absent"."""
    from torch._inductor import scheduler
    from torch._inductor.utils import get_current_backend

    original = getattr(scheduler, "_is_gpu_triton_backend", None)
    if original is None:
        return "absent"
    if getattr(original, "_devbridge_device", None) == device:
        return "already"

    def _is_gpu_triton_backend(node1, node2):
        if node1.is_gpu() and node2.is_gpu() and node1.get_device().type == device:
            return get_current_backend(device) == "triton"
        return original(node1, node2)

    _is_gpu_triton_backend._devbridge_device = device
    scheduler._is_gpu_triton_backend = _is_gpu_triton_backend
    return "replaced"


# ------------------------------------------------------------------ GEMM templates
def share_template_heuristics(device: str, peer: str) -> str:
    """Inductor's Triton GEMM templates (mm, bmm, addmm, baddbmm, int_mm,
    mm_plus_mm under max-autotune; decompose-k) take their configs from
    template_heuristics.registry, keyed by device type. A plugin device has no
    entry there, so Inductor logs "No template heuristic found" and offers the
    template with no config: max-autotune on the plugin times ATen alone. For
    `device`, a template it has no entry of its own for is answered with
    `peer`'s (the registry's key of the Triton backend the device's compiler
    targets): the same configs as on the peer. An entry registered for
    `device` itself, by the plugin or later by torch, still wins.

    Checked on 2.11.0, 2.13.0 and 2.14.1: get_template_heuristic(template_name,
    device_type, op_name) and _TEMPLATE_HEURISTIC_REGISTRY keyed (template,
    device_type, op_name). 2.11 and 2.13 define them in
    template_heuristics/registry.py, imported by name into the
    template_heuristics package and from there into choices.py; 2.14 moved
    them to heuristics/registry.py (the registry also holds codegen keys
    (name, device_type, None)), re-exported by heuristics/template/registry.py
    and heuristics/template/__init__.py (which choices.py imports from), with
    template_heuristics kept as a shim over the same module objects.
    _TEMPLATE_HEURISTIC_BINDERS lists every module of either layout that binds
    the name."""
    from torch._inductor.template_heuristics import registry

    original = registry.get_template_heuristic
    peers = getattr(original, "_devbridge_peers", None)
    if peers is not None:
        peers[device] = peer
        return "already"
    peers = {device: peer}
    entries = registry._TEMPLATE_HEURISTIC_REGISTRY

    def get_template_heuristic(template_name, device_type, op_name):
        peer_type = peers.get(device_type)
        if peer_type is not None and not any(key[:2] == (template_name, device_type) for key in entries):
            device_type = peer_type
        return original(template_name, device_type, op_name)

    get_template_heuristic._devbridge_peers = peers
    registry.get_template_heuristic = get_template_heuristic
    # where it is bound by name (a later import of choices.py takes the
    # package's attribute); walking every module costs 13 ms
    for name in _TEMPLATE_HEURISTIC_BINDERS:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "get_template_heuristic", None) is original:
            module.get_template_heuristic = get_template_heuristic
    return "replaced"


# The modules that bind get_template_heuristic by name: 2.11 and 2.13 (the
# first two and choices), 2.14 (all but the first, which is then a shim
# module over the next one's objects).
_TEMPLATE_HEURISTIC_BINDERS = (
    "torch._inductor.template_heuristics.registry",
    "torch._inductor.template_heuristics",
    "torch._inductor.heuristics.registry",
    "torch._inductor.heuristics.template.registry",
    "torch._inductor.heuristics.template",
    "torch._inductor.choices",
)


def capture_rerecord_limit() -> int:
    """torch._inductor.config.triton.cudagraph_unexpected_rerecord_limit:
    how many times CUDA graph trees record one function again for new static
    input addresses before running it without graphs (128 by default on
    2.13.0 and 2.14.1; 128 where a torch lacks it)."""
    from torch._inductor import config

    return int(getattr(config.triton, "cudagraph_unexpected_rerecord_limit", 128))


def data_pointers_equal(tensors: list, data_pointers: list, indices: list) -> bool:
    """Whether tensors[i].data_ptr() == data_pointers[i] for every i in
    `indices` (data_pointers is indexed as tensors are):
    torch._C._tensors_data_ptrs_at_indices_equal, the check CUDA graph trees
    make on every replay, in C++ (2.14.1 has it; 2.13.0's CPU build does
    not), else the same in Python."""
    if _data_pointers_equal is not None:
        return _data_pointers_equal(tensors, data_pointers, indices)
    return all(tensors[i].data_ptr() == data_pointers[i] for i in indices)


_data_pointers_equal = getattr(torch._C, "_tensors_data_ptrs_at_indices_equal", None)


def storage_handle(tensor: torch.Tensor) -> int:
    """The address of the StorageImpl under `tensor` (UntypedStorage._cdata),
    for storage_references; valid while something keeps that storage alive."""
    return tensor.untyped_storage()._cdata


def storage_references(handle: int) -> int:
    """How many strong references a storage (by storage_handle) has:
    torch._C._storage_Use_Count, which CUDA graph trees read to see whether a
    graph's earlier outputs are still in use."""
    return torch._C._storage_Use_Count(handle)


def share_config_heuristics(device: str, peer: str, capability) -> str:
    """Inductor's flex-attention, flex-decoding and convolution templates take
    their configs, max-autotune or not, from
    InductorChoices.get_config_heuristics(device_type): for "cuda" a class
    tuned per compute capability (on sm90, a bf16 flex backward with head dim
    64 gets blocks 64x128x128x64, 3 stages, 8 warps), for a type it does not
    know the generic BaseConfigHeuristic (16x16x16x16 blocks, 1 stage: several
    times slower on the same GPU). For `device`, the answer is `peer`'s class,
    with its compute-capability queries answered by `capability()` (the
    plugin's declared hardware, major and minor) rather than by torch.cuda,
    which may be absent (a CPU build of torch) or another GPU.

    Checked on 2.11.0, 2.13.0 and 2.14.1 (where the method is missing,
    nothing is replaced): InductorChoices.get_config_heuristics
    (self, device_type) in choices.py, whose get_flex_attention_fwd_configs,
    get_flex_attention_bwd_configs, get_flex_decode_configs, get_conv_configs
    and get_depthwise_conv_configs call it with the device type; the cuda
    class's methods read torch.cuda.get_device_capability() when called
    (template_heuristics/triton.py; 2.14: heuristics/template/triton.py)."""
    from torch._inductor import choices

    original = getattr(choices.InductorChoices, "get_config_heuristics", None)
    if original is None:
        return "absent"
    peers = getattr(original, "_devbridge_peers", None)
    if peers is not None:
        peers[device] = (peer, capability)
        return "already"
    peers = {device: (peer, capability)}

    def get_config_heuristics(self, device_type="cuda"):
        shared = peers.get(device_type)
        if shared is None:
            return original(self, device_type)
        peer_type, peer_capability = shared
        return _CapabilityPinned(original(self, peer_type), peer_capability)

    get_config_heuristics._devbridge_peers = peers
    choices.InductorChoices.get_config_heuristics = get_config_heuristics
    _pin_cuda_capability_queries()
    return "replaced"


_capability_pin = threading.local()


class _CapabilityPinned:
    """A peer's config heuristics whose methods, while they run on this
    thread, read the compute capability `capability()` returns from
    torch.cuda.get_device_capability."""

    def __init__(self, heuristics, capability):
        self._heuristics, self._capability = heuristics, capability

    def __getattr__(self, name):
        value = getattr(self._heuristics, name)
        if not callable(value):
            return value

        def pinned(*args, **kwargs):
            outer = getattr(_capability_pin, "value", None)
            _capability_pin.value = tuple(self._capability())
            try:
                return value(*args, **kwargs)
            finally:
                _capability_pin.value = outer

        return pinned


def _pin_cuda_capability_queries() -> None:
    """torch.cuda.get_device_capability, wrapped once: inside a pinned
    heuristics call on this thread it answers the pinned capability; anywhere
    else it is torch's own, called as it was."""
    original = torch.cuda.get_device_capability
    if getattr(original, "_devbridge_pinnable", False):
        return

    @functools.wraps(original)
    def get_device_capability(*args, **kwargs):
        pinned = getattr(_capability_pin, "value", None)
        return pinned if pinned is not None else original(*args, **kwargs)

    get_device_capability._devbridge_pinnable = True
    torch.cuda.get_device_capability = get_device_capability


# ------------------------------------------------------------------ convolution layouts

_convolution_formats: dict = {}  # device type -> rule(input, weight) -> torch.memory_format


def convolution_formats() -> dict:
    return dict(_convolution_formats)


def predict_convolution_format(device: str, rule) -> str:
    """FakeTensor (torch.compile, AOTAutograd) predicts a convolution's result
    layout by asking ATen for the format of the backend it would select
    (torch/_subclasses/fake_impls.py, conv: torch._C._select_conv_backend,
    then torch._C._conv_determine_backend_memory_format). A PrivateUse1
    device's backend is Overrideable, whose format is always contiguous, so
    a plugin whose convolution returns channels-last results (as cuDNN's do
    for channels-last inputs) has them copied into the predicted layout, and
    Inductor's channels-last layout optimization turns into copies. For
    Overrideable convolutions on `device` the format becomes rule(input,
    weight): what the plugin's convolution_overrideable really returns.
    Checked on 2.11.0, 2.13.0 and 2.14.1 (the function is looked up on torch._C at
    each call, under the fake mode, so input.device is the fake device)."""
    _convolution_formats[device] = rule
    original = torch._C._conv_determine_backend_memory_format
    if getattr(original, "_devbridge_formats", None) is _convolution_formats:
        return "already"
    overrideable = torch._C._ConvBackend.Overrideable

    def _conv_determine_backend_memory_format(input, weight, backend):
        if backend == overrideable:
            plugin_rule = _convolution_formats.get(input.device.type)
            if plugin_rule is not None:
                return plugin_rule(input, weight)
        return original(input, weight, backend)

    _conv_determine_backend_memory_format._devbridge_formats = _convolution_formats
    torch._C._conv_determine_backend_memory_format = _conv_determine_backend_memory_format
    return "wrapped"


# ------------------------------------------------------------------ static launches

def install_static_launch(device: str, make_kernel, locate_binary) -> None:
    """Plugin kernels take Inductor's static-launch path, which cuda kernels
    take through PyTorch's StaticCudaLauncher: a compile result holding a
    small picklable kernel (not Triton's CompiledKernel), which TritonBundler
    saves with the FX graph and restores on a warm start without
    triton.compile or a compile worker (TritonBundler.load_autotuners ->
    StaticAutotunerFuture). Checked on 2.11.0, 2.13.0 and 2.14.1; the device
    gate (cuda/xpu/hip only) is the same in each. 2.14's compile-on-one-rank
    kernels (triton_meta["device"] None, loaded on the current device) are
    refused: they take Triton's launcher, which asks the current device.

    Two methods of runtime.triton_heuristics.StaticTritonCompileResult are
    wrapped, each only for kernels of `device`:
      can_statically_launch(kernel, inductor_meta, triton_meta, heuristic_type)
          (a staticmethod): make_kernel(kernel, binary_dir, refusal) is called where
          Inductor's own gates allow a static launch (config.
          use_static_triton_launcher, no cpp_wrapper, user kernels only with
          static_launch_user_defined_triton_kernels, no store_cubin); it
          returns the kernel or raises CannotStaticallyLaunchKernel, which is
          logged and falls back to Triton's launcher as for cuda.
      reload_cubin_path(self): its file name uses GPU_KERNEL_BIN_EXTS, which
          knows cuda/hip/xpu only; locate_binary(kernel, binary_dir) finds
          (or rewrites) the binary instead. binary_dir is Triton's cache
          directory of the kernel's hash."""
    import os

    import torch._inductor.config as config
    from torch._inductor.runtime import triton_heuristics
    from torch._inductor.runtime.hints import HeuristicType

    result_class = triton_heuristics.StaticTritonCompileResult
    original = result_class.__dict__["can_statically_launch"].__func__
    if getattr(original, "_devbridge_device", None) == device:
        return
    refusal = triton_heuristics.CannotStaticallyLaunchKernel
    original_reload = result_class.reload_cubin_path

    def binary_dir(device_index, kernel_hash) -> str:
        return os.path.join(triton_heuristics.triton_cache_dir(device_index or 0),
                            triton_heuristics.triton_hash_to_path_key(kernel_hash))

    def can_statically_launch(kernel, inductor_meta, triton_meta, heuristic_type):
        if triton_meta.get("device_type") != device:
            return original(kernel, inductor_meta, triton_meta, heuristic_type)
        if not config.use_static_triton_launcher:
            return None
        try:
            if config.cpp_wrapper:
                raise refusal("Cpp wrapper enabled")
            if heuristic_type == HeuristicType.USER_AUTOTUNE and not config.static_launch_user_defined_triton_kernels:
                raise refusal("User defined triton kernel")
            if inductor_meta.get("store_cubin"):
                raise refusal("store_cubin is enabled")
            if "device" in triton_meta and triton_meta["device"] is None:
                # torch 2.14's compile-on-one-rank: a rank-agnostic kernel
                # (StaticTritonCompileResult's device_agnostic) loads on
                # whichever device is current; a plugin static kernel binds one.
                raise refusal("a rank-agnostic kernel (no device index) cannot bind one device")
            return make_kernel(kernel, binary_dir(triton_meta.get("device", 0), kernel.hash), refusal)
        except refusal as error:
            triton_heuristics.log.info("devbridge: %s kernel not launched statically: %s", device, error)
            if config.strict_static_triton_launcher:
                raise
            return None

    def reload_cubin_path(self):
        if self.compile_meta.get("device_type") != device:
            return original_reload(self)
        locate_binary(self.kernel, binary_dir(self.compile_meta.get("device", 0), self.kernel.hash))

    can_statically_launch._devbridge_device = device
    result_class.can_statically_launch = staticmethod(can_statically_launch)
    result_class.reload_cubin_path = reload_cubin_path


def declared_constexprs(jit_fn) -> list[int]:
    """Positions of the parameters a @triton.jit function declares
    tl.constexpr (Inductor's triton_helpers.get_constexprs, 2.11, 2.13 and 2.14)."""
    from torch._inductor.runtime.triton_helpers import get_constexprs

    return get_constexprs(jit_fn)


# ------------------------------------------------------------------ timing

def register_benchmarker(device: str) -> str:
    """Kernel timing for the device, on the plugin's own stream and events.
    torch 2.13 has a registry (without an entry it times any non-CPU device
    with CUDA events): the entry times with the device interface's events.
    torch 2.11 has none: its autotuner times every non-CPU kernel with the
    process's benchmarker, on a CUDA host InductorBenchmarker, whose events
    are recorded on torch.cuda's current stream, which a plugin's own
    non-blocking streams do not wait for: every config of a plugin kernel
    would time as nearly nothing and the autotuner would pick one blindly.
    There the benchmarker's benchmark() is wrapped, for `device` only, to
    time with Triton's do_bench (TritonBenchmarker.benchmark_gpu) through the
    active driver, devbridge's while a plugin kernel is tuned, whose device
    interface records on the plugin's current stream; its minimum, the
    statistic InductorBenchmarker returns on cuda. Returns what was done."""
    from torch._inductor.runtime import benchmarking

    registry = getattr(benchmarking, "register_benchmarker", None)
    if registry is None:
        return _wrap_benchmarker_for(device, benchmarking)
    if device in getattr(benchmarking, "_BENCHMARK_DISPATCH", {}):
        return "already registered"

    def benchmark_on_device(self, fn, *, warmup=25, rep=100, **kwargs):
        kwargs.pop("device_type", None)
        return self.benchmark_gpu(fn, warmup=warmup, rep=rep, device_type=device, **kwargs)

    registry(device, benchmark_on_device)
    return "register_benchmarker"


def _wrap_benchmarker_for(plugin: str, benchmarking) -> str:
    """torch 2.11: Benchmarker.benchmark(fn, fn_args, fn_kwargs, device,
    **kwargs), on the module's `benchmarker` instance (triton_heuristics and
    the other users import the instance)."""
    from torch._inductor import config

    instance = benchmarking.benchmarker
    current = instance.benchmark
    if getattr(current, "_devbridge_device", None) == plugin:
        return "already"
    triton_timing = benchmarking.TritonBenchmarker.benchmark_gpu

    def benchmark(fn, fn_args=None, fn_kwargs=None, device=None, **kwargs):
        target = torch.device(device) if isinstance(device, str) else device
        if target is None or target.type != plugin:
            return current(fn, fn_args, fn_kwargs, device=device, **kwargs)
        args, keywords = fn_args or (), fn_kwargs or {}
        call = fn if not args and not keywords else (lambda: fn(*args, **keywords))
        kwargs.setdefault("warmup", config.inductor_default_autotune_warmup)
        kwargs.setdefault("rep", config.inductor_default_autotune_rep)
        kwargs.setdefault("return_mode", "min")
        return triton_timing(instance, call, **kwargs)

    benchmark._devbridge_device = plugin
    instance.benchmark = benchmark
    return "benchmarker.benchmark wrapped (torch 2.11 has no benchmarker registry): Triton's do_bench on the " \
           f"{plugin!r} stream"


# ---------------------------------------------------------- graph capture

def accept_graph_capture(device: str, graphify, refusal, report_skip) -> list[str]:
    """torch.compile(mode="reduce-overhead") for `device` (graph_capture.py).

    Inductor hands a compiled graph to CUDA graph trees only when its nodes
    are on cuda alone: cudagraph_utils.check_multiple_devices_or_any_cpu_nodes
    calls any other device "multiple devices", and for a graph without cuda
    output_code only counts the skip, silently. So:
      - check_multiple_devices_or_any_cpu_nodes is replaced: a graph on
        `device` alone (meta, and with graph partitions the CPU, left out
        as torch leaves them out) passes unless refusal(graph_lowering)
        names a reason; anything else gets torch's answer;
      - compile_fx.cudagraphify (looked up by name at each call in
        output_code's cudagraph_post_compile and
        cudagraph_partition_post_compile, and in CUDAGraphPolicy.cudagraphify)
        is replaced by a dispatcher: a callable whose first call brings
        tensors of `device` goes to graphify(model, static_input_idxs,
        mutated_input_idxs=...), any other to torch's cudagraphify;
      - output_code.cudagraph_post_compile is wrapped: where it turns capture
        off for a graph on `device` (mutated inputs, non-tensor inputs, ...),
        report_skip(reasons) says so, as torch says so for cuda.
    Checked on 2.11, 2.13 and 2.14."""
    from torch._inductor import compile_fx, cudagraph_utils, output_code
    from torch._inductor.virtualized import V

    patched = []
    original_check = cudagraph_utils.check_multiple_devices_or_any_cpu_nodes
    if not getattr(original_check, "_devbridge_device", None):
        def check_multiple_devices_or_any_cpu_nodes(device_node_mapping):
            devices = {d for d in device_node_mapping if d.type != "meta"}
            if _using_graph_partition():
                devices = {d for d in devices if d.type != "cpu"}
            if len(devices) == 1 and next(iter(devices)).type == device:
                return refusal(V.graph)
            return original_check(device_node_mapping)

        check_multiple_devices_or_any_cpu_nodes._devbridge_device = device
        cudagraph_utils.check_multiple_devices_or_any_cpu_nodes = check_multiple_devices_or_any_cpu_nodes
        _rebind_everywhere(original_check, check_multiple_devices_or_any_cpu_nodes)
    patched.append("torch._inductor.cudagraph_utils.check_multiple_devices_or_any_cpu_nodes: replaced (a graph "
                   f"on {device!r} alone may be captured)")

    original_cudagraphify = compile_fx.cudagraphify
    if not getattr(original_cudagraphify, "_devbridge_device", None):
        def cudagraphify(model, static_input_idxs=(), **kwargs):
            chosen = None

            def run(new_inputs):
                nonlocal chosen
                if chosen is None:
                    on_device = any(isinstance(x, torch.Tensor) and x.device.type == device for x in new_inputs)
                    if on_device:
                        chosen = graphify(model, static_input_idxs,
                                          mutated_input_idxs=kwargs.get("mutated_input_idxs", ()),
                                          is_backward=bool(kwargs.get("is_backward", False)))
                    else:
                        chosen = original_cudagraphify(model, static_input_idxs, **kwargs)
                return chosen(new_inputs)

            return run

        cudagraphify._devbridge_device = device
        compile_fx.cudagraphify = cudagraphify
    patched.append(f"torch._inductor.compile_fx.cudagraphify: replaced ({device!r} graphs through "
                   "devbridge.graphs, others through CUDA graph trees)")

    for name in ("cudagraph_post_compile", "cudagraph_partition_post_compile"):  # the second: graph partitions
        original = getattr(output_code, name, None)
        if original is None or getattr(original, "_devbridge_device", None):
            continue
        output_code.__dict__[name] = _reporting_skips(original, device, report_skip)
        patched.append(f"torch._inductor.output_code.{name}: wrapped (why a {device!r} graph is not "
                       "captured is logged, as for cuda)")
    return patched


def _reporting_skips(post_compile, device: str, report_skip):
    def wrapper(example_inputs, compiled_graph, cudagraphs, *args, **kwargs):
        result = post_compile(example_inputs, compiled_graph, cudagraphs, *args, **kwargs)
        if not cudagraphs and device in getattr(compiled_graph, "device_types", ()):
            info = getattr(compiled_graph, "cudagraph_info", None)
            report_skip(list(getattr(info, "cudagraph_fail_reasons", None) or ["Inductor turned capture off"]))
        return result

    wrapper._devbridge_device = device
    wrapper.__wrapped__ = post_compile
    return wrapper


def _using_graph_partition() -> bool:
    from torch._inductor import utils

    using = getattr(utils, "is_using_cudagraph_partition", None)
    return bool(using and using())


def lowering_nodes(graph_lowering) -> list:
    """The FX nodes of the graph Inductor is lowering (GraphLowering.module)."""
    module = getattr(graph_lowering, "module", None)
    graph = getattr(module, "graph", None)
    return list(graph.nodes) if graph is not None else []


# ------------------------------------------------------------------ flex attention

def accept_flex_attention(device: str) -> str:
    """torch.nn.attention.flex_attention.flex_attention refuses every device
    but cuda, cpu, xpu, hpu (and mps on 2.13+) in _validate_device, although
    Inductor's flex lowering serves any Triton device with its templates (its
    cpu and mps branches aside). For `device` the check passes; others get
    the original. flex_attention looks the function up by name in its module
    at each call, and Dynamo inlines it there, so the module attribute is
    replaced. Checked on 2.11.0, 2.13.0 and 2.14.1."""
    from torch.nn.attention import flex_attention as module

    original = module._validate_device
    if getattr(original, "_devbridge_device", None) == device:
        return "already"

    def _validate_device(query, key, value):
        if query.device.type == device:
            return None
        return original(query, key, value)

    _validate_device._devbridge_device = device
    module._validate_device = _validate_device
    return "replaced"


_decoding_device: threading.local = threading.local()  # the device of the flex-decoding kernel being lowered


def flex_decoding_split_for(device: str, multiprocessor_count) -> str:
    """Inductor's flex-decoding lowering (short queries: under 128 rows)
    splits the keys over the GPU's multiprocessors, which it counts with
    torch.cuda.get_device_properties("cuda") (torch.xpu's where available):
    on a host without CUDA that raises, and beside CUDA it counts another
    device's. For a kernel on `device` the count is
    multiprocessor_count(index), the plugin's declared hardware.
    kernel.flex.flex_decoding.get_split_k(B, H, Mk) is replaced (it is
    called by name in its module) and create_flex_decoding_kernel(query,
    ...) wrapped to say which device it lowers for, in flex_decoding and
    where flex_attention bound it by name. Checked on 2.11.0, 2.13.0 and
    2.14.1."""
    from torch._inductor.kernel.flex import flex_attention as lowering
    from torch._inductor.kernel.flex import flex_decoding

    original_create = flex_decoding.create_flex_decoding_kernel
    if getattr(original_create, "_devbridge_device", None) == device:
        return "already"
    original_split = flex_decoding.get_split_k

    def create_flex_decoding_kernel(*args, **kwargs):
        query = args[0] if args else kwargs["query"]
        target = query.get_device()
        previous = getattr(_decoding_device, "value", None)
        _decoding_device.value = target if target is not None and target.type == device else None
        try:
            return original_create(*args, **kwargs)
        finally:
            _decoding_device.value = previous

    def get_split_k(B, H, Mk):
        target = getattr(_decoding_device, "value", None)
        if target is None:
            return original_split(B, H, Mk)
        # Inductor's rule (flex_decoding.get_split_k) with the plugin's count
        return max(int(multiprocessor_count(target.index or 0)) // max(B * H, 1) * 2, 1)

    create_flex_decoding_kernel._devbridge_device = device
    flex_decoding.get_split_k = get_split_k
    flex_decoding.create_flex_decoding_kernel = create_flex_decoding_kernel
    if getattr(lowering, "create_flex_decoding_kernel", None) is original_create:
        lowering.create_flex_decoding_kernel = create_flex_decoding_kernel
    return "replaced"


# The SDPA rewrite (attention.py): the pieces of torch it reads and calls.

def example_value(node):
    """The FakeTensor (or constant) Dynamo recorded for an FX node of the graph
    it hands the backend (node.meta["example_value"]; "val" where another
    tracer made the graph). Checked on 2.11.0, 2.13.0 and 2.14.1."""
    meta = node.meta
    return meta["example_value"] if "example_value" in meta else meta.get("val")


def sdpa_runs_math(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa) -> bool:
    """Whether scaled_dot_product_attention runs these inputs (Dynamo's
    FakeTensors) in its math decomposition rather than a fused kernel: it is
    called on them, under their fake mode, as AOTAutograd will call it, and a
    dispatch mode watches for a fused attention op (aten._scaled_dot_product_*
    other than the math ones: a plugin's
    _scaled_dot_product_fused_attention_overrideable, flash, efficient,
    cuDNN). The choice itself cannot be asked directly: SDPA calls the
    device's _fused_sdp_choice_stub by device type, in C++, while the
    torch._fused_sdp_choice op's Meta kernel, which FakeTensors reach, knows
    only cuda and answers math for a plugin. Honours torch.nn.attention.
    sdpa_kernel as SDPA does. Checked on 2.11.0, 2.13.0 and 2.14.1
    (torch.utils._python_dispatch.TorchDispatchMode, FakeTensor.fake_mode)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    fused = []

    class FusedAttentionSeen(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = str(func)  # "aten._scaled_dot_product_fused_attention_overrideable.default"
            if name.startswith("aten._scaled_dot_product_") and "_math" not in name:
                fused.append(name)
            return func(*args, **(kwargs or {}))

    with query.fake_mode, FusedAttentionSeen():
        torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                                         is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
    return not fused


def empty_block_mask(query, key):
    """flex_attention's block mask when none is given: one block over
    everything, with the fields nn.attention.flex_attention.
    _create_empty_block_mask gives it (2.11.0, 2.13.0, 2.14.1: a block of
    _LARGE_SPARSE_BLOCK_SIZE, seq_lengths (1, 1), noop_mask), made directly:
    BlockMask.from_kv_blocks, which it calls, derives the q side through a
    sort, a launch of its own in every compiled call."""
    from torch.nn.attention import flex_attention as flex

    if not block_mask_from_tensors_supported():
        return flex._create_empty_block_mask(query, key)
    one = torch.ones([1, 1, 1], dtype=torch.int32, device=query.device)
    first = torch.zeros([1, 1, 1, 1], dtype=torch.int32, device=query.device)
    size = flex._LARGE_SPARSE_BLOCK_SIZE
    return block_mask((1, 1), one, first, None, None, one, first, None, None, (size, size), flex.noop_mask)


_BLOCK_MASK_FIELDS = ("seq_lengths", "kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
                      "q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices", "BLOCK_SIZE", "mask_mod")


def block_mask_from_tensors_supported() -> bool:
    """Whether torch.nn.attention.flex_attention.BlockMask takes its fields
    positionally as block_mask() passes them (2.11.0, 2.13.0, 2.14.1: seq_lengths,
    the kv and q block counts and indices, BLOCK_SIZE, mask_mod, then
    keyword-only dQ write-order fields, left None as create_block_mask
    leaves them by default). Asked, not assumed: a torch whose constructor
    differs keeps torch's own mask builders."""
    import inspect

    from torch.nn.attention import flex_attention as flex

    if not all(hasattr(flex, name) for name in ("BlockMask", "noop_mask", "_LARGE_SPARSE_BLOCK_SIZE")):
        return False
    names = tuple(inspect.signature(flex.BlockMask.__init__).parameters)[1:1 + len(_BLOCK_MASK_FIELDS)]
    return names == _BLOCK_MASK_FIELDS


def block_mask(*fields):
    """A BlockMask made from its fields (_BLOCK_MASK_FIELDS, in order), as
    create_block_mask makes one after computing them."""
    from torch.nn.attention.flex_attention import BlockMask

    return BlockMask(*fields)


def flex_attention_hop(query, key, value, score_mod, block_mask, scale, mask_mod=None,
                       score_mod_buffers=(), mask_mod_buffers=()):
    """The attention output of the flex_attention higher-order operator, called
    as flex_attention() calls it under Dynamo (torch._higher_order_ops.
    flex_attention.flex_attention(query, key, value, score_mod,
    block_mask.as_tuple(), scale, kernel_options, score_mod_other_buffers,
    mask_mod_other_buffers) -> (out, logsumexp, max_scores), with
    flex_attention._apply_kernel_options' defaults), for a caller that is being
    traced by AOTAutograd rather than by Dynamo: the buffers that score_mod
    and mask_mod read are passed as the operator's other buffers (score_mod(
    score, b, h, q, kv, *score_mod_buffers), mask_mod(b, h, q, kv,
    *mask_mod_buffers)) instead of being captured, which only Dynamo lifts.
    mask_mod replaces the block mask's own (BlockMask.as_tuple() ends with
    it). Checked on 2.11.0, 2.13.0 and 2.14.1."""
    from torch._higher_order_ops.flex_attention import flex_attention as hop
    from torch.nn.attention.flex_attention import _apply_kernel_options

    block_tuple = block_mask.as_tuple()
    if mask_mod is not None:
        block_tuple = (*block_tuple[:-1], mask_mod)
    kernel_options = _apply_kernel_options(query, key, value, False, None)
    return hop(query, key, value, score_mod, block_tuple, scale, kernel_options, tuple(score_mod_buffers),
               tuple(mask_mod_buffers))[0]


def custom_graph_pass_base():
    """torch._inductor.custom_graph_pass.CustomGraphPass: a pass with uuid(),
    which the FX-graph and AOTAutograd caches take into their keys (2.13 and
    2.14 also run a pre-grad pass with a uuid after the cache lookup; one
    without makes them run it before and skip the cache). Checked on 2.11.0,
    2.13.0 and 2.14.1."""
    from torch._inductor.custom_graph_pass import CustomGraphPass

    return CustomGraphPass


def pre_grad_pass():
    """torch._inductor.config.pre_grad_custom_pass: one callable on 2.11 (a
    list or tuple is accepted too on 2.13 and 2.14), run on the graph Dynamo
    made, before AOTAutograd traces it (fx_passes.pre_grad.pre_grad_passes,
    after Inductor's own pre-grad passes)."""
    from torch._inductor import config

    return config.pre_grad_custom_pass


def set_pre_grad_pass(custom_pass) -> None:
    from torch._inductor import config

    config.pre_grad_custom_pass = custom_pass
