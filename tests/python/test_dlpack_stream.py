"""current_work_stream: the consumer's launch stream for each device type."""

import ctypes
import threading

import pytest
import torch

import devbridge
from devbridge import dlpack_ctypes as dl
from dlpack_devices import SIMDEV, skip_without_simdev

OURS = dl.Table(devbridge.exchange_api())
PYTORCH = dl.Table(devbridge.torch_exchange_api())


@pytest.fixture(autouse=True, params=["current-stream-query", "guard"])
def route(request):
    """Every test twice on simdev: through the plugin's fast current-stream
    query (registered by its autoload) and through the guard's getStream +
    getStreamNativeHandle (the generic c10 path)."""
    if not SIMDEV:
        yield request.param
        return
    import torch_simdev

    if request.param == "guard":
        devbridge.register_current_stream_query(None, "simdev")
    try:
        assert devbridge._C.native_stream_source("simdev", 0) == request.param
        yield request.param
    finally:
        devbridge.register_current_stream_query(torch_simdev._C.current_stream_query(), "simdev")


def test_cpu_is_null():
    assert OURS.current_stream(dl.KDL_CPU, 0) == 0
    assert OURS.current_stream(dl.KDL_CUDA_HOST, 0) == 0


def test_null_out_pointer_raises():
    with pytest.raises(ValueError, match="out_current_stream == NULL"):
        OURS.current_stream_raw(dl.KDL_CPU, 0, None)


@skip_without_simdev
def test_default_stream_of_each_plugin_device():
    for index in range(devbridge.device_count("simdev")):
        device = torch.device("simdev", index)
        expected = torch.accelerator.current_stream(device).native_handle
        assert expected != 0
        assert OURS.current_stream(dl.KDL_EXT_DEV, index) == expected


@skip_without_simdev
def test_follows_the_stream_made_current_with_torch_stream():
    side = torch.Stream(device="simdev:1")
    default_1 = torch.accelerator.current_stream(torch.device("simdev:1")).native_handle
    default_0 = OURS.current_stream(dl.KDL_EXT_DEV, 0)
    with side:
        assert OURS.current_stream(dl.KDL_EXT_DEV, 1) == side.native_handle
        assert side.native_handle != default_1
        # Only device 1's current stream changed.
        assert OURS.current_stream(dl.KDL_EXT_DEV, 0) == default_0
    assert OURS.current_stream(dl.KDL_EXT_DEV, 1) == default_1


@skip_without_simdev
def test_current_stream_is_per_thread_and_works_without_the_gil():
    side = torch.Stream(device="simdev:0")
    seen = {}

    def other_thread():
        out = ctypes.c_void_p()
        seen["rc"] = OURS.current_stream_nogil(dl.KDL_EXT_DEV, 0, ctypes.byref(out))
        seen["stream"] = out.value or 0

    with side:
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        assert OURS.current_stream(dl.KDL_EXT_DEV, 0) == side.native_handle
    assert seen["rc"] == 0
    assert seen["stream"] == torch.accelerator.current_stream(torch.device("simdev:0")).native_handle


@skip_without_simdev
def test_ascend_type_answers_for_the_plugin_only_in_transition_mode():
    options = devbridge._C._get_options()
    side = torch.Stream(device="simdev:1")
    with side:
        # Not ours without transition mode: PyTorch's table answers (NULL).
        assert OURS.current_stream(dl.KDL_ASCEND, 1) == PYTORCH.current_stream(dl.KDL_ASCEND, 1)
        try:
            devbridge.install(accept_ascend_device_type=True)
            assert OURS.current_stream(dl.KDL_ASCEND, 1) == side.native_handle
        finally:
            devbridge.install(**options)


@skip_without_simdev
def test_bad_plugin_device_id_raises():
    with pytest.raises(ValueError, match=r"device index 5 is out of range for simdev, which has 2"):
        OURS.current_stream(dl.KDL_EXT_DEV, 5)
    with pytest.raises(ValueError, match="device_id -1 is out of range"):
        OURS.current_stream(dl.KDL_EXT_DEV, -1)


@skip_without_simdev
def test_resolver_takes_precedence_for_the_plugin():
    calls = []

    def resolver(device_index, stream_id):
        calls.append((device_index, stream_id))
        return 0x7000 + device_index

    devbridge.register_stream_resolver(resolver, "simdev")
    try:
        assert OURS.current_stream(dl.KDL_EXT_DEV, 1) == 0x7001
        stream = torch.accelerator.current_stream(torch.device("simdev:1"))
        assert calls == [(1, stream.stream_id)]
    finally:
        devbridge.unregister_stream_resolver("simdev")
    assert OURS.current_stream(dl.KDL_EXT_DEV, 1) == stream.native_handle


@skip_without_simdev
def test_failing_python_resolver_is_reported():
    def resolver(device_index, stream_id):
        raise LookupError("no such stream in my table")

    devbridge.register_stream_resolver(resolver, "simdev")
    try:
        with pytest.raises(RuntimeError, match="resolver registered for simdev.*LookupError"):
            OURS.current_stream(dl.KDL_EXT_DEV, 0)
    finally:
        devbridge.unregister_stream_resolver("simdev")


@skip_without_simdev
@pytest.mark.parametrize("other,current", [(1, 0), (0, 1)])
def test_non_current_device_reports_its_own_live_stream(other, current):
    # The device-index bug class: a stream looked up on the current device
    # instead of the asked one. Make a non-default stream current on `other`,
    # then make `current` the thread's device: each index must still answer
    # its own stream.
    saved = torch.accelerator.current_device_index()
    side = torch.Stream(device=f"simdev:{other}")
    previous = torch.accelerator.current_stream(torch.device("simdev", other))
    try:
        torch.accelerator.set_stream(side)  # also moves the thread to `other`
        torch.accelerator.set_device_index(current)
        assert torch.accelerator.current_device_index() == current
        assert OURS.current_stream(dl.KDL_EXT_DEV, other) == side.native_handle
        own = torch.accelerator.current_stream(torch.device("simdev", current)).native_handle
        assert OURS.current_stream(dl.KDL_EXT_DEV, current) == own != side.native_handle
    finally:
        torch.accelerator.set_stream(previous)
        torch.accelerator.set_device_index(saved)


# ---------------------------------------------------------------- registering hooks

QUERY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))


def capsule(function, name: bytes):
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.cast(function, ctypes.c_void_p), name, None)


@skip_without_simdev
def test_a_registered_query_answers_and_a_failing_one_names_the_fix(route):
    @QUERY
    def query(device_index, out):
        out[0] = 0x5000 + device_index
        return 0

    @QUERY
    def failing(device_index, out):
        return -1

    devbridge.register_current_stream_query(capsule(query, b"devbridge_current_stream"), "simdev")
    assert OURS.current_stream(dl.KDL_EXT_DEV, 1) == 0x5001
    assert devbridge.current_stream("simdev:0") == 0x5000
    devbridge.register_current_stream_query(capsule(failing, b"devbridge_current_stream"), "simdev")
    with pytest.raises(RuntimeError, match=r"current-stream query registered for simdev .* failed for "
                                           r"device 1.*register_current_stream_query\(None, 'simdev'\)"):
        OURS.current_stream(dl.KDL_EXT_DEV, 1)


def test_bad_hook_registrations_are_refused():
    with pytest.raises(TypeError, match="must be a PyCapsule named 'devbridge_current_stream'"):
        devbridge.register_current_stream_query(lambda index: 0, "cpu")
    with pytest.raises(TypeError, match="must be a PyCapsule named 'devbridge_external_stream'"):
        devbridge.register_external_stream_hook(42, "cpu")
    wrong = capsule(QUERY(lambda index, out: 0), b"devbridge_stream_resolver")
    with pytest.raises(ValueError, match="named 'devbridge_current_stream', got one named "
                                         "'devbridge_stream_resolver'"):
        devbridge.register_current_stream_query(wrong, "cpu")
    with pytest.raises(RuntimeError, match="devbridge: 'no_such_device' is"):  # devbridge's, naming the plugin
        devbridge.register_external_stream_hook(None, "no_such_device")
