"""managed_tensor_allocator called as TVM-FFI calls it: from C, with the GIL
released, errors only through SetError."""

import ctypes
import threading

import pytest
import torch

import devbridge
from devbridge import dlpack_ctypes as dl
from dlpack_devices import skip_without_simdev

OURS = dl.Table(devbridge.exchange_api())


class ErrorSink:
    """A SetError callback (ctypes takes the GIL for it) that records calls."""

    def __init__(self):
        self.calls = []
        self.callback = dl.SET_ERROR(self._record)

    def _record(self, _context, kind, message):
        self.calls.append((kind.decode(), message.decode()))


def prototype(shape, dtype=(dl.KDL_FLOAT, 32, 1), device=(dl.KDL_CPU, 0)):
    shape_array = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    proto = dl.DLTensor()
    proto.ndim = len(shape)
    proto.shape = ctypes.cast(shape_array, ctypes.POINTER(ctypes.c_int64))
    proto.dtype = dl.DLDataType(*dtype)
    proto.device = dl.DLDevice(*device)
    proto._keep = shape_array
    return proto


def allocate(proto, sink=None):
    out = dl.MANAGED_PTR()
    rc = OURS.allocator(ctypes.byref(proto), ctypes.byref(out), None,
                        sink.callback if sink else dl.SET_ERROR())
    return rc, out


def test_allocates_a_compact_owning_tensor():
    sink = ErrorSink()
    rc, out = allocate(prototype((3, 5)), sink)
    assert rc == 0 and sink.calls == []
    t = out.contents.dl_tensor
    assert t.sizes() == (3, 5) and t.stride_tuple() == (5, 1)
    assert (t.device.device_type, t.dtype.astuple()) == (dl.KDL_CPU, (dl.KDL_FLOAT, 32, 1))
    # The memory belongs to the caller until the deleter: import it and write.
    imported = OURS.to_py(out)
    imported.fill_(2.0)
    assert imported.sum().item() == 30.0


@skip_without_simdev
def test_allocates_on_the_plugin_device():
    rc, out = allocate(prototype((4,), device=(dl.KDL_EXT_DEV, 1)), ErrorSink())
    assert rc == 0
    assert (out.contents.dl_tensor.device.device_type, out.contents.dl_tensor.device.device_id) \
        == (dl.KDL_EXT_DEV, 1)
    imported = OURS.to_py(out)
    assert imported.device == torch.device("simdev:1")
    imported.copy_(torch.arange(4.0))
    assert torch.equal(imported.cpu(), torch.arange(4.0))


@pytest.mark.parametrize("device", [(dl.KDL_CPU, 0),
                                    pytest.param((dl.KDL_EXT_DEV, 0), marks=skip_without_simdev)])
def test_works_from_foreign_threads_without_the_gil(device):
    """ctypes.CFUNCTYPE releases the GIL around the call, as TVM-FFI does."""
    failures = []
    proto = prototype((64,), device=device)

    def worker():
        for _ in range(25):
            rc, out = allocate(proto)
            if rc != 0:
                failures.append(rc)
                return
            deleter = ctypes.CFUNCTYPE(None, dl.MANAGED_PTR)(
                ctypes.cast(out.contents.deleter, ctypes.c_void_p).value)
            deleter(out)  # also without the GIL

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_errors_from_a_foreign_thread_reach_set_error():
    sink = ErrorSink()
    result = {}

    def worker():
        result["rc"], result["out"] = allocate(prototype((2,), device=(99, 0)), sink)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert result["rc"] == -1 and not result["out"]
    assert sink.calls == [("BufferError", sink.calls[0][1])]
    assert "unknown (99)" in sink.calls[0][1]


BAD_PROTOTYPES = {
    "unknown-device": (dict(device=(42, 0)), "BufferError", r"unknown (42)"),
    "bad-dtype": (dict(dtype=(dl.KDL_FLOAT, 24, 1)), "BufferError", "Unsupported kFloat bits 24"),
    "negative-size": (dict(shape=(2, -3)), "ValueError", "negative size -3 in dimension 1"),
    "bad-device-id": (dict(device=(dl.KDL_EXT_DEV, 999)), "ValueError", "device_id 999"),
    "ascend-not-enabled": (dict(device=(dl.KDL_ASCEND, 0)), "BufferError",
                           "accept_ascend_device_type=True"),
}


@pytest.mark.parametrize("case", sorted(BAD_PROTOTYPES))
def test_bad_prototypes_report_through_set_error_exactly_once(case):
    overrides, kind, message = BAD_PROTOTYPES[case]
    args = dict(shape=(2, 3))
    args.update(overrides)
    proto = prototype(**args)
    sink = ErrorSink()
    rc, out = allocate(proto, sink)
    assert rc == -1 and not out
    assert len(sink.calls) == 1
    assert sink.calls[0][0] == kind
    assert message in sink.calls[0][1]
    # A NULL SetError is tolerated: the -1 alone reports the failure.
    assert allocate(proto)[0] == -1


def test_null_prototype_and_out():
    sink = ErrorSink()
    out = dl.MANAGED_PTR()
    assert OURS.allocator(None, ctypes.byref(out), None, sink.callback) == -1
    assert OURS.allocator(ctypes.byref(prototype((1,))), None, None, sink.callback) == -1
    assert [kind for kind, _ in sink.calls] == ["ValueError", "ValueError"]
    assert "prototype == NULL" in sink.calls[0][1] and "out == NULL" in sink.calls[1][1]


def test_set_error_context_is_passed_through():
    seen = []

    @dl.SET_ERROR
    def record_context(context, _kind, _message):
        seen.append(context)

    out = dl.MANAGED_PTR()
    OURS.allocator(ctypes.byref(prototype((1,), device=(99, 0))), ctypes.byref(out),
                   ctypes.c_void_p(0xabc), record_context)
    assert seen == [0xabc]
