"""With devbridge installed, its DLPack exchange table (installed by cudadev's
import) reports each backend's live current stream at the same time."""

import ctypes

import pytest
import torch

pytestmark = pytest.mark.gpu

kDLCUDA = 2
kDLExtDev = 12

CurrentWorkStream = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p)
)


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLPackExchangeAPIHeader(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("prev_api", ctypes.c_void_p)]


# Field order as in ATen/dlpack.h (DLPack 1.3) of torch 2.11.
class DLPackExchangeAPI(ctypes.Structure):
    _fields_ = [
        ("header", DLPackExchangeAPIHeader),
        ("managed_tensor_allocator", ctypes.c_void_p),
        ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
        ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
        ("dltensor_from_py_object_no_sync", ctypes.c_void_p),
        ("current_work_stream", CurrentWorkStream),
    ]


def exchange_api():
    pytest.importorskip("devbridge", reason="devbridge is not installed")
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    address = get_pointer(torch.Tensor.__dlpack_c_exchange_api__, b"dlpack_exchange_api")
    assert address
    return DLPackExchangeAPI.from_address(address)


def current_work_stream(api, device_type, device_id=0):
    stream = ctypes.c_void_p()
    assert api.current_work_stream(device_type, device_id, ctypes.byref(stream)) == 0
    return stream.value or 0


def test_current_work_stream_follows_cudadev_and_cuda_at_once():
    api = exchange_api()
    assert api.header.version.major == 1
    cuda_stream = torch.cuda.Stream()
    cudadev_stream = torch.Stream(device="cudadev")
    with torch.cuda.stream(cuda_stream), cudadev_stream:
        assert current_work_stream(api, kDLExtDev) == cudadev_stream.native_handle
        assert current_work_stream(api, kDLCUDA) == cuda_stream.cuda_stream
    assert current_work_stream(api, kDLExtDev) == torch.cudadev._current_stream_handle()
    assert current_work_stream(api, kDLCUDA) == torch.cuda.current_stream().cuda_stream
