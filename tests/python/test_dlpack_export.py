"""Export through devbridge's table (owning and non-owning), compared field by
field with PyTorch's own table, on CPU and simdev."""

import ctypes
import gc
import threading

import pytest
import torch

import devbridge
from devbridge import dlpack_ctypes as dl
from dlpack_devices import DEVICES, skip_without_simdev

OURS = dl.Table(devbridge.exchange_api())
PYTORCH = dl.Table(devbridge.torch_exchange_api())


def all_torch_dtypes():
    return sorted({v for v in vars(torch).values() if isinstance(v, torch.dtype)}, key=str)


QUANTIZED = {torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4}


def make(dtype, device="cpu"):
    """A small tensor of `dtype`, or None when torch cannot create one."""
    try:
        if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
            return torch.ones(2, 3).to(dtype).to(device)
        return torch.zeros(2, 3, dtype=dtype, device=device)
    except (RuntimeError, TypeError, NotImplementedError):
        pass
    try:
        # Shell dtypes (float4_e2m1fn_x2, ...) have no conversions, only empty.
        return torch.empty(2, 3, dtype=dtype, device=device)
    except (RuntimeError, TypeError, NotImplementedError):
        return None


def pytorch_export(tensor):
    """PyTorch's own export (the reference), or the exception it raises."""
    try:
        managed = PYTORCH.export(tensor)
    except Exception as exc:  # noqa: BLE001 - any failure is the reference outcome
        return exc
    described = managed.contents.dl_tensor.describe()
    managed.contents.deleter(managed)
    return described


@pytest.mark.parametrize("dtype", all_torch_dtypes(), ids=str)
def test_every_dtype_exports_like_pytorch(dtype):
    tensor = make(dtype)
    if tensor is None:
        if dtype in QUANTIZED:
            tensor = torch._empty_affine_quantized((3,), scale=0.5, zero_point=1, dtype=dtype)
        else:
            pytest.skip(f"torch cannot create a {dtype} tensor")
    expected = pytorch_export(tensor)
    if isinstance(expected, Exception):
        with pytest.raises(BufferError):
            OURS.export(tensor)
        with pytest.raises(BufferError):
            OURS.export_view(tensor)
        return
    managed = OURS.export(tensor)
    assert managed.contents.dl_tensor.describe() == expected
    assert (managed.contents.version.major, managed.contents.version.minor) == (1, 3)
    assert managed.contents.flags == 0
    managed.contents.deleter(managed)
    assert OURS.export_view(tensor).describe() == expected


VIEWS = {
    "0-d": lambda d: torch.tensor(3.5, device=d),
    "zero-size": lambda d: torch.ones(0, 4, device=d),
    "transposed": lambda d: torch.arange(12.0, device=d).reshape(3, 4).t(),
    "offset-slice": lambda d: torch.arange(20.0, device=d)[5:15:3],
    "expanded": lambda d: torch.ones(1, 3, device=d).expand(4, 3),
    "requires-grad": lambda d: torch.ones(3, device=d, requires_grad=True),
    "parameter": lambda d: torch.nn.Parameter(torch.ones(2, device=d)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_views_export_like_pytorch(view, device):
    tensor = VIEWS[view](device)
    managed = OURS.export(tensor)
    got = managed.contents.dl_tensor.describe()
    managed.contents.deleter(managed)
    assert got == pytorch_export(tensor)
    assert got[0] == tensor.data_ptr()
    assert got[5] == tuple(tensor.shape) and got[6] == tuple(tensor.stride())
    assert OURS.export_view(tensor).describe() == got


@skip_without_simdev
def test_plugin_tensor_is_ext_dev_with_its_index():
    for index in range(devbridge.device_count("simdev")):
        tensor = torch.ones(3, device=f"simdev:{index}")
        view = OURS.export_view(tensor)
        assert (view.device.device_type, view.device.device_id) == (dl.KDL_EXT_DEV, index)


@skip_without_simdev
def test_export_ascend_device_type_is_opt_in():
    tensor = torch.ones(3, device="simdev:1")
    options = devbridge._C._get_options()
    try:
        devbridge.install(export_ascend_device_type=True)
        assert OURS.export_view(tensor).device.device_type == dl.KDL_ASCEND
    finally:
        devbridge.install(**options)
    assert OURS.export_view(tensor).device.device_type == dl.KDL_EXT_DEV


def test_owning_export_keeps_the_memory_alive():
    tensor = torch.arange(6.0)
    managed = OURS.export(tensor)
    data = managed.contents.dl_tensor.data
    del tensor
    gc.collect()
    # The export's reference is now the only one: the memory is still valid.
    assert list((ctypes.c_float * 6).from_address(data)) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    managed.contents.deleter(managed)


@pytest.mark.parametrize("device", DEVICES)
def test_deleter_releases_the_reference_exactly_once(device):
    tensor = torch.arange(6.0, device=device)
    uses = tensor._use_count()
    first, second = OURS.export(tensor), OURS.export(tensor)
    assert tensor._use_count() == uses + 2
    first.contents.deleter(first)
    assert tensor._use_count() == uses + 1
    second.contents.deleter(second)
    assert tensor._use_count() == uses


@pytest.mark.parametrize("device", DEVICES)
def test_deleter_runs_on_a_thread_without_the_gil(device):
    tensor = torch.arange(6.0, device=device)
    uses = tensor._use_count()
    managed = OURS.export(tensor)
    deleter_address = ctypes.cast(managed.contents.deleter, ctypes.c_void_p).value
    call_without_gil = ctypes.CFUNCTYPE(None, dl.MANAGED_PTR)(deleter_address)
    thread = threading.Thread(target=call_without_gil, args=(managed,))
    thread.start()
    thread.join()
    assert tensor._use_count() == uses


def test_non_owning_export_does_not_touch_refcounts():
    tensor = torch.arange(6.0)
    uses = tensor._use_count()
    view = OURS.export_view(tensor)
    assert tensor._use_count() == uses
    # shape/strides point into the tensor's own metadata, valid while it lives.
    assert view.sizes() == (6,)


class NotATensor:
    pass


BAD_OBJECTS = {
    "int": (3, TypeError, "expected a torch.Tensor, got 'int'"),
    "object": (NotATensor(), TypeError, "got 'NotATensor'"),
    "list": ([1.0, 2.0], TypeError, "got 'list'"),
    "conjugate": (torch.ones(2, dtype=torch.complex64).conj(), BufferError, "resolve_conj"),
    "negative-bit": (torch.ones(2, dtype=torch.complex64).conj().imag, BufferError, "resolve_neg"),
    "sparse-coo": (torch.eye(3).to_sparse(), BufferError, "only strided tensors"),
    "sparse-csr": (torch.eye(3).to_sparse_csr(), BufferError, "only strided tensors"),
    "meta": (torch.ones(2, device="meta"), BufferError, "meta"),
}


@pytest.mark.parametrize("case", sorted(BAD_OBJECTS))
def test_bad_objects_raise_clear_errors(case):
    obj, error, message = BAD_OBJECTS[case]
    with pytest.raises(error, match=message):
        OURS.export(obj)
    with pytest.raises(error, match=message):
        OURS.export_view(obj)


def test_null_arguments_raise():
    out = dl.MANAGED_PTR()
    with pytest.raises(ValueError, match="py_object is NULL"):
        OURS.from_py(None, ctypes.byref(out))
    with pytest.raises(ValueError, match="out == NULL"):
        OURS.from_py(id(torch.ones(1)), None)
    with pytest.raises(ValueError, match="out == NULL"):
        OURS.dltensor_from_py_raw(id(torch.ones(1)), None)


def test_tensor_subclass_is_accepted():
    class Tagged(torch.Tensor):
        pass

    tensor = torch.arange(4.0).as_subclass(Tagged)
    assert OURS.export_view(tensor).data == tensor.data_ptr()
