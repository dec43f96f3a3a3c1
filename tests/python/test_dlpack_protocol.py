"""The Python DLPack protocol on plugin tensors, once devbridge is installed:
Tensor.__dlpack_device__ / __dlpack__ / torch.from_dlpack on simdev, against
the DLPack Python specification; CPU tensors exactly as torch serves them.

Stream tests use simdev's delay knob (every queued op sleeps first), so a
missing wait reads stale data deterministically: each ordering test also runs
the unordered case and sees it fail.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools

import pytest
import torch

import devbridge
from devbridge import _protocol, _torch_dlpack_api
from devbridge import dlpack_ctypes as dl
from dlpack_capsules import describe, name
from dlpack_devices import SIMDEV, skip_without_simdev

if SIMDEV:
    import torch_simdev

DELAY_US = 20_000  # per queued op: the producer's value lands ~60 ms after it is queued


@pytest.fixture(autouse=True)
def clean_state():
    options = devbridge._C._get_options()
    yield
    devbridge.install(**options)
    if SIMDEV:
        torch.simdev.set_op_delay_us(0)
        devbridge.register_external_stream_hook(torch_simdev._C.external_stream_hook(), "simdev")
        for index in range(torch.simdev.device_count()):
            torch.simdev.synchronize(index)


@contextlib.contextmanager
def op_delay():
    torch.simdev.set_op_delay_us(DELAY_US)
    try:
        yield
    finally:
        torch.simdev.set_op_delay_us(0)


def produce_slowly(tensor, producer, value):
    """Queue three delayed ops on `producer` that leave `value` in `tensor`:
    a consumer's single op that does not wait runs ~40 ms before the last."""
    with producer:
        tensor.fill_(value - 2.0)
        tensor.add_(1.0)
        tensor.add_(1.0)


def read_on(stream, tensor):
    with stream:
        seen = tensor.clone()
    stream.synchronize()
    return float(seen.cpu().min())


# ---------------------------------------------------------------- device, round trips


@skip_without_simdev
@pytest.mark.parametrize("index", [0, 1])
def test_dlpack_device_of_a_plugin_tensor(index):
    x = torch.ones(3, device=f"simdev:{index}")
    device = x.__dlpack_device__()
    assert device == (12, index)
    assert device[0] is torch.utils.dlpack.DLDeviceType.kDLExtDev


@skip_without_simdev
def test_dlpack_device_is_21_when_exporting_the_ascend_type():
    devbridge.install(export_ascend_device_type=True, accept_ascend_device_type=True)
    assert torch.ones(3, device="simdev:1").__dlpack_device__() == (21, 1)


@skip_without_simdev
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16, torch.bool])
def test_from_dlpack_of_a_plugin_tensor_shares_memory(dtype):
    base = torch.arange(24, device="simdev:1").reshape(4, 6).to(dtype)
    x = base[:, 1:5]  # a strided view
    y = torch.from_dlpack(x)
    assert y.device == x.device and y.dtype == dtype
    assert (y.data_ptr(), y.shape, y.stride()) == (x.data_ptr(), x.shape, x.stride())
    y.zero_()
    expected = torch.arange(24).reshape(4, 6).to(dtype)
    expected[:, 1:5] = 0
    assert torch.equal(base.cpu(), expected)


@skip_without_simdev
@pytest.mark.parametrize("max_version,capsule_name", [(None, "dltensor"), ((1, 0), "dltensor_versioned")])
def test_from_dlpack_of_a_capsule_shares_memory_and_consumes_it(max_version, capsule_name):
    x = torch.arange(6.0, device="simdev:0")
    capsule = x.__dlpack__(max_version=max_version)
    assert name(capsule) == capsule_name
    y = torch.from_dlpack(capsule)
    assert y.device == x.device and y.data_ptr() == x.data_ptr()
    assert name(capsule) == "used_" + capsule_name
    y.fill_(5.0)
    assert x.cpu().tolist() == [5.0] * 6


@skip_without_simdev
def test_a_dropped_capsule_releases_the_tensor():
    torch.simdev.synchronize(0)
    before = torch.simdev.memory_allocated(0)
    capsule = torch.empty(1 << 20, device="simdev:0").__dlpack__(max_version=(1, 3))
    assert torch.simdev.memory_allocated(0) > before  # the capsule keeps the tensor alive
    del capsule
    assert torch.simdev.memory_allocated(0) == before


@skip_without_simdev
def test_versioned_capsule_is_dlpack_1_3_of_the_same_memory():
    x = torch.arange(6.0, device="simdev:1").reshape(2, 3)
    info = describe(x.__dlpack__(max_version=(1, 0)))
    assert info["version"] == (1, 3) and info["flags"] == 0
    data, device_type, device_id, ndim, dtype, shape, strides, offset = info["tensor"]
    assert (data, device_type, device_id, shape, strides, offset) == (x.data_ptr(), 12, 1, (2, 3), (3, 1), 0)


@skip_without_simdev
@pytest.mark.parametrize("max_version,expected", [(None, "dltensor"), ((0, 8), "dltensor"),
                                                  ((1, 3), "dltensor_versioned"),
                                                  ((2, 0), "dltensor_versioned")])
def test_max_version_picks_the_struct(max_version, expected):
    # A newer consumer gets our 1.3 and must check the version (spec).
    assert name(torch.ones(2, device="simdev:0").__dlpack__(max_version=max_version)) == expected


# ---------------------------------------------------------------- streams


@skip_without_simdev
def test_a_native_stream_of_the_device_waits_for_the_producer():
    x = torch.zeros(1 << 12, device="simdev:0")
    torch.simdev.synchronize(0)
    producer, consumer = torch.Stream(device="simdev:0"), torch.Stream(device="simdev:0")
    assert producer != consumer
    with op_delay():
        produce_slowly(x, producer, 7.0)
        with producer:
            capsule = x.__dlpack__(stream=consumer.native_handle, max_version=(1, 3))
        ordered = read_on(consumer, torch.from_dlpack(capsule))
        producer.synchronize()
        produce_slowly(x, producer, 9.0)
        with producer:  # -1: no ordering, so the consumer reads what is there now
            unordered = read_on(consumer, torch.from_dlpack(x.__dlpack__(stream=-1, max_version=(1, 3))))
    assert ordered == 7.0
    assert unordered != 9.0  # the same read without the wait: proves it was needed


@skip_without_simdev
def test_none_orders_the_default_stream():
    x = torch.zeros(1 << 12, device="simdev:1")
    torch.simdev.synchronize(1)
    producer = torch.Stream(device="simdev:1")
    default = torch.simdev.default_stream(1)
    with op_delay():
        produce_slowly(x, producer, 3.0)
        with producer:
            x.__dlpack__(stream=None, max_version=(1, 3))
        assert read_on(default, x) == 3.0


@skip_without_simdev
def test_the_current_stream_itself_needs_no_wait():
    x = torch.ones(4, device="simdev:0")
    side = torch.Stream(device="simdev:0")
    with side:
        y = torch.from_dlpack(x.__dlpack__(stream=side.native_handle, max_version=(1, 3)))
    assert y.data_ptr() == x.data_ptr()


@skip_without_simdev
def test_a_stream_made_outside_torch_waits_through_the_external_stream_hook():
    runtime = ctypes.CDLL(torch_simdev.runtime_library_path())
    handle = ctypes.c_void_p()
    assert runtime.sdStreamCreate(0, ctypes.byref(handle)) == 0
    try:
        x = torch.zeros(1 << 12, device="simdev:0")
        torch.simdev.synchronize(0)
        producer = torch.Stream(device="simdev:0")
        consumer = torch.simdev.external_stream(handle.value, 0)
        assert consumer.native_handle == handle.value
        with op_delay():
            produce_slowly(x, producer, 5.0)
            with producer:
                x.__dlpack__(stream=handle.value, max_version=(1, 3))
            assert read_on(consumer, x) == 5.0
    finally:
        torch.simdev.synchronize(0)
        assert runtime.sdStreamDestroy(handle) == 0


@skip_without_simdev
def test_without_the_hook_only_current_and_default_streams_can_be_ordered():
    devbridge.register_external_stream_hook(None, "simdev")
    x = torch.ones(4, device="simdev:0")
    other = torch.Stream(device="simdev:0")
    x.__dlpack__(stream=torch.simdev.default_stream(0).native_handle)  # known without a hook
    with pytest.raises(BufferError) as info:
        x.__dlpack__(stream=other.native_handle)
    message = str(info.value)
    assert "neither the current nor the default stream of simdev:0" in message
    assert "devbridge.register_external_stream_hook(capsule, 'simdev')" in message
    assert "stream=-1" in message


@skip_without_simdev
def test_a_stream_of_another_device_or_no_stream_at_all_is_refused():
    x = torch.ones(4, device="simdev:0")
    with pytest.raises(ValueError, match="is not a stream of simdev:0"):
        x.__dlpack__(stream=torch.Stream(device="simdev:1").native_handle)
    with pytest.raises(ValueError, match=r"0xdeadbeef is not a stream of simdev:0"):
        x.__dlpack__(stream=0xDEADBEEF)


@skip_without_simdev
@pytest.mark.parametrize("stream,error,match", [
    (1.5, TypeError, "takes None, -1 or a native stream of simdev:0 as an int, got float"),
    (True, TypeError, "got bool"),
    (-2, ValueError, r"stream=-2\): a stream is None, -1 or a native stream handle"),
])
def test_bad_stream_arguments(stream, error, match):
    with pytest.raises(error, match=match):
        torch.ones(2, device="simdev:0").__dlpack__(stream=stream)


# ---------------------------------------------------------------- dl_device, copy


@skip_without_simdev
def test_dl_device_of_its_own_device_is_no_copy():
    x = torch.ones(3, device="simdev:1")
    info = describe(x.__dlpack__(max_version=(1, 3), dl_device=(12, 1)))
    assert info["tensor"][0] == x.data_ptr() and info["flags"] == 0


@skip_without_simdev
@pytest.mark.parametrize("target,device", [((1, 0), "cpu"), ((12, 0), "simdev:0")])
def test_dl_device_elsewhere_copies_and_flags_it(target, device):
    x = torch.arange(5.0, device="simdev:1")
    capsule = x.__dlpack__(max_version=(1, 3), dl_device=target)
    info = describe(capsule)
    assert info["flags"] & dl.FLAG_IS_COPIED and info["tensor"][1:3] == target
    y = torch.from_dlpack(capsule)
    assert y.device == torch.device(device) and y.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


@skip_without_simdev
def test_copy_true_copies_on_the_consumer_stream_after_the_producer():
    x = torch.zeros(1 << 12, device="simdev:0")
    torch.simdev.synchronize(0)
    producer, consumer = torch.Stream(device="simdev:0"), torch.Stream(device="simdev:0")
    with op_delay():
        produce_slowly(x, producer, 4.0)
        with producer:
            capsule = x.__dlpack__(stream=consumer.native_handle, max_version=(1, 3), copy=True)
        info = describe(capsule)
        copy = torch.from_dlpack(capsule)
        assert copy.data_ptr() != x.data_ptr() and info["flags"] & dl.FLAG_IS_COPIED
        assert read_on(consumer, copy) == 4.0


@skip_without_simdev
@pytest.mark.parametrize("copy", [False, None])
def test_copy_false_or_none_shares_memory(copy):
    x = torch.ones(3, device="simdev:0")
    assert describe(x.__dlpack__(max_version=(1, 3), copy=copy))["tensor"][0] == x.data_ptr()


@skip_without_simdev
@pytest.mark.parametrize("kwargs,error,match", [
    (dict(dl_device=(1, 0), copy=False), ValueError, "to cpu without copying; pass copy=None or copy=True"),
    (dict(dl_device=(2, 0)), BufferError, "exported to kDLCPU .1. or kDLExtDev .12., not to DLPack device type 2"),
    (dict(dl_device=(12, 7)), ValueError, r"simdev has 2 device\(s\)"),
    (dict(dl_device=(1, 3)), ValueError, "the CPU is device 0"),
    (dict(dl_device="cpu"), TypeError, r"takes None or a \(device_type, device_id\) tuple"),
    (dict(max_version="1.0"), TypeError, r"takes None or a \(major, minor\) tuple of ints"),
    (dict(max_version=(1,)), TypeError, r"\(major, minor\)"),
    (dict(copy="yes"), TypeError, "takes None, True or False, got 'yes'"),
])
def test_bad_export_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        torch.ones(2, device="simdev:1").__dlpack__(**kwargs)


@skip_without_simdev
def test_what_dlpack_cannot_describe_is_a_buffer_error():
    with pytest.raises(BufferError, match="require gradient"):
        torch.ones(2, device="simdev:0", requires_grad=True).__dlpack__()
    z = torch.ones(2, dtype=torch.complex64).to("simdev:0").conj()
    with pytest.raises(BufferError, match="conjugate bit"):
        z.__dlpack__()


# ---------------------------------------------------------------- CPU tensors: torch's own behaviour

CPU_CALLS = [dict(zip(("stream", "max_version", "dl_device", "copy"), values)) for values in itertools.product(
    [-1, None, 0, 5], [None, (1, 0), (0, 8)], [None, (1, 0), (12, 0)], [None, True, False])]


def outcome(call):
    try:
        return ("capsule", describe(call()))
    except Exception as error:  # noqa: BLE001 - the comparison is the test
        return ("error", type(error), str(error))


@pytest.mark.parametrize("kwargs", CPU_CALLS, ids=str)
def test_cpu_tensors_behave_exactly_as_with_torch_alone(kwargs):
    x = torch.arange(6.0).reshape(2, 3)[:, 1:]
    assert _protocol.is_installed()
    ours = outcome(lambda: x.__dlpack__(**kwargs))
    torchs = outcome(lambda: _torch_dlpack_api.original_dlpack()(x, **kwargs))
    if ours[0] == torchs[0] == "capsule" and (kwargs["copy"] or kwargs["dl_device"] == (12, 0)):
        # Copies land at different addresses; everything else must agree.
        ours[1]["tensor"], torchs[1]["tensor"] = ours[1]["tensor"][1:], torchs[1]["tensor"][1:]
    assert ours == torchs
    assert x.__dlpack_device__() == _torch_dlpack_api.original_dlpack_device()(x)


@pytest.mark.parametrize("args,kwargs", [((), {"not_an_argument": True}), ((-1,), {})], ids=["keyword", "positional"])
def test_arguments_torch_does_not_take_are_torchs_errors_on_cpu(args, kwargs):
    x = torch.arange(3.0)
    assert outcome(lambda: x.__dlpack__(*args, **kwargs)) == \
        outcome(lambda: _torch_dlpack_api.original_dlpack()(x, *args, **kwargs))
    assert outcome(lambda: x.__dlpack__(*args, **kwargs))[1] is TypeError


@skip_without_simdev
@pytest.mark.parametrize("args,kwargs", [((), {"not_an_argument": True}), ((-1,), {})], ids=["keyword", "positional"])
def test_arguments_devbridge_does_not_implement_are_type_errors(args, kwargs):
    with pytest.raises(TypeError):
        torch.ones(2, device="simdev:0").__dlpack__(*args, **kwargs)


@skip_without_simdev
def test_read_only_is_taken_where_torchs_own_method_takes_it():
    # torch 2.14 added read_only= (DLPACK_FLAG_BITMASK_READ_ONLY); plugin
    # tensors take it exactly where torch's method does, with its errors.
    x, cpu = torch.ones(2, device="simdev:0"), torch.ones(2)
    if not _torch_dlpack_api.dlpack_takes_read_only():
        with pytest.raises(TypeError, match="read_only"):
            x.__dlpack__(read_only=True, max_version=(1, 3))
        return
    for kwargs in ({"read_only": True}, {"read_only": True, "max_version": (0, 8)}):
        ours, torchs = outcome(lambda: x.__dlpack__(**kwargs)), outcome(lambda: cpu.__dlpack__(**kwargs))
        assert ours[1] is torchs[1] is BufferError and "versioned" in ours[2]
    read_only_flag = 1 << 0  # DLPACK_FLAG_BITMASK_READ_ONLY
    for kwargs in ({"read_only": True}, {"read_only": True, "copy": True}):
        assert describe(x.__dlpack__(max_version=(1, 3), **kwargs))["flags"] & read_only_flag
        assert describe(cpu.__dlpack__(max_version=(1, 3), **kwargs))["flags"] & read_only_flag
    assert not describe(x.__dlpack__(max_version=(1, 3)))["flags"] & read_only_flag


@pytest.mark.parametrize("device", ["cpu"] + (["simdev:0"] if SIMDEV else []))
def test_torchs_read_only_wrapper_exports_with_devbridges_methods_installed(device):
    wrapper = getattr(torch.utils.dlpack, "ReadOnlyTensorWrapper", None)
    if wrapper is None:
        pytest.skip(f"torch {torch.__version__} has no ReadOnlyTensorWrapper (2.14 added it)")
    x = torch.arange(4.0, device=device)
    capsule = wrapper(x).__dlpack__()
    assert describe(capsule)["flags"] & 1  # DLPACK_FLAG_BITMASK_READ_ONLY
    assert torch.equal(torch.from_dlpack(capsule).cpu(), torch.arange(4.0))
    with pytest.raises(RuntimeError, match="only supports DLPack export"):
        wrapper(x) + 1


def test_cpu_round_trips_and_signature_unchanged():
    import inspect

    x = torch.arange(4.0)
    assert torch.from_dlpack(x).data_ptr() == x.data_ptr()
    assert inspect.signature(torch.Tensor.__dlpack__) == inspect.signature(_torch_dlpack_api.original_dlpack())
    assert torch.Tensor.__dlpack__.__doc__ == _torch_dlpack_api.original_dlpack().__doc__


def test_uninstall_gives_torch_its_own_methods_back():
    original = _torch_dlpack_api.original_dlpack()
    try:
        devbridge.uninstall()
        assert torch.Tensor.__dict__["__dlpack__"] is original
        assert not _protocol.is_installed()
        if SIMDEV:  # torch alone: the renamed backend's tensors are unknown to it
            with pytest.raises(ValueError, match="Unknown device type simdev"):
                torch.ones(2, device="simdev:0").__dlpack_device__()
    finally:
        devbridge.install()
    assert torch.Tensor.__dict__["__dlpack__"] is not original and _protocol.is_installed()


def test_an_unchecked_torch_is_refused_with_the_fix(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.99.0")
    with pytest.raises(RuntimeError, match=r"torch 2.99.0 is not a release devbridge was checked on \(torch 2.11, "
                       r".*DEVBRIDGE_ALLOW_UNCHECKED_VERSIONS=1.*python_protocol=False"):
        devbridge.install()
    devbridge.install(python_protocol=False)  # the C table alone still installs
    assert devbridge.is_installed() and not _protocol.is_installed()


@skip_without_simdev
def test_tensor_subclasses_see_the_call_in_torch_function():
    calls = []

    class Traced(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            calls.append(getattr(func, "__name__", str(func)))
            return super().__torch_function__(func, types, args, kwargs or {})

    x = torch.ones(3, device="simdev:0").as_subclass(Traced)
    assert x.__dlpack_device__() == (12, 0)
    torch.from_dlpack(x.__dlpack__(max_version=(1, 3)))
    assert "__dlpack_device__" in calls and "__dlpack__" in calls


# ---------------------------------------------------------------- the Ascend transition


@skip_without_simdev
def test_torch_from_dlpack_imports_the_ascend_type_when_accepted():
    devbridge.install(accept_ascend_device_type=True, export_ascend_device_type=True)
    assert torch.from_dlpack is not _torch_dlpack_api.original_from_dlpack()
    x = torch.arange(4.0, device="simdev:1")
    assert describe(x.__dlpack__(max_version=(1, 3)))["tensor"][1] == 21
    for source in (x, x.__dlpack__(max_version=(1, 3)), x.__dlpack__()):
        y = torch.from_dlpack(source)
        assert y.device == x.device and y.data_ptr() == x.data_ptr()
    assert torch.from_dlpack(x, device="cpu").tolist() == [0.0, 1.0, 2.0, 3.0]
    assert torch.from_dlpack(torch.arange(3)).tolist() == [0, 1, 2]  # CPU: torch's own path
    devbridge.install()
    assert torch.from_dlpack is _torch_dlpack_api.original_from_dlpack()


@skip_without_simdev
def test_exporting_21_without_accepting_it_names_the_option():
    devbridge.install(export_ascend_device_type=True)
    with pytest.raises(BufferError, match=r"accept_ascend_device_type=True"):
        torch.from_dlpack(torch.ones(2, device="simdev:0"))
