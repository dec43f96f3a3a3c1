"""Python face of devbridge's device runtime (the work happens in _C)."""

from __future__ import annotations

import torch

from . import _C, _device_names

_RESOLVER_CAPSULE_NAME = "devbridge_stream_resolver"


def _device_type(device_type) -> str:
    return _device_names.device_type(device_type)  # refuses a name torch does not know, naming the plugin


def _device(device) -> tuple[str, int]:
    """(type, index) of `device`; None means the current accelerator device."""
    if device is None:
        accelerator = torch.accelerator.current_accelerator()
        device = accelerator if accelerator is not None else torch.device("cpu")
    elif isinstance(device, str):
        device = _device_names.checked_device(device)
    elif not isinstance(device, torch.device):
        raise TypeError(f"devbridge: expected a device (str or torch.device) or None, got {device!r}")
    index = device.index if device.index is not None else _C.current_device(device.type)
    return device.type, index


def runtime_api():
    """devbridge's runtime table: a PyCapsule named "devbridge_runtime_api"
    holding a DevbridgeRuntimeAPI* (include/devbridge/c_runtime_api.h)."""
    return _C.RUNTIME_API


def register_stream_resolver(resolver, device_type="privateuseone") -> None:
    """Tell devbridge how to turn a stream of `device_type` into its native handle.

    For plugins whose device guard does not override getStreamNativeHandle.
    `resolver` is either a PyCapsule named "devbridge_stream_resolver" holding
    a C `DevbridgeStreamResolver` (fast), or a Python callable
    `(device_index: int, stream_id: int) -> int` (slow: it takes the GIL on
    every query). A registered resolver takes precedence over the guard.
    """
    kind = _device_type(device_type)
    if type(resolver).__name__ == "PyCapsule":
        _C._register_stream_resolver_capsule(resolver, kind)
    else:
        _C._register_stream_resolver_callable(resolver, kind)


def unregister_stream_resolver(device_type="privateuseone") -> None:
    _C._unregister_stream_resolver(_device_type(device_type))


def register_submit_hook(hook, device_type="privateuseone") -> None:
    """Hand devbridge's launches for `device_type` to a plugin's task queue.

    `hook` is a PyCapsule named "devbridge_submit_hook" holding a C
    `DevbridgeSubmitFn` (include/devbridge/c_runtime_api.h), or None to launch
    directly again. From then on every launch on that device type is handed to
    the hook as a closure, which the hook runs exactly once, on any thread.
    """
    if hook is not None and type(hook).__name__ != "PyCapsule":
        raise TypeError("devbridge: a submit hook must be a PyCapsule named 'devbridge_submit_hook' "
                        f"holding a DevbridgeSubmitFn, or None; got {type(hook).__name__}")
    _C._register_submit_hook(hook, _device_type(device_type))


def register_current_stream_query(query, device_type="privateuseone") -> None:
    """Let devbridge ask the plugin directly for its current native stream.

    `query` is a PyCapsule named "devbridge_current_stream" holding a C
    `DevbridgeCurrentStreamFn` (include/devbridge/c_runtime_api.h), or None to
    go back to the device guard's getStream + getStreamNativeHandle. Every
    current-stream query for `device_type` (the DLPack table's
    current_work_stream, the runtime table, Triton launches) then costs one
    call into the plugin. A registered stream resolver takes precedence.
    """
    _C._register_current_stream_query(_function_capsule(query, "current-stream query",
                                                        "devbridge_current_stream"),
                                      _device_type(device_type))


def register_external_stream_hook(hook, device_type="privateuseone") -> None:
    """Tell devbridge which c10 stream a native stream handed over by a DLPack
    consumer is (`__dlpack__(stream=...)`, the runtime table's
    wait_current_stream).

    `hook` is a PyCapsule named "devbridge_external_stream" holding a C
    `DevbridgeExternalStreamFn` (include/devbridge/c_runtime_api.h), or None.
    Without one, devbridge orders only the device's current and default
    streams and refuses other streams with an error naming this fix.
    """
    _C._register_external_stream_hook(_function_capsule(hook, "external-stream hook",
                                                        "devbridge_external_stream"),
                                      _device_type(device_type))


def _function_capsule(capsule, what: str, name: str):
    if capsule is not None and type(capsule).__name__ != "PyCapsule":
        raise TypeError(f"devbridge: a {what} must be a PyCapsule named '{name}' holding the C "
                        f"function (include/devbridge/c_runtime_api.h), or None; got {type(capsule).__name__}")
    return capsule


def current_stream(device=None) -> int:
    """Native handle of the current stream of `device` (0 for CPU).

    `device`: str, torch.device, or None for the current accelerator device.
    Raises RuntimeError naming the fix when the plugin exposes no native handle.
    """
    kind, index = _device(device)
    return _C.current_stream(index, kind)


def device_count(device_type="privateuseone") -> int:
    """Number of devices of `device_type` (0 when no backend is loaded for it)."""
    return _C.device_count(_device_type(device_type))


def plugin_name() -> str | None:
    """Name of the PrivateUse1 backend in this process ("privateuseone" when
    registered but not renamed), or None when no PrivateUse1 backend is loaded."""
    return _C.plugin_name()
