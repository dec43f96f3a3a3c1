"""The Python DLPack protocol for tensors of the PrivateUse1 plugin.

`Tensor.__dlpack__` and `__dlpack_device__` as the DLPack Python
specification (array API standard, `array.__dlpack__`) asks of a device with
streams, for plugin tensors; every other tensor goes to torch's own methods,
unchanged (the torch names touched: _torch_dlpack_api.py).

  __dlpack_device__()   (kDLExtDev, index); 21 (kDLAscend) when
                        install(export_ascend_device_type=True)
  __dlpack__(stream=)   -1: no ordering (torch's default). None: the device's
                        default stream (DLPack: "the legacy default stream").
                        An int: a native stream of the tensor's device. For
                        None and ints, that stream waits for the work queued
                        so far on the current stream: a device event, no host
                        synchronisation (devbridge._C._order_consumer_stream;
                        other streams than the current and default one need
                        the plugin's external-stream hook)
  max_version           None or a major < 1: the legacy "dltensor" capsule;
                        else "dltensor_versioned" (DLPack 1.3)
  dl_device             None, the tensor's own device, another device of the
                        plugin or (kDLCPU, 0); anything else is a BufferError
  copy                  True: always a copy; False: never (a move to another
                        device is then a ValueError); None: copy only to move.
                        Copies run on the consumer's stream when it gave one,
                        and are flagged DLPACK_FLAG_BITMASK_IS_COPIED.
"""

from __future__ import annotations

import contextlib
import functools
import inspect

import torch

from . import _C
from . import _torch_dlpack_api as api

KDL_CPU = 1
KDL_EXT_DEV = 12
KDL_ASCEND = 21
_ASCEND_ON_IMPORT = ("accept_ascend_device_type", "export_ascend_device_type")


# ---------------------------------------------------------------- installing


def install(*, ascend: bool) -> None:
    """Put the wrappers on torch.Tensor (idempotent). `ascend`: also wrap
    torch.from_dlpack, whose importer does not know device type 21."""
    api.check_version()
    if not is_installed():
        api.set_tensor_methods(_wrapping(api.original_dlpack(), __dlpack__),
                               _wrapping(api.original_dlpack_device(), __dlpack_device__))
    wrapped = hasattr(torch.utils.dlpack.from_dlpack, "__devbridge_wraps__")
    if ascend and not wrapped:
        api.set_from_dlpack(_wrapping(api.original_from_dlpack(), from_dlpack))
    elif wrapped and not ascend:
        api.set_from_dlpack(api.original_from_dlpack())


def uninstall() -> None:
    """Give torch back its own methods (idempotent)."""
    if is_installed():
        api.set_tensor_methods(api.original_dlpack(), api.original_dlpack_device())
    if hasattr(torch.utils.dlpack.from_dlpack, "__devbridge_wraps__"):
        api.set_from_dlpack(api.original_from_dlpack())


def is_installed() -> bool:
    return hasattr(torch.Tensor.__dict__["__dlpack__"], "__devbridge_wraps__")


def _wrapping(original, wrapper):
    """`wrapper` with `original`'s name, docstring and signature, remembering it."""
    wrapped = functools.wraps(original)(wrapper)
    wrapped.__devbridge_wraps__ = original
    return wrapped


# ---------------------------------------------------------------- the methods


# Bound once: the wrappers sit on every tensor's __dlpack__ path, so a CPU or
# CUDA tensor pays two C property reads on top of torch's own method.
_has_torch_function_unary = api.has_torch_function_unary
_torch_dlpack = api.original_dlpack()
_torch_dlpack_device = api.original_dlpack_device()
# Plugin tensors get torch's own default (-1 on torch 2.13: no ordering), as
# CUDA tensors do on the same torch.
_DEFAULT_STREAM = inspect.signature(_torch_dlpack).parameters["stream"].default


def _to_torch(tensor) -> bool:
    """Whether torch's own method serves `tensor`: every tensor that is not
    on the plugin device, and every tensor with __torch_function__ (torch's
    method dispatches it first, and the subclass's call comes back here)."""
    return (_has_torch_function_unary(tensor) or tensor.is_cpu or tensor.is_cuda
            or tensor.device.type != api.plugin_device_type())


def __dlpack_device__(self):
    if _to_torch(self):
        return _torch_dlpack_device(self)
    device_type, index = _C._dl_device(self)
    if device_type == KDL_EXT_DEV:
        return (api.dl_device_type_enum().kDLExtDev, index)
    return (device_type, index)  # 21: torch's enum has no kDLAscend


def __dlpack__(self, *args, **kwargs):
    # Arguments pass through untouched: torch's own defaults and errors stay.
    if _to_torch(self):
        return _torch_dlpack(self, *args, **kwargs)
    return _export(self, *args, **kwargs)


def from_dlpack(ext_tensor, *, device=None, copy=None):
    """torch.from_dlpack, which also imports device type 21 (kDLAscend)."""
    if not _is_ascend(ext_tensor):
        return api.original_from_dlpack()(ext_tensor, device=device, copy=copy)
    if not hasattr(ext_tensor, "__dlpack__"):  # a capsule
        if device is not None or copy is not None:
            raise ValueError("devbridge: from_dlpack(capsule) takes no device or copy: the capsule's "
                             "memory is what it is; pass the producer's tensor to ask for those")
        return _C._from_dlpack_capsule(ext_tensor)
    kwargs = {"max_version": (1, 3)}
    if copy is not None:
        kwargs["copy"] = copy
    tensor = _C._from_dlpack_capsule(ext_tensor.__dlpack__(**kwargs))
    if device is not None and torch.device(device) != tensor.device:
        if copy is False:
            raise ValueError(f"devbridge: cannot move a DLPack tensor from {tensor.device} to {device} "
                             "without copying; pass copy=None or copy=True")
        tensor = tensor.to(device)
    return tensor


def _is_ascend(ext_tensor) -> bool:
    try:
        if type(ext_tensor).__name__ == "PyCapsule":
            return _C._dlpack_capsule_device(ext_tensor)[0] == KDL_ASCEND
        if hasattr(ext_tensor, "__dlpack_device__"):
            return int(ext_tensor.__dlpack_device__()[0]) == KDL_ASCEND
    except Exception:  # noqa: BLE001 - torch's own from_dlpack reports the problem
        return False
    return False


# ---------------------------------------------------------------- export


_TAKES_READ_ONLY = api.dlpack_takes_read_only()


def _export(tensor, *, stream=_DEFAULT_STREAM, max_version=None, dl_device=None, copy=None, **more):
    read_only = _read_only(more)
    if tensor.requires_grad:  # as torch's own __dlpack__ (the C table allows it)
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    _check_stream(tensor, stream)
    versioned = _versioned(max_version)
    if read_only and not versioned:  # torch's own message (2.14)
        raise BufferError("read_only export requires the versioned DLPack protocol; "
                          "pass max_version=(1, 0) or higher")
    if copy is not None and type(copy) is not bool:
        raise TypeError(f"devbridge: __dlpack__(copy=...) takes None, True or False, got {copy!r}")
    target = _target_device(tensor, dl_device)
    moving = target != tensor.device
    if moving and copy is False:
        raise ValueError(f"devbridge: cannot export a {tensor.device} tensor to {target} without copying; "
                         "pass copy=None or copy=True")
    # The ordering first: a copy then runs on the consumer's stream after
    # the producer's work.
    consumer = None if stream == -1 else _C._order_consumer_stream(
        tensor.device.type, tensor.device.index, stream)
    if not moving and not copy:
        return _C._dlpack_capsule(tensor, versioned, False, read_only)
    if consumer is not None:
        stream_id, device_index, device_type = consumer
        consumer = torch.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)
    with consumer if consumer is not None else contextlib.nullcontext():
        exported = tensor.to(target, copy=True)
    if consumer is not None and consumer != torch.accelerator.current_stream(tensor.device):
        # The copy read `tensor` on the consumer's stream: the caching
        # allocator must not hand its memory to another stream before that.
        tensor.record_stream(consumer)
    return _C._dlpack_capsule(exported, versioned, True, read_only)


def _read_only(more: dict) -> bool:
    """read_only= where torch's own __dlpack__ takes it (torch 2.14); any
    other keyword is the TypeError Python gives for an unknown argument."""
    read_only = more.pop("read_only", False) if _TAKES_READ_ONLY else False
    if more:
        raise TypeError(f"__dlpack__() got an unexpected keyword argument '{next(iter(more))}'")
    return bool(read_only)


def _check_stream(tensor, stream) -> None:
    if stream is None:
        return
    if type(stream) is not int:
        raise TypeError(f"devbridge: __dlpack__(stream=...) takes None, -1 or a native stream of "
                        f"{tensor.device} as an int, got {type(stream).__name__}")
    if stream < -1:
        raise ValueError(f"devbridge: __dlpack__(stream={stream}): a stream is None, -1 or a native "
                         f"stream handle of {tensor.device} (an int >= 0)")


def _versioned(max_version) -> bool:
    if max_version is None:
        return False
    if (not isinstance(max_version, (tuple, list)) or len(max_version) != 2
            or not all(isinstance(part, int) for part in max_version)):
        raise TypeError(f"devbridge: __dlpack__(max_version=...) takes None or a (major, minor) tuple "
                        f"of ints, got {max_version!r}")
    # A consumer of major 1 reads our 1.3 (minor versions only add enum
    # values); one older than 1.0 gets the legacy struct it knows.
    return max_version[0] >= 1


def _target_device(tensor, dl_device) -> torch.device:
    if dl_device is None:
        return tensor.device
    if (not isinstance(dl_device, (tuple, list)) or len(dl_device) != 2
            or not all(isinstance(part, int) for part in dl_device)):
        raise TypeError(f"devbridge: __dlpack__(dl_device=...) takes None or a (device_type, device_id) "
                        f"tuple like __dlpack_device__()'s, got {dl_device!r}")
    device_type, device_id = int(dl_device[0]), int(dl_device[1])
    options = _C._get_options()
    plugin_types = (KDL_EXT_DEV, KDL_ASCEND) if any(options[o] for o in _ASCEND_ON_IMPORT) else (KDL_EXT_DEV,)
    if device_type == KDL_CPU:
        if device_id != 0:
            raise ValueError(f"devbridge: dl_device=(kDLCPU, {device_id}): the CPU is device 0")
        return torch.device("cpu")
    if device_type in plugin_types:
        count = _C.device_count(tensor.device.type)
        if not 0 <= device_id < count:
            raise ValueError(f"devbridge: dl_device=({device_type}, {device_id}): {tensor.device.type} has "
                             f"{count} device(s)")
        return torch.device(tensor.device.type, device_id)
    names = "kDLCPU (1) or kDLExtDev (12)" + (" / kDLAscend (21)" if len(plugin_types) == 2 else "")
    raise BufferError(f"devbridge: a {tensor.device} tensor can be exported to {names}, not to DLPack "
                      f"device type {device_type}")

