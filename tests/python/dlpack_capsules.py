"""Reading DLPack capsules from tests, as a consumer would (ctypes)."""

from __future__ import annotations

import ctypes

from devbridge import dlpack_ctypes as dl


class DLManagedTensor(ctypes.Structure):
    """DLPack's legacy (unversioned) struct."""


DLManagedTensor._fields_ = [
    ("dl_tensor", dl.DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))),
]

_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.py_object]
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def name(capsule) -> str:
    return _get_name(capsule).decode()


def describe(capsule) -> dict:
    """What a consumer reads from an unused capsule of either kind."""
    capsule_name = name(capsule)
    address = _get_pointer(capsule, capsule_name.encode())
    if capsule_name == "dltensor_versioned":
        managed = dl.DLManagedTensorVersioned.from_address(address)
        version, flags = (managed.version.major, managed.version.minor), managed.flags
    else:
        managed = DLManagedTensor.from_address(address)
        version, flags = None, None
    return {"name": capsule_name, "version": version, "flags": flags,
            "tensor": managed.dl_tensor.describe()}
