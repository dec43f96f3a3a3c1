"""The generic `torch_plugin` host-runtime policy: every method a Triton driver
needs, for any PrivateUse1 plugin, built only on torch.accelerator,
torch.Stream, torch.Event and devbridge's runtime. No vendor module is ever
imported (tests/python/test_triton_policy.py proves it under an import hook).

The device name is the PrivateUse1 backend's name ("simdev", "cudadev", ...)
unless configure(device_name=...) or DEVBRIDGE_TRITON_DEVICE says otherwise.
Methods follow FlagTree's BackendStrategyRegistry names; the workspace, lock,
pre-launch and launch methods return Python objects for devbridge's launcher
(the C++-text strategies of the Ascend backends live with the Ascend
integration).

This module declares its table (METHODS, below) and imports no registry:
devbridge.triton.policy registers it as the `torch_plugin` policy the first
time the registry is asked anything.
"""

from __future__ import annotations

import os
import sys

import torch

from .. import _C
from .. import __version__ as _devbridge_version

CATEGORY = "torch_plugin"
_configured_name: str | None = None
_resolved_name: str | None = None  # cached: the hot path reads it on every launch


def configure(*, device_name: str | None) -> None:
    """Serve `device_name`; None: DEVBRIDGE_TRITON_DEVICE, else the PrivateUse1
    backend's name (both read again at the next call)."""
    global _configured_name, _resolved_name
    _configured_name = device_name
    _resolved_name = None
    # devbridge's driver serves the default policy from C only while the name
    # is the PrivateUse1 backend's (fast_device_and_stream): it binds again.
    from .._triton_api import devbridge_driver_or_none

    driver = devbridge_driver_or_none()
    if driver is not None:
        driver.bind_policy()


def device_name() -> str:
    global _resolved_name
    name = _resolved_name
    if name is None:
        name = _configured_name or os.environ.get("DEVBRIDGE_TRITON_DEVICE") or _C.plugin_name()
        if not name:
            raise RuntimeError("devbridge: the torch_plugin Triton policy serves a PrivateUse1 plugin, and none "
                               "is loaded in this process; import the plugin first (or let torch autoload it)")
        _resolved_name = name
    return name


def _device(index: int | None = None) -> torch.device:
    name = device_name()
    return torch.device(name, _C.current_device(name) if index is None else index)


_current_device = _C.current_device
_current_stream = _C.current_stream


def fast_device_and_stream(keys: list):
    """(device-key getter, stream getter) as C callables for the driver's hot
    path: the first returns keys[current device]. Valid while the served
    device is the PrivateUse1 backend itself (the usual case); None when it is
    configured to be another name."""
    if device_name() != _C.plugin_name():
        return None
    import functools

    return functools.partial(_C.plugin_current_device_key, keys), _C.current_stream


def get_current_device() -> int:
    """The calling thread's current device index of the plugin."""
    return _current_device(_resolved_name or device_name())


def set_current_device(device_id: int) -> None:
    _C.set_current_device(device_name(), int(device_id))


def get_current_stream(device: int | None = None) -> int:
    """The native handle of the calling thread's current stream on `device`."""
    # device None: the binding reads the current device itself.
    return _current_stream(device, _resolved_name or device_name())


def get_active_torch_device() -> torch.device:
    return _device()


def get_device_interface() -> type:
    from . import device_interface

    return device_interface.for_device(device_name())


def get_empty_tensor(size: int) -> torch.Tensor:
    """`size` int32 elements on the current device (the benchmarker's L2 flush buffer)."""
    return torch.empty(int(size), dtype=torch.int32, device=_device())


def get_tensor_params_shape(*args) -> list[list[int]]:
    """The shape of every tensor-like argument (duck typing: data_ptr and shape)."""
    return [list(arg.shape) for arg in args if hasattr(arg, "data_ptr") and hasattr(arg, "shape")]


def version_hash() -> list[str]:
    """Everything a compiled launch depends on besides the kernel itself: torch,
    devbridge, the plugin (its name and its module's version), Triton, and the
    kernel runtime of the plugin's declared hardware."""
    import triton

    from .. import _kernel_runtimes
    from .hardware import declared

    name = device_name()
    hardware = declared(name)
    runtime = "undeclared" if hardware is None else _kernel_runtimes.runtime_name(hardware.kernel_runtime)
    plugin_version = _plugin_version(name)
    return [f"torch {torch.__version__} {torch.version.git_version}", f"devbridge {_devbridge_version}",
            f"plugin {name} {plugin_version}", f"triton {triton.__version__}",
            f"compiler {getattr(hardware, 'compiler', 'undeclared')}", f"kernel runtime {runtime}"]


def _plugin_version(name: str) -> str:
    """The version of the package behind torch.<name> (the plugin's device module)."""
    module = getattr(torch, name, None)
    package = sys.modules.get(module.__name__.split(".")[0]) if module is not None else None
    return str(getattr(package, "__version__", None) or "unknown")


def _check_stream(stream) -> None:
    """Workspace comes from the framework allocator on the current stream; a
    torch.Stream that is not current is recorded on the block instead."""
    if stream is None or isinstance(stream, torch.Stream):
        return
    if int(stream) != get_current_stream():
        raise ValueError(
            f"devbridge: workspace is allocated by the {device_name()} allocator on the current stream "
            f"({get_current_stream():#x}), but stream {int(stream):#x} was asked for; make it current first "
            "(`with torch.Stream(...)`) or pass the torch.Stream itself")


def allocate_memory(size: int, stream=None) -> torch.Tensor:
    """`size` bytes of workspace on the current device, from the plugin's
    allocator. Keep the returned tensor until the launch that uses it is
    enqueued: the allocator's stream order then keeps the block from being
    reused before the kernel ran (the contract of a tensor freed after a launch)."""
    _check_stream(stream)
    block = torch.empty(int(size), dtype=torch.uint8, device=_device())
    if isinstance(stream, torch.Stream) and stream != torch.accelerator.current_stream(block.device.index):
        block.record_stream(stream)
    return block


def allocate_sync_block_lock(size: int, init_value: int = 0, stream=None) -> torch.Tensor:
    """`size` int32 lock words, set to `init_value` in stream order (an
    asynchronous fill queued on the stream, never a host write)."""
    _check_stream(stream)
    lock = torch.empty(int(size), dtype=torch.int32, device=_device())
    if isinstance(stream, torch.Stream) and stream != torch.accelerator.current_stream(lock.device.index):
        lock.record_stream(stream)
        with stream:
            lock.fill_(int(init_value))
    else:
        lock.fill_(int(init_value))
    return lock


def pre_launch(device_id: int) -> None:
    """Bind `device_id` on the launching thread (a no-op when it is current)."""
    if get_current_device() != int(device_id):
        set_current_device(device_id)


def async_launch(launcher, *args):
    """Launch. devbridge's launcher enqueues directly on the given stream, or
    hands the launch to the plugin's submit hook when one is registered
    (devbridge.register_submit_hook), so this is a plain call."""
    return launcher(*args)


# The policy's table: FlagTree's BackendStrategyRegistry method names (the
# runtime half), plus device_name and get_active_torch_device.
METHODS = {
    "device_name": device_name, "get_current_device": get_current_device,
    "set_current_device": set_current_device, "get_current_stream": get_current_stream,
    "get_active_torch_device": get_active_torch_device, "get_device_interface": get_device_interface,
    "get_empty_tensor": get_empty_tensor, "get_tensor_params_shape": get_tensor_params_shape,
    "version_hash": version_hash, "allocate_memory": allocate_memory,
    "allocate_sync_block_lock": allocate_sync_block_lock, "pre_launch": pre_launch, "async_launch": async_launch,
}

__all__ = ["CATEGORY", "METHODS", "configure"]
