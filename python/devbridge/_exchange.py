"""Installing devbridge's DLPack exchange table on torch.Tensor.

DLPack consumers (TVM-FFI, ...) read `type(t).__dlpack_c_exchange_api__`
and may cache the table per type and thread, so install() should run before
the first consumer sees a tensor: from the plugin's torch.backends autoload
hook, or right after importing the plugin.
"""

from __future__ import annotations

import torch

from . import _C, _protocol

_ATTRIBUTE = "__dlpack_c_exchange_api__"
_CAPSULE_NAME = "dlpack_exchange_api"
_ABSENT = object()

# What torch.Tensor carried before our install (PyTorch's table, or another
# producer's); install() delegates to it and uninstall() puts it back.
_previous = _ABSENT


def _table_address(capsule) -> int | None:
    try:
        return _C._capsule_address(capsule, _CAPSULE_NAME)
    except (TypeError, ValueError):
        return None


def exchange_api():
    """devbridge's table: a PyCapsule named "dlpack_exchange_api"."""
    return _C.EXCHANGE_API


def torch_exchange_api():
    """PyTorch's own table (what torch.Tensor carries without devbridge)."""
    own = getattr(torch._C, "_dlpack_exchange_api", None)
    if own is not None:
        return own()
    return None if _previous is _ABSENT else _previous


def is_installed() -> bool:
    """True when torch.Tensor's exchange table is devbridge's."""
    current = getattr(torch.Tensor, _ATTRIBUTE, None)
    return current is not None and _table_address(current) == _table_address(_C.EXCHANGE_API)


def install(*, allow_null_stream: bool = False, accept_ascend_device_type: bool = False,
            export_ascend_device_type: bool = False, python_protocol: bool = True) -> None:
    """Put devbridge's DLPack exchange table on torch.Tensor (idempotent), and
    make the Python protocol (Tensor.__dlpack__, __dlpack_device__,
    torch.from_dlpack) work on plugin tensors (devbridge/_protocol.py).

    Keyword arguments (each call sets all four):
      allow_null_stream: when the plugin has no native stream handle and no
        resolver, report a NULL stream instead of failing (kernels then run on
        the default stream). The environment variable
        DEVBRIDGE_ALLOW_NULL_STREAM=1 has the same effect.
      accept_ascend_device_type: DLPack import and stream queries also accept
        device type 21 (kDLAscend, DLPack main) as the PrivateUse1 device.
      export_ascend_device_type: export PrivateUse1 tensors as device type 21
        instead of kDLExtDev (12); only for consumers that understand 21.
      python_protocol: replace torch.Tensor.__dlpack__ and __dlpack_device__
        with versions that serve plugin tensors (every other tensor goes to
        torch's own); False puts torch's own back. On a torch devbridge was
        not checked on, True is refused with this fix.
    """
    global _previous
    if python_protocol:
        _protocol.install(ascend=accept_ascend_device_type or export_ascend_device_type)
    else:
        _protocol.uninstall()
    _C._set_options(allow_null_stream, accept_ascend_device_type, export_ascend_device_type)
    if is_installed():
        return
    current = torch.Tensor.__dict__.get(_ATTRIBUTE, _ABSENT)
    # Other device types (CUDA, ROCm, XPU) keep PyTorch's answers: our table
    # delegates current_work_stream to the one it replaces.
    delegate = current if current is not _ABSENT and _table_address(current) is not None else None
    _C._set_delegate_exchange_api(delegate)
    _previous = current
    setattr(torch.Tensor, _ATTRIBUTE, _C.EXCHANGE_API)


def uninstall() -> None:
    """Put back the table torch.Tensor had before install(), and torch's own
    Python protocol methods (idempotent).

    The delegate and the options stay as they are: a consumer that cached our
    table's pointer keeps calling it, and must keep getting right answers.
    """
    global _previous
    _protocol.uninstall()
    if not is_installed():
        return
    if _previous is _ABSENT:
        delattr(torch.Tensor, _ATTRIBUTE)
    else:
        setattr(torch.Tensor, _ATTRIBUTE, _previous)
    _previous = _ABSENT
