"""devbridge.triton.policy: the registry of Triton host-runtime policies, how
the active one is chosen, and the generic `torch_plugin` policy on simdev,
including proof that it imports no vendor module."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import uuid

import pytest
import torch

import devbridge
from devbridge.triton import policy, torch_plugin

from launch_support import skip_without_simdev


def fresh(prefix="test"):
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture(autouse=True)
def clean_selection(monkeypatch):
    for variable in policy.ENVIRONMENT:
        monkeypatch.delenv(variable, raising=False)
    policy.select(None)
    yield
    policy.select(None)


# ---------------------------------------------------------------- registry


def test_register_as_decorator_and_as_call():
    category = fresh()

    @policy.register(category, "get_current_device")
    def current():
        return 7

    assert current() == 7  # the decorator returns the function unchanged
    policy.register(category, "get_current_stream", lambda device=None: 1234)
    assert policy.methods(category) == ["get_current_device", "get_current_stream"]
    assert category in policy.categories()
    assert policy.execute(category, "get_current_device") == 7
    assert policy.execute(category, "get_current_stream", 0) == 1234


def test_a_duplicate_registration_is_an_error():
    category = fresh()
    policy.register(category, "m", lambda: 1)
    with pytest.raises(ValueError, match=rf"policy method {category}.m is already registered"):
        policy.register(category, "m", lambda: 2)
    assert policy.execute(category, "m") == 1


def test_bad_registrations_and_lookups_name_the_problem():
    with pytest.raises(ValueError, match="needs a category and a method name"):
        policy.register("", "m", lambda: 1)
    with pytest.raises(TypeError, match="must be callable"):
        policy.register(fresh(), "m", 42)
    with pytest.raises(ValueError, match=r"no Triton host-runtime policy is registered as 'nope'; registered: .*"
                                         r"torch_plugin"):
        policy.execute("nope", "get_current_device")
    category = fresh()
    policy.register(category, "a", lambda: 1)
    with pytest.raises(ValueError, match=rf"policy '{category}' has no method 'b'; it has: a"):
        policy.execute(category, "b")


def test_the_default_policy_is_torch_plugin():
    assert policy.active() == "torch_plugin"
    # FlagTree's runtime method names (the contract its backends call) and two of devbridge's
    names = {"get_current_device", "set_current_device", "get_current_stream", "get_device_interface",
             "get_empty_tensor", "get_tensor_params_shape", "version_hash", "allocate_memory",
             "allocate_sync_block_lock", "pre_launch", "async_launch", "get_active_torch_device", "device_name"}
    assert set(torch_plugin.METHODS) == names
    assert set(policy.methods("torch_plugin")) >= names
    for name, function in torch_plugin.METHODS.items():
        assert policy.lookup("torch_plugin", name) is function


def test_selection_order_select_then_devbridge_variable_then_triton_backend(monkeypatch):
    a, b, c = fresh("a"), fresh("b"), fresh("c")
    for name in (a, b, c):
        policy.register(name, "device_name", lambda name=name: name)
    monkeypatch.setenv("TRITON_BACKEND", c)
    assert policy.active() == c
    monkeypatch.setenv("DEVBRIDGE_TRITON_POLICY", b)
    assert policy.active() == b
    policy.select(a)
    assert policy.active() == a
    assert policy.call("device_name") == a
    policy.select(b)  # a later select takes effect: nothing is frozen
    assert policy.call("device_name") == b
    policy.select(None)
    assert policy.active() == b


def test_an_unknown_name_lists_the_registered_policies(monkeypatch):
    with pytest.raises(ValueError, match="registered: .*torch_plugin"):
        policy.select("torch_npu_please")
    monkeypatch.setenv("TRITON_BACKEND", "torch_npu")
    with pytest.raises(ValueError, match=r"'torch_npu'; registered: .*torch_plugin.* \(asked for by the "
                                         r"environment variable TRITON_BACKEND\)"):
        policy.active()


def test_registration_is_thread_safe():
    category = fresh()
    errors = []

    def add(i):
        try:
            policy.register(category, f"m{i}", lambda i=i: i)
        except Exception as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=add, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(policy.methods(category)) == 32


def test_the_registry_registers_the_torch_plugin_table_and_imports_no_triton():
    """In a fresh interpreter: the builtin table is registered at the first
    question (also when the first thing is a registration under its name,
    which then meets devbridge's own methods), and selecting, registering and
    configuring import no Triton (no driver exists before Triton does)."""
    script = textwrap.dedent("""
        import sys
        from devbridge.triton import policy
        try:
            policy.register("torch_plugin", "get_current_device", lambda: 5)
        except ValueError as error:
            assert "torch_plugin.get_current_device is already registered" in str(error), error
        else:
            raise AssertionError("registered over devbridge's own method")
        from devbridge.triton import torch_plugin
        assert policy.methods("torch_plugin") == sorted(torch_plugin.METHODS)
        assert policy.lookup("torch_plugin", "get_current_stream") is torch_plugin.get_current_stream
        policy.register("mine", "get_current_device", lambda: 1)
        policy.select("mine")
        policy.select(None)
        torch_plugin.configure(device_name=None)
        assert "triton" not in sys.modules, "the registry imported Triton"
        print("registry ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "registry ok" in done.stdout


# ---------------------------------------------------------------- torch_plugin on simdev


@skip_without_simdev
def test_device_and_stream_follow_the_calling_thread():
    assert policy.call("device_name") == "simdev"
    results = {}

    def on(index):
        torch.accelerator.set_device_index(index)
        stream = torch.Stream(device=f"simdev:{index}")
        with stream:
            results[index] = (policy.call("get_current_device"), policy.call("get_current_stream"),
                              stream.native_handle, policy.call("get_current_stream", 1 - index),
                              torch.accelerator.current_stream(1 - index).native_handle,
                              policy.call("get_active_torch_device"))

    threads = [threading.Thread(target=on, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for index, (device, stream, expected, other, other_expected, torch_device) in results.items():
        assert device == index
        assert stream == expected
        assert other == other_expected
        assert torch_device == torch.device("simdev", index)
    assert policy.call("get_current_device") == 0  # this thread is untouched


@skip_without_simdev
def test_set_current_device_is_per_thread():
    seen = []

    def other():
        seen.append(policy.call("get_current_device"))

    policy.call("set_current_device", 1)
    try:
        assert torch.accelerator.current_device_index() == 1
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert seen == [0]
    finally:
        policy.call("set_current_device", 0)


@skip_without_simdev
def test_the_device_interface_times_work_with_events():
    interface = policy.call("get_device_interface")
    start, end = interface.Event(enable_timing=True), interface.Event(enable_timing=True)
    x = torch.ones(1 << 16, device="simdev")
    start.record()
    torch.simdev.set_op_delay_us(20_000)  # read by the worker when the add starts
    try:
        x.add_(1)
        end.record()
        interface.synchronize()
    finally:
        torch.simdev.set_op_delay_us(0)
    assert end.query() and start.elapsed_time(end) >= 15.0
    assert interface.device_count() == torch.accelerator.device_count()


@skip_without_simdev
def test_empty_tensor_and_tensor_shapes():
    buffer = policy.call("get_empty_tensor", 1024)
    assert buffer.dtype == torch.int32 and buffer.device == torch.device("simdev", 0) and buffer.numel() == 1024
    buffer.zero_()

    class Duck:
        shape = (2, 3)

        def data_ptr(self):
            return 0

    shapes = policy.call("get_tensor_params_shape", torch.ones(4, 5), 3, "x", Duck(), None)
    assert shapes == [[4, 5], [2, 3]]


@skip_without_simdev
def test_version_hash_covers_what_a_launch_depends_on():
    parts = policy.call("version_hash")
    text = " ".join(parts)
    assert torch.__version__ in text and devbridge.__version__ in text and "simdev" in text
    assert any(part.startswith("triton ") for part in parts)
    assert any(part.startswith("kernel runtime ") for part in parts)


@skip_without_simdev
def test_workspace_is_on_the_current_device_and_the_launch_stream():
    block = policy.call("allocate_memory", 4096)
    assert block.device == torch.device("simdev", 0) and block.numel() == 4096 and block.dtype == torch.uint8
    side = torch.Stream(device="simdev:0")
    with pytest.raises(ValueError, match=r"workspace is allocated by the simdev allocator on the current stream"):
        policy.call("allocate_memory", 64, side.native_handle)
    block = policy.call("allocate_memory", 64, side)  # a torch.Stream is recorded on the block
    assert block.numel() == 64
    with side:
        assert policy.call("allocate_memory", 64, side.native_handle).numel() == 64


@skip_without_simdev
@pytest.mark.parametrize("init", [0, 1, -7, 123456])
def test_the_sync_lock_is_initialised_in_stream_order(init):
    side = torch.Stream(device="simdev:0")
    with side:
        torch.simdev.set_op_delay_us(20_000)
        try:
            lock = policy.call("allocate_sync_block_lock", 16, init)
            assert not side.query(), "the lock was written from the host, not queued on the stream"
        finally:
            torch.simdev.set_op_delay_us(0)
        values = lock.cpu()  # on the same stream: ordered after the fill
    assert values.tolist() == [init] * 16


@skip_without_simdev
def test_pre_launch_binds_the_device_and_async_launch_calls_the_launcher():
    try:
        policy.call("pre_launch", 1)
        assert torch.accelerator.current_device_index() == 1
        policy.call("pre_launch", 1)
    finally:
        policy.call("pre_launch", 0)
    calls = []
    assert policy.call("async_launch", lambda *a: calls.append(a) or "done", 1, 2) == "done"
    assert calls == [(1, 2)]


@skip_without_simdev
def test_the_device_name_is_a_parameter(monkeypatch):
    torch_plugin.configure(device_name="otherdev")
    try:
        assert policy.call("device_name") == "otherdev"
        monkeypatch.setenv("DEVBRIDGE_TRITON_DEVICE", "envdev")
        torch_plugin.configure(device_name=None)  # the environment is read again
        assert policy.call("device_name") == "envdev"
    finally:
        monkeypatch.delenv("DEVBRIDGE_TRITON_DEVICE")
        torch_plugin.configure(device_name=None)
    assert policy.call("device_name") == "simdev"


# ---------------------------------------------------------------- no vendor import

GUARDED = textwrap.dedent(r"""
    import builtins, importlib, sys
    import torch, triton  # torch's autoload loads the plugin before the guard
    ALLOWED = {"torch", "devbridge", "triton"} | set(sys.stdlib_module_names)
    refused = []
    real_import, real_import_module = builtins.__import__, importlib.import_module

    def from_devbridge(frame):
        # The module that asked for the import (skipping importlib's own frames).
        while frame is not None and frame.f_globals.get("__name__", "").startswith("importlib"):
            frame = frame.f_back
        return frame is not None and frame.f_globals.get("__name__", "").startswith("devbridge")

    def check(name, importer):
        top = name.split(".")[0]
        if top and top not in ALLOWED and from_devbridge(importer):
            refused.append(name)
            raise ImportError(f"import guard: devbridge imported {name!r}")

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0:
            check(name, sys._getframe(1))
        return real_import(name, globals, locals, fromlist, level)

    def guarded_import_module(name, package=None):
        if not name.startswith("."):
            check(name, sys._getframe(1))
        return real_import_module(name, package)

    builtins.__import__, importlib.import_module = guarded_import, guarded_import_module
    import devbridge.triton
    from devbridge.triton import policy
    for method in ("device_name", "get_current_device", "get_current_stream", "get_active_torch_device",
                   "get_device_interface", "version_hash", "get_tensor_params_shape"):
        policy.call(method)
    policy.call("set_current_device", 0)
    policy.call("get_empty_tensor", 16)
    policy.call("allocate_memory", 16)
    policy.call("allocate_sync_block_lock", 4, 3)
    policy.call("pre_launch", 0)
    policy.call("async_launch", lambda: None)
    interface = policy.call("get_device_interface")
    interface.synchronize(); interface.Event(enable_timing=True).record()
    print("guarded ok", sorted(set(refused)))
""")


@skip_without_simdev
def test_the_policy_imports_no_vendor_module():
    """Every torch_plugin method runs with imports from devbridge limited to
    torch, devbridge, triton and the standard library."""
    done = subprocess.run([sys.executable, "-c", GUARDED], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "guarded ok []" in done.stdout


def test_the_import_guard_can_fail():
    """The guard really refuses: a devbridge-named module importing a vendor module fails."""
    script = GUARDED.split("import devbridge.triton")[0] + textwrap.dedent("""
        import types
        module = types.ModuleType("devbridge.fake_vendor_user")
        exec("import numpy", module.__dict__)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "import guard: devbridge imported 'numpy'" in done.stderr
