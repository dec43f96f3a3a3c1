"""devbridge's Python runtime API and its C runtime table (via ctypes)."""

import ctypes
import os
import subprocess
import sys
import threading

import pytest
import torch

import devbridge
from devbridge import _torch_version
from dlpack_devices import SIMDEV, skip_without_simdev

if SIMDEV:
    import torch_simdev

KDL_CPU, KDL_EXT_DEV = 1, 12

RESOLVER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int64,
                            ctypes.POINTER(ctypes.c_void_p))


class DevbridgeRuntimeAPI(ctypes.Structure):
    """Mirror of include/devbridge/c_runtime_api.h (major 1, minor 2)."""

    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("size", ctypes.c_size_t),
        ("device_count", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.POINTER(ctypes.c_int32))),
        ("get_current_device", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32,
                                                ctypes.POINTER(ctypes.c_int32))),
        ("set_current_device", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32)),
        ("current_stream", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32,
                                            ctypes.POINTER(ctypes.c_void_p))),
        ("get_submit_hook", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32,
                                             ctypes.POINTER(ctypes.c_void_p))),
        ("get_last_error", ctypes.CFUNCTYPE(ctypes.c_char_p)),
        ("synchronize_current_stream", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32,
                                                        ctypes.c_int32)),
        ("scratch_alloc", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32,
                                           ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p),
                                           ctypes.POINTER(ctypes.c_void_p))),
        ("scratch_free", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)),
        # minor 1
        ("wait_current_stream", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32,
                                                 ctypes.c_void_p)),
        # minor 2
        ("stream_capture_status", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p,
                                                   ctypes.POINTER(ctypes.c_int32))),
        ("check_submit_hook", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p)),
    ]


def runtime_table() -> DevbridgeRuntimeAPI:
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return DevbridgeRuntimeAPI.from_address(get(devbridge.runtime_api(), b"devbridge_runtime_api"))


def make_capsule(pointer, name: bytes):
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(pointer, name, None)


# ------------------------------------------------------------- package basics

def test_versions():
    assert devbridge.__version__ == "0.1.0"
    assert devbridge.built_with_torch == torch.__version__


def test_torch_version_mismatch_is_refused_with_the_fix(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "9.9.9")
    with pytest.raises(ImportError) as info:
        _torch_version.load_extension()
    assert str(info.value) == (
        f"devbridge was built against torch {devbridge.built_with_torch} but torch 9.9.9 is "
        "imported; rebuild devbridge: pip install --no-build-isolation --force-reinstall "
        "<path to the devbridge source>")


def test_built_with_version_is_readable_without_loading_the_module():
    package_dir = os.path.dirname(devbridge.__file__)
    assert _torch_version.built_with_from_binary(__import__("pathlib").Path(package_dir)) == \
        devbridge.built_with_torch


@skip_without_simdev
def test_plugin_name():
    assert devbridge.plugin_name() == "simdev"


def test_plugin_name_is_none_without_a_plugin():
    script = "import devbridge; assert devbridge.plugin_name() is None; " \
             "assert devbridge.device_count('privateuseone') == 0"
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr


# ------------------------------------------------------------- devices, streams

def test_cpu():
    assert devbridge.device_count("cpu") == 1
    assert devbridge.current_stream("cpu") == 0
    assert devbridge.current_stream(torch.device("cpu")) == 0


@skip_without_simdev
def test_plugin_device_count_by_any_name():
    assert devbridge.device_count("simdev") == 2
    assert devbridge.device_count("privateuseone") == 2
    assert devbridge.device_count(torch.device("simdev")) == 2


@skip_without_simdev
def test_current_stream_follows_torch():
    default = torch.accelerator.current_stream().native_handle
    assert devbridge.current_stream() == default
    side = torch.Stream(device="simdev:1")
    with side:
        assert devbridge.current_stream("simdev:1") == side.native_handle
        # With no index: the current device, which `with side` made simdev:1.
        assert devbridge.current_stream("simdev") == side.native_handle
        assert devbridge.current_stream() == side.native_handle
    assert devbridge.current_stream("simdev:1") != side.native_handle
    # simdev's autoload registered its fast query; without it, the guard answers.
    assert devbridge._C.native_stream_source("simdev", 0) == "current-stream-query"
    devbridge.register_current_stream_query(None, "simdev")
    try:
        assert devbridge._C.native_stream_source("simdev", 0) == "guard"
        with side:
            assert devbridge.current_stream("simdev:1") == side.native_handle
    finally:
        devbridge.register_current_stream_query(torch_simdev._C.current_stream_query(), "simdev")


@skip_without_simdev
def test_bad_device_index():
    with pytest.raises(ValueError, match=r"device index 4 is out of range for simdev, which has 2"):
        devbridge.current_stream("simdev:4")


def test_bad_device_arguments():
    with pytest.raises(TypeError, match="expected a device"):
        devbridge.current_stream(3)
    with pytest.raises(TypeError, match="expected a device type name"):
        devbridge.device_count(None)
    with pytest.raises(RuntimeError):
        devbridge.current_stream("not_a_device")


# ------------------------------------------------------------- resolvers

@pytest.fixture
def cpu_resolver_cleanup():
    yield
    devbridge.unregister_stream_resolver("cpu")


def test_python_callable_resolver(cpu_resolver_cleanup):
    """CPU's guard has no native handle, like an older plugin: a resolver answers."""
    calls = []

    def resolver(device_index, stream_id):
        calls.append((device_index, stream_id))
        return 0xfeed

    devbridge.register_stream_resolver(resolver, device_type="cpu")
    assert devbridge.current_stream("cpu") == 0xfeed
    assert devbridge._C.native_stream_source("cpu", 0) == "resolver"
    assert len(calls) == 1
    devbridge.unregister_stream_resolver("cpu")
    assert devbridge.current_stream("cpu") == 0


def test_python_resolver_called_from_a_thread_without_the_gil(cpu_resolver_cleanup):
    devbridge.register_stream_resolver(lambda index, stream_id: 0x1234, device_type="cpu")
    table = runtime_table()
    result = {}

    def worker():
        out = ctypes.c_void_p()
        result["rc"] = table.current_stream(KDL_CPU, 0, ctypes.byref(out))
        result["stream"] = out.value

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert result == {"rc": 0, "stream": 0x1234}


def test_c_function_resolver_from_a_capsule(cpu_resolver_cleanup):
    @RESOLVER
    def c_resolver(device_index, stream_id, out):
        out[0] = 0xc0ffee
        return 0

    capsule = make_capsule(ctypes.cast(c_resolver, ctypes.c_void_p), b"devbridge_stream_resolver")
    devbridge.register_stream_resolver(capsule, device_type="cpu")
    assert devbridge.current_stream("cpu") == 0xc0ffee


def test_failing_resolvers_are_reported(cpu_resolver_cleanup):
    devbridge.register_stream_resolver(lambda index, stream_id: "not an int", device_type="cpu")
    with pytest.raises(RuntimeError, match=r"resolver registered for cpu \(Python callable .*\) "
                                           r"failed for device 0.*TypeError"):
        devbridge.current_stream("cpu")

    @RESOLVER
    def failing(device_index, stream_id, out):
        return -1

    devbridge.register_stream_resolver(
        make_capsule(ctypes.cast(failing, ctypes.c_void_p), b"devbridge_stream_resolver"), "cpu")
    with pytest.raises(RuntimeError, match="C function from a devbridge_stream_resolver capsule"):
        devbridge.current_stream("cpu")


def test_bad_resolvers_are_rejected():
    with pytest.raises(TypeError, match="must be a callable"):
        devbridge.register_stream_resolver(42, device_type="cpu")
    wrong_name = make_capsule(ctypes.c_void_p(1), b"something_else")
    with pytest.raises(ValueError, match="named 'devbridge_stream_resolver', got one named "
                                         "'something_else'"):
        devbridge.register_stream_resolver(wrong_name, device_type="cpu")
    assert devbridge.current_stream("cpu") == 0


# ------------------------------------------------------------- the C runtime table

def test_runtime_table_header():
    table = runtime_table()
    assert (table.major, table.minor) == (1, 2)
    assert table.size == ctypes.sizeof(DevbridgeRuntimeAPI)


def test_runtime_table_cpu_and_errors():
    table = runtime_table()
    count = ctypes.c_int32()
    assert table.device_count(KDL_CPU, ctypes.byref(count)) == 0 and count.value == 1
    assert table.device_count(99, ctypes.byref(count)) == -1
    assert b"unknown (99)" in table.get_last_error()
    assert table.device_count(KDL_CPU, None) == -1
    assert b"out_count is NULL" in table.get_last_error()
    assert table.synchronize_current_stream(KDL_CPU, 0) == 0


@skip_without_simdev
def test_runtime_table_on_the_plugin():
    table = runtime_table()
    count, device = ctypes.c_int32(), ctypes.c_int32()
    assert table.device_count(KDL_EXT_DEV, ctypes.byref(count)) == 0 and count.value == 2
    side = torch.Stream(device="simdev:1")
    with side:
        assert table.get_current_device(KDL_EXT_DEV, ctypes.byref(device)) == 0
        assert device.value == 1
        stream = ctypes.c_void_p()
        assert table.current_stream(KDL_EXT_DEV, 1, ctypes.byref(stream)) == 0
        assert stream.value == side.native_handle
        pointer, token = ctypes.c_void_p(), ctypes.c_void_p()
        assert table.scratch_alloc(KDL_EXT_DEV, 1, 4096, ctypes.byref(pointer), ctypes.byref(token)) == 0
        assert pointer.value and token.value
        assert table.synchronize_current_stream(KDL_EXT_DEV, 1) == 0
        assert table.scratch_free(token) == 0
    original = torch.accelerator.current_device_index()
    try:
        assert table.set_current_device(KDL_EXT_DEV, 1) == 0
        assert torch.accelerator.current_device_index() == 1
    finally:
        torch.accelerator.set_device_index(original)
    assert table.set_current_device(KDL_EXT_DEV, 9) == -1
    assert b"device index 9 is out of range for simdev" in table.get_last_error()


@pytest.mark.skipif(not SIMDEV, reason="torch_simdev is not installed")
def test_scratch_memory_is_usable_by_work_on_the_stream():
    """Scratch from the runtime table, wrapped as a tensor, holds data written
    by an operator queued on the current stream."""
    table = runtime_table()
    pointer, token = ctypes.c_void_p(), ctypes.c_void_p()
    assert table.scratch_alloc(KDL_EXT_DEV, 0, 16 * 4, ctypes.byref(pointer), ctypes.byref(token)) == 0
    from devbridge import dlpack_ctypes as dl

    keep = torch.empty(0)
    managed = dl.CountedManagedTensor(data=pointer.value, shape=(16,), strides=(1,),
                                      dtype=(dl.KDL_FLOAT, 32, 1), device_type=dl.KDL_EXT_DEV,
                                      device_id=0, keep=keep)
    view = dl.Table(devbridge.exchange_api()).to_py(managed.pointer)
    view.copy_(torch.arange(16.0))
    assert torch.equal(view.cpu(), torch.arange(16.0))
    del view
    assert table.scratch_free(token) == 0


def test_submit_hook_registration_reaches_the_runtime_table():
    hook_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p,
                                 ctypes.c_void_p, ctypes.c_void_p)

    @hook_type
    def submit(device_type, device_id, stream, run, context):
        return 0

    address = ctypes.cast(submit, ctypes.c_void_p).value
    table = runtime_table()
    found = ctypes.c_void_p()
    devbridge._C._register_submit_hook(make_capsule(address, b"devbridge_submit_hook"), "cpu")
    try:
        assert table.get_submit_hook(KDL_CPU, ctypes.byref(found)) == 0
        assert found.value == address
    finally:
        devbridge._C._register_submit_hook(None, "cpu")
    assert table.get_submit_hook(KDL_CPU, ctypes.byref(found)) == 0
    assert found.value is None
    with pytest.raises(ValueError, match="devbridge_submit_hook"):
        devbridge._C._register_submit_hook(make_capsule(address, b"wrong"), "cpu")


@skip_without_simdev
def test_install_from_the_plugins_autoload_during_import_devbridge():
    """`import devbridge` first imports torch, whose autoload runs simdev's hook,
    which calls devbridge.install() on the half-imported package: the table
    must still end up installed."""
    script = ("import devbridge, torch, sys; "
              "sys.exit(0 if devbridge.is_installed() else 1)")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr


@skip_without_simdev
def test_wait_current_stream_orders_a_consumer_stream():
    """A C consumer's stream waits for the producer's current stream (delay on:
    without the wait, the consumer's read lands before the producer's write)."""
    table = runtime_table()
    x = torch.zeros(1 << 12, device="simdev:0")
    torch.simdev.synchronize(0)
    producer, consumer = torch.Stream(device="simdev:0"), torch.Stream(device="simdev:0")
    seen = {}
    torch.simdev.set_op_delay_us(20_000)
    try:
        for wait in (True, False):
            with producer:
                x.fill_(1.0)
                x.add_(1.0)
                x.add_(1.0)
                if wait:
                    assert table.wait_current_stream(KDL_EXT_DEV, 0, consumer.native_handle) == 0, \
                        table.get_last_error()
            with consumer:  # the clone and its read-back, both on the consumer's stream
                seen[wait] = float(x.clone().cpu().min())
            producer.synchronize()
            with producer:
                x.zero_()
            producer.synchronize()
    finally:
        torch.simdev.set_op_delay_us(0)
    assert seen[True] == 3.0 and seen[False] != 3.0


@skip_without_simdev
def test_wait_current_stream_failures_are_codes_and_messages():
    table = runtime_table()
    assert table.wait_current_stream(KDL_EXT_DEV, 0, 0xDEADBEEF) == -1
    assert b"0xdeadbeef is not a stream of simdev:0" in table.get_last_error()
    assert table.wait_current_stream(KDL_CPU, 0, None) == 0
    assert table.wait_current_stream(KDL_CPU, 0, 0x10) == -1
    assert b"no streams" in table.get_last_error()
