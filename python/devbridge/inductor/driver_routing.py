"""Which Triton driver is active while Inductor compiles, loads and times a kernel.

Triton has one active driver per process, and Inductor's set_driver_to_gpu()
(called at the top of every kernel module and before every compile) picks the
first active GPU backend, NVIDIA's on a CUDA host, so a plugin-device kernel
would be loaded through the CUDA driver. devbridge therefore:
  * wraps the CachingAutotuner methods that reach the driver (compile, load,
    autotune; _torch_api.DRIVER_METHODS): for a kernel whose device is the
    plugin device, devbridge's driver is active for the duration of the call
    (devbridge.triton.activate(), which nests), and set_driver_to_gpu() leaves
    it so inside;
  * replaces set_driver_to_gpu() so that outside those calls it does what it
    did (a `cuda` kernel keeps NVIDIA's driver), except where no other GPU
    backend is active at all (a CPU-only torch with a plugin): there
    devbridge's driver is the process's driver, as it is the only one.
The steady-state launch (CachingAutotuner.run's cached launcher) reaches no
driver and is not wrapped. While a plugin kernel's launchers are built, empty
Triton launch hooks read as None, so that the launchers skip the per-launch
metadata Triton computes only for hooks (_torch_api.
launch_hooks_burnt_in_when_empty).

Where the hardware's compiler says its kernels are not timed (its
`times_kernels` hook, devbridge.triton.hardware.COMPILER_HOOKS: timings there
say nothing about any hardware, and timing every config of every kernel many
times over would make each compile take minutes), autotuning chooses the
first config of each kernel (benchmark_all_configs reports it fastest).
"""

from __future__ import annotations

import functools
import threading

from . import _torch_api

_state = threading.local()  # depth: plugin-kernel driver calls in progress on this thread
_device: str | None = None
_times_kernels = True  # the hardware's compiler hook: autotuning times the configs
_original_set_driver_to_gpu = None


def _inside() -> bool:
    return getattr(_state, "depth", 0) > 0


@functools.cache
def other_gpu_backend_active() -> bool:
    """Whether a Triton GPU backend other than devbridge's is active here
    (probed once: it is asked again at every kernel module's import)."""
    import triton.backends

    for name, backend in triton.backends.backends.items():
        if name in ("cpu", "devbridge"):
            continue
        try:
            if backend.driver.is_active():
                return True
        except Exception:  # a backend whose probe fails is not active
            continue
        if name in ("nvidia", "amd"):
            import torch

            # torch >= 2.13 counts these active whenever torch.cuda is (triton_helpers._is_backend_active)
            if torch.cuda.is_available() and (torch.version.hip is None) == (name == "nvidia"):
                return True
    return False


def _ensure_devbridge_active() -> None:
    import devbridge.triton

    if not devbridge.triton.is_active():
        devbridge.triton.activate()


def set_driver_to_gpu() -> None:
    if _inside():
        return  # a plugin-device kernel: devbridge's driver is active for it
    if _torch_api.gpu_driver_setup_skipped():
        return  # a compile worker warming its cache (torch 2.14): upstream's no-op
    if not other_gpu_backend_active():
        _ensure_devbridge_active()  # the plugin device is the only GPU here
        return
    _original_set_driver_to_gpu()


class _PluginKernel:
    """Context: devbridge's driver is active while a plugin kernel is handled."""

    __slots__ = ()

    def __enter__(self):
        import devbridge.triton

        _state.depth = getattr(_state, "depth", 0) + 1
        devbridge.triton.activate()
        return self

    def __exit__(self, *exc):
        import devbridge.triton

        try:
            devbridge.triton.deactivate()
        finally:
            _state.depth -= 1
        return False


_PLUGIN_KERNEL = _PluginKernel()


def _route(method, *, building_launchers: bool = False):
    @functools.wraps(method)
    def routed(self, *args, **kwargs):
        if _torch_api.autotuner_device_type(self) != _device:
            return method(self, *args, **kwargs)
        with _PLUGIN_KERNEL:
            if building_launchers:
                with _torch_api.launch_hooks_burnt_in_when_empty():
                    return method(self, *args, **kwargs)
            return method(self, *args, **kwargs)

    routed._devbridge_original = method
    return routed


def _untimed(method):
    @functools.wraps(method)
    def first_config_fastest(self, *args, **kwargs):
        if _torch_api.autotuner_device_type(self) != _device or _times_kernels:
            return method(self, *args, **kwargs)
        return {launcher: float(rank) for rank, launcher in enumerate(self.launchers)}

    first_config_fastest._devbridge_original = method
    return first_config_fastest


def install(device: str, *, times_kernels: bool) -> None:
    """Route the driver for `device` (idempotent; one plugin device per process).
    `times_kernels`: autotuning times the configs of the device's kernels."""
    global _device, _original_set_driver_to_gpu, _times_kernels
    _device = device
    _times_kernels = times_kernels
    helpers = _torch_api.triton_helpers()
    if _original_set_driver_to_gpu is None:
        _original_set_driver_to_gpu = helpers.set_driver_to_gpu
        helpers.set_driver_to_gpu = set_driver_to_gpu
    autotuner = _torch_api.caching_autotuner()
    missing = [name for name in _torch_api.DRIVER_METHODS[:3] if not hasattr(autotuner, name)]
    if missing:
        raise RuntimeError(f"devbridge.inductor: this torch's CachingAutotuner lacks {missing}, which devbridge "
                           "wraps to keep its Triton driver active for plugin kernels; see _torch_api.py")
    for name in _torch_api.DRIVER_METHODS:
        method = getattr(autotuner, name, None)
        if method is None:
            continue  # a tuning step this torch does not have
        if not hasattr(method, "_devbridge_original"):
            if name == "benchmark_all_configs":
                method = _untimed(method)
            setattr(autotuner, name, _route(method, building_launchers=name == "_make_launchers"))
    if not other_gpu_backend_active():
        _ensure_devbridge_active()
