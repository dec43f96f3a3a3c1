"""The DLPack 1.3 exchange table as a C consumer sees it, through ctypes.

For `devbridge check`, devbridge's tests, and plugin authors who want to test
their own tables: function pointers are read out of the PyCapsule and called
with raw pointers, exactly as TVM-FFI does. Layouts follow dlpack.h v1.3
(PyTorch ships it as ATen/dlpack.h).

Calling conventions: the functions that take or return Python objects (and
current_work_stream, which sets a Python exception on failure) are called as
PYFUNCTYPE, i.e. with the GIL held; ctypes then raises the Python exception a
failing call set. The allocator is called as CFUNCTYPE, which releases the
GIL for the call, like a kernel running inside TVM-FFI.
"""

from __future__ import annotations

import ctypes

KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_ROCM = 10
KDL_EXT_DEV = 12
KDL_ONEAPI = 14
KDL_ASCEND = 21

KDL_INT, KDL_UINT, KDL_FLOAT, KDL_BFLOAT, KDL_COMPLEX, KDL_BOOL = 0, 1, 2, 4, 5, 6

FLAG_READ_ONLY = 1
FLAG_IS_COPIED = 2
FLAG_SUBBYTE_PADDED = 4

EXCHANGE_CAPSULE = b"dlpack_exchange_api"


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]

    def astuple(self):
        return (self.code, self.bits, self.lanes)


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

    def sizes(self):
        return tuple(self.shape[i] for i in range(self.ndim))

    def stride_tuple(self):
        return tuple(self.strides[i] for i in range(self.ndim))

    def describe(self):
        """Everything a consumer reads, as a comparable tuple."""
        return (self.data or 0, self.device.device_type, self.device.device_id, self.ndim,
                self.dtype.astuple(), self.sizes(), self.stride_tuple(), self.byte_offset)


class DLManagedTensorVersioned(ctypes.Structure):
    pass


MANAGED_PTR = ctypes.POINTER(DLManagedTensorVersioned)
DELETER = ctypes.CFUNCTYPE(None, MANAGED_PTR)
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", DELETER),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor),
]

SET_ERROR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
ALLOCATOR = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(DLTensor), ctypes.POINTER(MANAGED_PTR),
                             ctypes.c_void_p, SET_ERROR)
FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(MANAGED_PTR))
TO_PY = ctypes.PYFUNCTYPE(ctypes.c_int, MANAGED_PTR, ctypes.POINTER(ctypes.c_void_p))
DLTENSOR_FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(DLTensor))
CURRENT_STREAM = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32,
                                   ctypes.POINTER(ctypes.c_void_p))
# The same function called without the GIL, as a C kernel library would.
CURRENT_STREAM_NOGIL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32,
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


capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
capsule_pointer.restype = ctypes.c_void_p
capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

capsule_new = ctypes.pythonapi.PyCapsule_New
capsule_new.restype = ctypes.py_object
capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class Table:
    """Callable view of the DLPackExchangeAPI* inside a capsule."""

    def __init__(self, capsule):
        self.capsule = capsule
        self.address = capsule_pointer(capsule, EXCHANGE_CAPSULE)
        self.raw = DLPackExchangeAPI.from_address(self.address)
        self.allocator = ALLOCATOR(self.raw.managed_tensor_allocator)
        self.from_py = FROM_PY(self.raw.managed_tensor_from_py_object_no_sync)
        self.to_py_raw = TO_PY(self.raw.managed_tensor_to_py_object_no_sync)
        self.dltensor_from_py_raw = DLTENSOR_FROM_PY(self.raw.dltensor_from_py_object_no_sync)
        self.current_stream_raw = CURRENT_STREAM(self.raw.current_work_stream)
        self.current_stream_nogil = CURRENT_STREAM_NOGIL(self.raw.current_work_stream)

    @property
    def version(self):
        return (self.raw.header.version.major, self.raw.header.version.minor)

    def export(self, obj) -> MANAGED_PTR:
        out = MANAGED_PTR()
        assert self.from_py(id(obj), ctypes.byref(out)) == 0
        return out

    def export_view(self, obj) -> DLTensor:
        out = DLTensor()
        assert self.dltensor_from_py_raw(id(obj), ctypes.byref(out)) == 0
        return out

    def to_py(self, managed):
        out = ctypes.c_void_p()
        assert self.to_py_raw(managed, ctypes.byref(out)) == 0
        return steal_reference(out.value)

    def current_stream(self, device_type: int, device_id: int) -> int:
        out = ctypes.c_void_p(1)
        assert self.current_stream_raw(device_type, device_id, ctypes.byref(out)) == 0
        return out.value or 0


def steal_reference(address: int):
    """The object behind a new reference handed out by C, owned by Python now."""
    obj = ctypes.cast(ctypes.c_void_p(address), ctypes.py_object).value
    ctypes.pythonapi.Py_DecRef(ctypes.py_object(obj))
    return obj


class CountedManagedTensor:
    """A DLManagedTensorVersioned built from Python, whose deleter counts calls.

    `keep` holds whatever owns the memory (a torch tensor, a ctypes buffer)
    until the deleter ran.
    """

    def __init__(self, data: int, shape, strides, dtype, device_type=KDL_CPU, device_id=0,
                 byte_offset=0, keep=None, version=(1, 3), flags=0):
        self.calls = 0
        self.keep = keep
        ndim = len(shape)
        self.shape = (ctypes.c_int64 * max(ndim, 1))(*shape)
        self.strides = (ctypes.c_int64 * max(ndim, 1))(*strides) if strides is not None else None
        self._deleter = DELETER(self._on_delete)
        self.struct = DLManagedTensorVersioned()
        self.struct.version = DLPackVersion(*version)
        self.struct.deleter = self._deleter
        self.struct.flags = flags
        t = self.struct.dl_tensor
        t.data = data
        t.device = DLDevice(device_type, device_id)
        t.ndim = ndim
        t.dtype = DLDataType(*dtype)
        t.shape = ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64)) if shape is not None else None
        t.strides = (ctypes.cast(self.strides, ctypes.POINTER(ctypes.c_int64))
                     if self.strides is not None else None)
        t.byte_offset = byte_offset

    def _on_delete(self, _managed):
        self.calls += 1

    @property
    def pointer(self):
        return ctypes.pointer(self.struct)

    @classmethod
    def over(cls, tensor, device_type, **overrides):
        """A managed tensor describing torch `tensor`'s memory (kept alive)."""
        args = dict(data=tensor.data_ptr(), shape=tuple(tensor.shape), strides=tuple(tensor.stride()),
                    dtype=dlpack_dtype(tensor.dtype), device_type=device_type,
                    device_id=tensor.device.index or 0, keep=tensor)
        args.update(overrides)
        return cls(**args)


def dlpack_dtype(torch_dtype):
    import torch

    return {
        torch.float32: (KDL_FLOAT, 32, 1),
        torch.float64: (KDL_FLOAT, 64, 1),
        torch.float16: (KDL_FLOAT, 16, 1),
        torch.bfloat16: (KDL_BFLOAT, 16, 1),
        torch.int64: (KDL_INT, 64, 1),
        torch.int32: (KDL_INT, 32, 1),
        torch.int8: (KDL_INT, 8, 1),
        torch.uint8: (KDL_UINT, 8, 1),
        torch.bool: (KDL_BOOL, 8, 1),
        torch.complex64: (KDL_COMPLEX, 64, 1),
    }[torch_dtype]
