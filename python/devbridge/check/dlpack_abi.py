"""ctypes mirror of the DLPack 1.3 exchange table (ATen/dlpack.h).

This is how a C consumer sees the table, so checks and tests that go through
it exercise exactly what TVM-FFI exercises: function pointers read from the
PyCapsule, called with raw pointers.
"""

from __future__ import annotations

import ctypes

KDL_CPU = 1
KDL_CUDA = 2
KDL_EXT_DEV = 12
KDL_ASCEND = 21  # DLPack main (after v1.3): dedicated Ascend device type

CAPSULE_NAME = b"dlpack_exchange_api"


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", DELETER),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor),
]

MANAGED_PTR = ctypes.POINTER(DLManagedTensorVersioned)
SET_ERROR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)

# Functions that take or return Python objects must hold the GIL: PYFUNCTYPE.
ALLOCATOR = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(DLTensor), ctypes.POINTER(MANAGED_PTR),
                             ctypes.c_void_p, SET_ERROR)
FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(MANAGED_PTR))
TO_PY = ctypes.PYFUNCTYPE(ctypes.c_int, MANAGED_PTR, ctypes.POINTER(ctypes.c_void_p))
DLTENSOR_FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLTensor))
# current_work_stream sets a Python exception on failure: call it with the GIL.
CURRENT_STREAM = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32,
                                   ctypes.POINTER(ctypes.c_void_p))


class DLPackExchangeAPIHeader(ctypes.Structure):
    pass


DLPackExchangeAPIHeader._fields_ = [
    ("version", DLPackVersion),
    ("prev_api", ctypes.POINTER(DLPackExchangeAPIHeader)),
]


class DLPackExchangeAPI(ctypes.Structure):
    _fields_ = [
        ("header", DLPackExchangeAPIHeader),
        ("managed_tensor_allocator", ctypes.c_void_p),
        ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
        ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
        ("dltensor_from_py_object_no_sync", ctypes.c_void_p),
        ("current_work_stream", ctypes.c_void_p),
    ]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class ExchangeTable:
    """Callable view of a `DLPackExchangeAPI*` taken from its PyCapsule."""

    def __init__(self, capsule):
        self.address = _get_pointer(capsule, CAPSULE_NAME)
        self.raw = DLPackExchangeAPI.from_address(self.address)
        raw = self.raw
        self.allocator = ALLOCATOR(raw.managed_tensor_allocator) if raw.managed_tensor_allocator else None
        self.from_py = FROM_PY(raw.managed_tensor_from_py_object_no_sync) \
            if raw.managed_tensor_from_py_object_no_sync else None
        self.to_py_raw = TO_PY(raw.managed_tensor_to_py_object_no_sync) \
            if raw.managed_tensor_to_py_object_no_sync else None
        self.dltensor_from_py = DLTENSOR_FROM_PY(raw.dltensor_from_py_object_no_sync) \
            if raw.dltensor_from_py_object_no_sync else None
        self.current_stream_fn = CURRENT_STREAM(raw.current_work_stream) if raw.current_work_stream else None

    @property
    def version(self) -> tuple[int, int]:
        return (self.raw.header.version.major, self.raw.header.version.minor)

    def export(self, tensor) -> MANAGED_PTR:
        out = MANAGED_PTR()
        if self.from_py(tensor, ctypes.byref(out)) != 0:
            raise RuntimeError("managed_tensor_from_py_object_no_sync returned non-zero")
        return out

    def to_py(self, managed: MANAGED_PTR):
        out = ctypes.c_void_p()
        if self.to_py_raw(managed, ctypes.byref(out)) != 0:
            raise RuntimeError("managed_tensor_to_py_object_no_sync returned non-zero")
        # The table hands over a new reference: steal it into a Python object.
        obj = ctypes.cast(out, ctypes.py_object).value
        ctypes.pythonapi.Py_DecRef(ctypes.py_object(obj))
        return obj

    def current_stream(self, device_type: int, device_id: int) -> int:
        out = ctypes.c_void_p()
        rc = self.current_stream_fn(device_type, device_id, ctypes.byref(out))
        if rc != 0:
            raise RuntimeError(f"current_work_stream({device_type}, {device_id}) returned {rc}")
        return out.value or 0
