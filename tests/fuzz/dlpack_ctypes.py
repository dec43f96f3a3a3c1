"""ctypes mirror of the DLPack v1.3 structs a fuzzer builds by hand, and access
to an exchange table's `managed_tensor_to_py_object_no_sync`.

Layouts follow dlpack.h v1.3 (PyTorch ships it as ATen/dlpack.h); the field
order of DLPackExchangeAPI is the ABI: header, allocator, from_py, to_py,
dltensor_from_py, current_work_stream.
"""

from __future__ import annotations

import ctypes

c_int32, c_int64, c_uint8, c_uint16, c_uint32, c_uint64 = (
    ctypes.c_int32,
    ctypes.c_int64,
    ctypes.c_uint8,
    ctypes.c_uint16,
    ctypes.c_uint32,
    ctypes.c_uint64,
)

KDL_CPU = 1
KDL_CUDA = 2
KDL_EXT_DEV = 12
KDL_ASCEND = 21  # DLPack main after v1.3

FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1
FLAG_IS_SUBBYTE_TYPE_PADDED = 1 << 2


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(c_int64)),
        ("strides", ctypes.POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


# The deleter is called with the GIL or without it, from the importing thread
# or whichever thread drops the last reference: CFUNCTYPE takes the GIL itself.
DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))

DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", DELETER),
    ("flags", c_uint64),
    ("dl_tensor", DLTensor),
]


class DLPackExchangeAPI(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),  # header.version
        ("prev_api", ctypes.c_void_p),  # header.prev_api
        ("managed_tensor_allocator", ctypes.c_void_p),
        ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
        ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
        ("dltensor_from_py_object_no_sync", ctypes.c_void_p),
        ("current_work_stream", ctypes.c_void_p),
    ]


# PYFUNCTYPE: the call keeps the GIL (the table functions need it) and ctypes
# raises the Python exception the function set when it fails.
TO_PY_OBJECT = ctypes.PYFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(DLManagedTensorVersioned), ctypes.POINTER(ctypes.c_void_p)
)


def table_from_capsule(capsule: object) -> DLPackExchangeAPI:
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return DLPackExchangeAPI.from_address(get_pointer(capsule, b"dlpack_exchange_api"))


def importer_of(table: DLPackExchangeAPI):
    """The table's managed_tensor_to_py_object_no_sync as a Python callable."""
    if not table.managed_tensor_to_py_object_no_sync:
        raise ValueError("the table's managed_tensor_to_py_object_no_sync is NULL")
    return TO_PY_OBJECT(table.managed_tensor_to_py_object_no_sync)


def take_new_reference(address: int) -> object:
    """Turn a `PyObject*` holding a new reference into a Python object that owns it."""
    obj = ctypes.cast(address, ctypes.py_object).value  # +1 of our own
    ctypes.pythonapi.Py_DecRef(ctypes.py_object(obj))  # drop the importer's +1: `obj` owns it now
    return obj
