"""Import (managed_tensor_to_py_object_no_sync): round trips, device types,
bad input, and the ownership rule (consumed on success, untouched on failure)."""

import ctypes
import gc
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import devbridge
from devbridge import dlpack_ctypes as dl
from dlpack_devices import DEVICES, skip_without_simdev
from test_dlpack_export import QUANTIZED, all_torch_dtypes, make

OURS = dl.Table(devbridge.exchange_api())
PYTORCH = dl.Table(devbridge.torch_exchange_api())


def round_trip(table, tensor):
    return table.to_py(table.export(tensor))


def pytorch_round_trips():
    """(dtype, PyTorch's round-trip dtype) for every dtype PyTorch's table exports."""
    cases = []
    for dtype in all_torch_dtypes():
        tensor = make(dtype) if dtype not in QUANTIZED else None
        if tensor is None:
            continue  # quantized and bit types: export errors, see test_dlpack_export
        try:
            cases.append((dtype, round_trip(PYTORCH, tensor).dtype))
        except RuntimeError:  # PyTorch's table raises RuntimeError where ours says BufferError
            continue
    return cases


@pytest.mark.parametrize("dtype, reference_dtype", pytorch_round_trips(), ids=str)
def test_every_exportable_dtype_round_trips_like_pytorch(dtype, reference_dtype):
    tensor = make(dtype)
    back = round_trip(OURS, tensor)
    # Sub-byte types (int1..int7, ...) come back as PyTorch's own table
    # brings them back (8-bit); every other dtype comes back unchanged.
    assert back.dtype == reference_dtype
    assert back.data_ptr() == tensor.data_ptr()
    assert back.shape == tensor.shape and back.stride() == tensor.stride()
    if back.dtype == dtype:
        assert torch.equal(back.view(torch.uint8), tensor.view(torch.uint8))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape_case", ["0-d", "zero-size", "transposed", "offset-slice"])
def test_views_round_trip_on_their_device(shape_case, device):
    base = {
        "0-d": lambda: torch.tensor(2.5),
        "zero-size": lambda: torch.ones(0, 3),
        "transposed": lambda: torch.arange(12.0).reshape(3, 4).t(),
        "offset-slice": lambda: torch.arange(20.0)[3:17:2],
    }[shape_case]()
    tensor = base.to(device) if device == "cpu" else base.contiguous().to(device)
    if shape_case in ("transposed", "offset-slice"):
        tensor = {"transposed": lambda t: t.reshape(4, 3).t(),
                  "offset-slice": lambda t: t[1:6:2]}[shape_case](tensor)
    back = round_trip(OURS, tensor)
    assert back.device == tensor.device
    assert back.data_ptr() == tensor.data_ptr()
    assert back.shape == tensor.shape and back.stride() == tensor.stride()
    assert torch.equal(back.cpu(), tensor.cpu())


@pytest.mark.parametrize("device", DEVICES)
def test_import_consumes_the_tensor_and_deleter_runs_once_when_it_dies(device):
    source = torch.arange(8.0, device=device)
    dl_type = dl.KDL_CPU if device == "cpu" else dl.KDL_EXT_DEV
    managed = dl.CountedManagedTensor.over(source, dl_type)
    imported = OURS.to_py(managed.pointer)
    assert imported.device == source.device
    assert imported.data_ptr() == source.data_ptr()
    view = imported[2:]
    del imported
    gc.collect()
    assert managed.calls == 0, "a view still uses the memory"
    del view
    gc.collect()
    assert managed.calls == 1


@pytest.mark.parametrize("device", DEVICES)
def test_byte_offset_becomes_a_storage_offset(device):
    source = torch.arange(10.0, device=device)
    dl_type = dl.KDL_CPU if device == "cpu" else dl.KDL_EXT_DEV
    managed = dl.CountedManagedTensor.over(source, dl_type, shape=(4,), strides=(1,),
                                           byte_offset=3 * 4)
    imported = OURS.to_py(managed.pointer)
    assert torch.equal(imported.cpu(), torch.tensor([3.0, 4.0, 5.0, 6.0]))
    assert imported.data_ptr() == source.data_ptr() + 12
    del imported
    gc.collect()
    assert managed.calls == 1


@skip_without_simdev
def test_ext_dev_imports_as_the_plugin_device():
    for index in range(devbridge.device_count("simdev")):
        source = torch.arange(4.0, device=f"simdev:{index}")
        managed = dl.CountedManagedTensor.over(source, dl.KDL_EXT_DEV)
        imported = OURS.to_py(managed.pointer)
        assert imported.device == torch.device("simdev", index)
        assert torch.equal(imported.cpu(), source.cpu())


@skip_without_simdev
def test_ascend_device_type_imports_only_in_transition_mode():
    source = torch.arange(4.0, device="simdev:1")
    managed = dl.CountedManagedTensor.over(source, dl.KDL_ASCEND)
    options = devbridge._C._get_options()
    with pytest.raises(BufferError, match=r"accept_ascend_device_type=True"):
        OURS.to_py(managed.pointer)
    assert managed.calls == 0
    try:
        devbridge.install(accept_ascend_device_type=True)
        imported = OURS.to_py(managed.pointer)
    finally:
        devbridge.install(**options)
    assert imported.device == torch.device("simdev:1")
    assert torch.equal(imported.cpu(), source.cpu())
    del imported
    gc.collect()
    assert managed.calls == 1


def spoil(**overrides):
    """A valid CPU managed tensor over arange(6.0), with `overrides` applied."""
    fields = dict(device_type=dl.KDL_CPU)
    fields.update(overrides)
    return dl.CountedManagedTensor.over(torch.arange(6.0), **fields)


BAD_MANAGED = {
    "unknown-device": (dict(device_type=99), BufferError, r"unknown \(99\)"),
    "vulkan-device": (dict(device_type=7), BufferError, r"kDLVulkan \(7\) has no PyTorch device"),
    "wrong-major": (dict(version=(2, 0)), BufferError, "version 2.0.*caller still owns it"),
    "null-shape": (dict(shape=None), ValueError, "NULL shape"),
    "null-strides": (dict(strides=None), ValueError, "NULL strides.*DLPack >= 1.2"),
    "byte-offset": (dict(byte_offset=6), ValueError, "byte_offset 6 is not a multiple of the "
                    "element size 4"),
    "negative-stride": (dict(strides=(-1,)), BufferError, "negative stride"),
    "negative-size": (dict(shape=(-6,)), ValueError, "negative size"),
    "bad-dtype": (dict(dtype=(dl.KDL_FLOAT, 12, 1)), BufferError, "Unsupported kFloat bits 12"),
    "lanes": (dict(dtype=(dl.KDL_FLOAT, 32, 4)), BufferError, "lanes"),
    "padded-subbyte": (dict(flags=dl.FLAG_SUBBYTE_PADDED), BufferError, "IS_SUBBYTE_TYPE_PADDED"),
    "null-data": (dict(data=None), ValueError, "NULL data pointer but is not empty"),
    "device-id": (dict(device_type=dl.KDL_EXT_DEV, device_id=200), ValueError,
                  "device_id 200 is out of range"),
    "overflowing-extent": (dict(shape=(1 << 62, 1 << 62), strides=(1, 1)), ValueError,
                           "span more than 2\\^63 bytes"),
}
if torch.version.cuda is None and torch.version.hip is None:  # a CPU build (a CUDA build imports lazily)
    BAD_MANAGED["cuda-without-cuda"] = (dict(device_type=dl.KDL_CUDA), RuntimeError,
                                        "no support for cuda devices")


@pytest.mark.parametrize("case", sorted(BAD_MANAGED))
def test_bad_managed_tensors_raise_and_are_not_consumed(case):
    overrides, error, message = BAD_MANAGED[case]
    if overrides.get("shape", ()) is None:
        managed = spoil(shape=(6,), strides=(1,))
        managed.struct.dl_tensor.shape = None
    else:
        managed = spoil(**overrides)
    out = ctypes.c_void_p()
    with pytest.raises(error, match=message):
        OURS.to_py_raw(managed.pointer, ctypes.byref(out))
    assert out.value is None
    # On failure the caller still owns the tensor (what PyTorch's table does,
    # and what tvm-ffi expects: it calls the deleter itself).
    assert managed.calls == 0


def test_ext_dev_without_a_plugin_names_the_fix():
    """In a process where no plugin is loaded (autoload off), kDLExtDev fails clearly."""
    script = textwrap.dedent("""
        import ctypes, torch, devbridge; from devbridge import dlpack_ctypes as dl
        assert devbridge.plugin_name() is None
        table = dl.Table(devbridge.exchange_api())
        source = dl.CountedManagedTensor.over(torch.arange(3.0), dl.KDL_EXT_DEV)
        try:
            table.to_py(source.pointer)
        except RuntimeError as exc:
            assert "no PrivateUse1 backend is loaded" in str(exc), exc
            assert "Import the device plugin" in str(exc), exc
        else:
            raise AssertionError("import succeeded without a plugin")
        assert source.calls == 0
        out = ctypes.c_void_p()
        try:
            table.current_stream_raw(dl.KDL_EXT_DEV, 0, ctypes.byref(out))
        except RuntimeError as exc:
            assert "no PrivateUse1 backend is loaded" in str(exc), exc
        else:
            raise AssertionError("current_work_stream succeeded without a plugin")
    """)
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0",
               PYTHONPATH=os.pathsep.join([os.path.dirname(__file__),
                                           os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr


@skip_without_simdev
def test_ext_dev_index_beyond_the_plugins_devices():
    managed = spoil(device_type=dl.KDL_EXT_DEV, device_id=7)
    with pytest.raises(ValueError, match=r"simdev:7, but simdev has 2 device\(s\)"):
        OURS.to_py(managed.pointer)
    assert managed.calls == 0


def test_null_arguments():
    out = ctypes.c_void_p()
    with pytest.raises(ValueError, match="tensor == NULL"):
        OURS.to_py_raw(None, ctypes.byref(out))
    managed = spoil()
    with pytest.raises(ValueError, match="out_py_object == NULL.*not consumed"):
        OURS.to_py_raw(managed.pointer, None)
    assert managed.calls == 0


def test_zero_dim_with_null_shape_and_strides_is_valid():
    value = torch.tensor(7.0)
    managed = dl.CountedManagedTensor(data=value.data_ptr(), shape=(), strides=(),
                                      dtype=(dl.KDL_FLOAT, 32, 1), keep=value)
    managed.struct.dl_tensor.shape = None
    managed.struct.dl_tensor.strides = None
    imported = OURS.to_py(managed.pointer)
    assert imported.shape == () and imported.item() == 7.0
    del imported
    gc.collect()
    assert managed.calls == 1


def test_null_deleter_is_allowed():
    managed = spoil()
    managed.struct.deleter = dl.DELETER()
    imported = OURS.to_py(managed.pointer)
    assert torch.equal(imported, torch.arange(6.0))
    del imported
    gc.collect()


def test_null_strides_before_dlpack_1_2_mean_compact_row_major():
    # DLPack < 1.2 allowed NULL strides for compact tensors; a producer that
    # declares such a version is read that way (1.2+ requires strides).
    source = torch.arange(6.0).reshape(2, 3)
    managed = dl.CountedManagedTensor.over(source, device_type=dl.KDL_CPU, version=(1, 1),
                                           strides=None)
    imported = OURS.to_py(managed.pointer)
    assert imported.stride() == (3, 1)
    assert torch.equal(imported, source)
    del imported
    gc.collect()
    assert managed.calls == 1
