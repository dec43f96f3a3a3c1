"""torch.compile on plugin devices: Inductor generates Triton for the plugin's
PrivateUse1 device, compiles it with the declared hardware's Triton compiler
(devbridge's Triton backend) and launches it on the plugin's current stream.

  register(device=None)   the one call (idempotent); devbridge.install()
                          arranges it for Dynamo's first compile (arm()), so
                          a plugin that calls install() from its autoload
                          hook needs nothing more; Inductor's compile workers
                          register_runtime() from the first lines of each
                          kernel module (worker.py)
  register_runtime(device=None)
                          only what loading and launching compiled kernels
                          needs (compile workers), without Inductor's compiler
  registered()            the device registered in this process, or None
  patched_torch_apis()    what register() changed in torch, one line each
  declare_convolution_format(device, rule), cudnn_convolution_format
                          what the plugin's convolutions return, so that
                          compiled graphs expect it (convolution.py)
  sdpa_flex_attention(when)
                          scaled_dot_product_attention lowered to Inductor's
                          flex-attention Triton templates where the plugin
                          has no fused kernel ("fallback"), for every call
                          ("always") or never ("off", the default)
                          (attention.py)
  distributed.py          Inductor's estimates for collective-aware
                          scheduling (overlap scheduling, compute/comm
                          reordering) on the plugin device, armed by register()

docs/torch-compile.md lists every torch attribute it touches and the torch
versions checked; _torch_api.py holds each of those touches.
"""

from __future__ import annotations

import threading
import warnings

from .after_import import call_after_import
from .attention import sdpa_flex_attention  # noqa: F401
from .convolution import cudnn_convolution_format, declare_convolution_format  # noqa: F401
from .graph_capture import graph_capture_counts  # noqa: F401

_lock = threading.RLock()
_registered: str | None = None  # register() done for this device
_runtime_registered: str | None = None  # register_runtime() (or register()) done
_patched: list[str] = []


def registered() -> str | None:
    return _registered


def patched_torch_apis() -> list[str]:
    return list(_patched)


def _plugin_entry_point(device: str) -> str | None:
    """How a compile worker loads the plugin: its `torch.backends` entry point
    ("module:function"), which the package of torch.<device> (the plugin's
    device module) names; for a plugin without one, that package itself
    ("module": importing it registers the plugin, docs/plugin-authors.md §2).
    Without either, workers of a process that imported the plugin itself
    would have no plugin (tests/python/test_third_party_plugin.py)."""
    import importlib.metadata
    import importlib.util

    import torch

    device_module = getattr(torch, device, None)
    package = (getattr(device_module, "__name__", "") or "").split(".")[0]
    for entry in importlib.metadata.entry_points(group="torch.backends"):
        if entry.module.split(".")[0] == package:
            return entry.value
    if package and package != "torch" and importlib.util.find_spec(package) is not None:
        return package
    return None


def _template_peer(hardware) -> str | None:
    """The device type whose GEMM template configs Inductor should use for
    `hardware`: that of the Triton backend its compiler targets ("cuda";
    Inductor keeps ROCm's under "cuda" too), or None for a compiler of the
    plugin's own, which brings its own or none."""
    import torch

    backend = hardware.compiler_class()[2]
    rocm = torch.version.hip is not None
    return "cuda" if (backend, rocm) in (("cuda", False), ("hip", True)) else None


def _declared_capability(interface):
    """The compute capability of the current device as its declared hardware
    reports it (the kernel runtime's arch, as the device interface answers)."""

    def capability() -> tuple[int, int]:
        properties = interface.get_device_properties()
        return properties.major, properties.minor

    return capability


def _checked_name(device: str | None, caller: str) -> str:
    from .. import _C

    plugin = _C.plugin_name()
    if not plugin:
        raise RuntimeError(f"devbridge.inductor.{caller}(): no PrivateUse1 plugin is loaded in this process; "
                           "import the plugin (or let torch autoload it) first")
    name = device or plugin
    if name != plugin:
        raise ValueError(f"devbridge.inductor.{caller}({name!r}): torch.compile is served for the PrivateUse1 "
                         f"device, which is '{plugin}' in this process")
    return name


def _require_runtime(name: str, caller: str):
    """Version checks and the declared hardware; returns the hardware."""
    from . import _torch_api

    _torch_api.check_version()
    try:
        import triton  # noqa: F401
    except ImportError as error:
        raise RuntimeError(f"devbridge.inductor.{caller}(): Triton is not importable ({error}); torch.compile "
                           f"on '{name}' generates Triton kernels: install the Triton that pairs with torch "
                           f"(pip install triton=={_paired_triton()})") from error
    from ..triton.hardware import require

    return require(name)  # the plugin's declare_hardware(): which compiler and kernel runtime


def _install_runtime(name: str, hardware):
    """What loading, timing and launching compiled kernels needs (Inductor's
    runtime package): the device interface and the driver routing. Returns
    the interface and what was patched."""
    from . import _torch_api, device_interface, driver_routing, static_launch

    patched = []
    interface = device_interface.make_device_interface(name)
    _torch_api.register_device_interface(name, interface)
    patched.append(f"torch._dynamo.device_interface: register_interface_for_device({name!r}, {interface.__name__})")
    times_kernels = bool(hardware.hook("times_kernels"))
    driver_routing.install(name, times_kernels=times_kernels)
    patched.append("torch._inductor.runtime.triton_helpers.set_driver_to_gpu: replaced")
    patched.append("torch._inductor.runtime.triton_heuristics.CachingAutotuner."
                   f"{{{', '.join(_torch_api.DRIVER_METHODS)}}}: wrapped (devbridge's driver for {name!r} kernels; "
                   "empty Triton launch hooks left out of their launchers)")
    static_launch.install(name)
    patched.append("torch._inductor.runtime.triton_heuristics.StaticTritonCompileResult.{can_statically_launch, "
                   f"reload_cubin_path}}: wrapped ({name!r} kernels launched statically by devbridge, restored "
                   "from their binaries on a warm start)")
    if not times_kernels:
        patched.append(f"autotuning of {name!r} kernels: the first config, untimed (its compiler's times_kernels)")
    return interface, patched


def register(device: str | None = None) -> str:
    """Register the plugin device with Dynamo and Inductor; returns its name.

    `device` defaults to the PrivateUse1 backend's name and must be it.
    Raises RuntimeError with the fix when torch, Triton or the plugin cannot
    serve torch.compile (an unchecked torch version, no Triton, no declared
    Triton hardware for the device)."""
    global _registered, _runtime_registered
    name = _checked_name(device, "register")
    with _lock:
        if _registered == name:
            return name
        hardware = _require_runtime(name, "register")
        from . import _torch_api, codegen

        interface, patched = _install_runtime(name, hardware)
        scheduling, wrapper = codegen.install(name, _plugin_entry_point(name))
        patched.append("torch._inductor.codegen.triton.TritonKernel.gen_common_triton_imports: wrapped (the "
                       f"worker prelude in {name!r} kernel modules)")
        if _torch_api.registered_scheduling(name) in (None, _Refused):
            from .cache_key import device_config

            _torch_api.register_codegen(name, scheduling, wrapper, device_config(hardware.compiler))
            patched.append(f"torch._inductor.codegen.common: register_backend_for_device({name!r}, "
                           f"{scheduling.__name__}, {wrapper.__name__}, devbridge's cache key entry)")
        overrides = codegen.make_op_overrides(name)
        _torch_api.register_op_overrides(name, overrides)
        patched.append(f"torch._inductor.codegen.common: register_device_op_overrides({name!r}, "
                       f"{type(overrides).__name__})")

        _torch_api.add_gpu_type(name, interface.is_available)
        patched.append(f"torch._inductor.utils.GPU_TYPES: + {name!r}; get_gpu_type replaced where bound")
        _torch_api.accept_triton(name)
        patched.append("torch.utils._triton.has_triton: replaced where bound (true with Triton importable)")
        _torch_api.online_softmax_for(name)
        patched.append("torch._inductor.fx_passes.post_grad.prepare_softmax_extra_check: replaced (softmax in "
                       f"its online form on {name!r} too, as on cuda)")
        if name in _torch_api.convolution_formats():
            patched.append("torch._C._conv_determine_backend_memory_format: wrapped (the declared format of "
                           f"{name!r} convolutions)")
        _torch_api.accept_flex_attention(name)
        patched.append("torch.nn.attention.flex_attention._validate_device: replaced (flex_attention accepts "
                       f"{name!r} tensors)")
        _torch_api.flex_decoding_split_for(
            name, lambda index: interface.get_device_properties(index).multi_processor_count)
        patched.append("torch._inductor.kernel.flex.flex_decoding.{get_split_k, create_flex_decoding_kernel}: "
                       f"replaced, wrapped (flex decoding on {name!r} splits over its declared multiprocessors)")
        _torch_api.quiet_small_gpu_gate(name)
        patched.append("torch._inductor.utils.is_big_gpu: replaced (its SM-count warning for "
                       f"{name!r} only where max-autotune was asked for)")
        if _torch_api.fuse_reductions_as_on_cuda(name) != "absent":
            patched.append("torch._inductor.scheduler._is_gpu_triton_backend: replaced (mix-order and nested "
                           f"reductions fused on {name!r} too, as on cuda)")
        peer = _template_peer(hardware)
        if peer is not None:
            _torch_api.share_template_heuristics(name, peer)
            patched.append("torch._inductor.template_heuristics.registry.get_template_heuristic: replaced where "
                           f"bound ({name!r} GEMM templates take {peer!r}'s configs under max-autotune)")
            if _torch_api.share_config_heuristics(name, peer, _declared_capability(interface)) != "absent":
                patched.append("torch._inductor.choices.InductorChoices.get_config_heuristics: replaced ("
                               f"{name!r} flex-attention and convolution templates take {peer!r}'s configs for the "
                               "declared compute capability), torch.cuda.get_device_capability: wrapped (answers "
                               "it inside those heuristics only)")
        how = _torch_api.register_benchmarker(name)
        patched.append(f"torch._inductor.runtime.benchmarking: {how}")
        from . import distributed

        patched += distributed.install(name, interface.is_available)
        from . import graph_capture

        patched += graph_capture.install(name)
        _patched[:] = patched
        _registered = _runtime_registered = name
        return name


def register_runtime(device: str | None = None) -> str:
    """The part of register() that running compiled kernels needs, for
    processes that load kernel modules but generate no code: Inductor's
    compile workers (worker.py) and a saved output module run by itself.
    Importing Inductor's compiler (codegen, lowerings, pattern passes) costs a
    fresh worker about a second, which every worker would pay at its first
    kernel of the device; this imports none of it."""
    global _runtime_registered
    name = _checked_name(device, "register_runtime")
    with _lock:
        if name in (_registered, _runtime_registered):
            return name
        hardware = _require_runtime(name, "register_runtime")
        _patched[:] = _install_runtime(name, hardware)[1]
        _runtime_registered = name
        return name


def _paired_triton() -> str:
    from .._versions import TRITON_PAIRED_WITH_TORCH, torch_minor

    return TRITON_PAIRED_WITH_TORCH.get(torch_minor(), "<the version torch pins>")


# ---------------------------------------------------------------- registration when Dynamo loads

_armed = False


def _undeclared(name: str) -> RuntimeError:
    from ..triton.hardware import how_to_declare

    return RuntimeError(f"devbridge: torch.compile on '{name}' generates Triton kernels for it, and no Triton "
                        f"hardware is declared for '{name}', so no Triton compiler serves it; "
                        f"{how_to_declare(name)}")


class _RefusedType(type):
    def __getattr__(cls, attribute):  # what Inductor asks of the classes (supports_caching, ...)
        if attribute.startswith("__"):
            raise AttributeError(attribute)  # Python's own probes (copy, inspect) stay quiet
        raise _undeclared(cls.device)


class _Refused(metaclass=_RefusedType):
    """Inductor's scheduling, wrapper codegen and device op overrides for a
    plugin device that declared no Triton hardware: the first use raises
    devbridge's error naming the missing declaration, where Inductor would
    raise a bare KeyError (its op-overrides table) deep in code generation.
    Only compiles for that device reach it."""

    device = ""

    def __init__(self, *args, **kwargs):
        raise _undeclared(self.device)

    def __getattr__(self, attribute):  # the op overrides: every method
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        raise _undeclared(self.device)


def _refuse(name: str) -> None:
    """Give Inductor _Refused for `name`, unless something already serves it
    (a plugin with Inductor codegen of its own, registered or offered by its
    device module as torch.<name>.Scheduling); register() replaces it."""
    from . import _torch_api

    if _torch_api.registered_scheduling(name) is not None:
        return
    import torch

    if getattr(getattr(torch, name, None), "Scheduling", None) is not None:
        return
    _Refused.device = name
    _torch_api.register_codegen(name, _Refused, _Refused)
    _torch_api.register_op_overrides(name, object.__new__(_Refused))


def _register_quietly() -> None:
    """register() from the import hook: a failure is a warning (naming the
    fix) rather than a broken `import torch._dynamo` for every compile."""
    from .. import _C
    from ..triton.hardware import declared

    plugin = _C.plugin_name()
    if not plugin:
        return  # no plugin: nothing to register
    if declared(plugin) is None:
        _refuse(plugin)  # compiling for it raises devbridge's error naming declare_hardware
        return
    try:
        import triton  # noqa: F401
    except ImportError:
        return  # Inductor reports the missing Triton itself
    try:
        register()
    except Exception as error:  # noqa: BLE001 - reported, and register() raises it again when called
        warnings.warn(f"devbridge: torch.compile is not available on the plugin device: {error}", RuntimeWarning,
                      stacklevel=2)


def _register_when_compiling() -> None:
    if _registered is None:
        _register_quietly()


def arm() -> None:
    """register() at Dynamo's first compile. Called by devbridge.install();
    cheap, and imports nothing of torch's compiler."""
    global _armed
    with _lock:
        if _armed:
            return
        _armed = True
    call_after_import("torch._dynamo", _register_at_compile_start)


def _register_at_compile_start(dynamo) -> None:
    # Not register() itself: Dynamo may be imported halfway through an
    # Inductor module that register() imports again.
    from . import _torch_api

    _torch_api.on_compile_start(_register_when_compiling)


__all__ = ["arm", "patched_torch_apis", "register", "register_runtime", "registered", "sdpa_flex_attention"]
