"""devbridge's Triton backend: discovery through the real `triton.backends`
entry point, activate/deactivate, the driver's answers on simdev, and the
compiler's target claim and delegation to the hardware's own compiler."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest
import torch

triton = pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

import devbridge  # noqa: E402
import devbridge.triton  # noqa: E402
from devbridge import _triton_api  # noqa: E402
from devbridge.triton.backend.compiler import DevbridgeBackend  # noqa: E402
from devbridge.triton.backend.driver import DevbridgeDriver, PluginDeviceIndex  # noqa: E402

from launch_support import declare_before_the_rename, simdev_kernels, skip_without_simdev  # noqa: E402


@pytest.fixture
def inactive():
    """Each test starts and ends with devbridge's driver not active, and with
    Triton's lazy default (a torch.compile earlier in the process may have made
    a driver active)."""
    while devbridge.triton.is_active():
        devbridge.triton.deactivate()
    previous = _triton_api.active_driver_or_none()
    _triton_api.restore_active_driver(None)
    yield
    while devbridge.triton.is_active():
        devbridge.triton.deactivate()
    _triton_api.restore_active_driver(previous)


@pytest.fixture
def simdev_hardware():
    import torch_simdev

    before = devbridge.triton.declared("simdev")
    devbridge.triton.declare_hardware("simdev", compiler="interpreter",
                                      kernel_runtime="simdev:" + torch_simdev.runtime_library_path())
    yield
    if before is not None:
        devbridge.triton.declare_hardware("simdev", compiler=before.compiler, kernel_runtime=before.kernel_runtime)


# ---------------------------------------------------------------- discovery


def test_triton_discovers_the_backend_through_its_entry_point_in_a_fresh_interpreter():
    script = textwrap.dedent("""
        import triton
        from triton.backends import backends
        from devbridge.triton.backend.compiler import DevbridgeBackend
        from devbridge.triton.backend.driver import DevbridgeDriver
        b = backends["devbridge"]
        assert b.compiler is DevbridgeBackend and b.driver is DevbridgeDriver, b
        assert "nvidia" in backends  # Triton's own backends are untouched
        print("discovered", sorted(backends))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "discovered" in done.stdout and "devbridge" in done.stdout


def test_there_is_one_driver_however_it_is_created():
    # Triton creates its default driver by calling the class, Inductor's
    # set_driver_to_gpu() calls it again: all are devbridge.triton.driver().
    assert DevbridgeDriver() is DevbridgeDriver() is devbridge.triton.driver()


# ---------------------------------------------------------------- activation


def test_activate_makes_it_the_active_driver_and_calls_nest(inactive):
    from triton.runtime import driver as config

    ours = devbridge.triton.activate()
    assert isinstance(ours, DevbridgeDriver)
    assert config.active is ours
    assert devbridge.triton.activate() is ours  # again: the same driver, still active
    devbridge.triton.deactivate()  # undoes the inner activate()
    assert config.active is ours
    devbridge.triton.deactivate()
    assert not devbridge.triton.is_active()
    assert _triton_api.active_driver_or_none() is None  # Triton's lazy default is back


def test_an_inner_context_leaves_the_outer_one_active(inactive):
    with devbridge.triton.activate():
        with devbridge.triton.activate():
            pass
        assert devbridge.triton.is_active()
    assert not devbridge.triton.is_active()


def test_deactivate_restores_the_previous_driver(inactive):
    from triton.runtime import driver as config

    previous = object()  # any driver set active beforehand
    config.set_active(previous)
    devbridge.triton.activate()
    assert config.active is devbridge.triton.driver()
    devbridge.triton.deactivate()
    assert config.active is previous
    devbridge.triton.deactivate()  # not active: nothing to do
    assert config.active is previous


def test_both_work_as_context_managers(inactive):
    with devbridge.triton.activate() as driver:
        assert devbridge.triton.is_active() and driver is devbridge.triton.driver()
        with devbridge.triton.deactivate():
            assert not devbridge.triton.is_active()
        assert devbridge.triton.is_active()
    assert not devbridge.triton.is_active()


def test_an_unchecked_triton_version_is_refused(monkeypatch):
    monkeypatch.setattr(triton, "__version__", "9.1.0")
    with pytest.raises(RuntimeError, match=r"Triton driver: Triton 9.1.0 is not a release devbridge was checked on "
                                           r"\(torch .*; Triton 3.6, 3.7, 3.8\).*DEVBRIDGE_ALLOW_UNCHECKED_VERSIONS=1"):
        _triton_api.check_version()


# ---------------------------------------------------------------- the driver's answers


@skip_without_simdev
def test_device_stream_and_target_per_thread_and_device(inactive, simdev_hardware):
    driver = devbridge.triton.activate()
    answers = {}

    def on(index):
        torch.accelerator.set_device_index(index)
        stream = torch.Stream(device=f"simdev:{index}")
        with stream:
            device = driver.get_current_device()
            answers[index] = (device, driver.get_current_stream(device), stream.native_handle,
                              driver.get_active_torch_device(), driver.get_current_target())

    threads = [threading.Thread(target=on, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for index, (device, stream, expected, torch_device, target) in answers.items():
        assert int(device) == index and stream == expected
        assert torch_device == torch.device("simdev", index)
        assert target == GPUTarget("simdev", 0, 32)


def test_device_indices_never_share_a_jit_cache_entry_with_another_driver():
    assert PluginDeviceIndex(0) != 0 and 0 != PluginDeviceIndex(0)
    assert PluginDeviceIndex(1) == PluginDeviceIndex(1) and int(PluginDeviceIndex(1)) == 1
    caches = {0: "cuda"}
    assert PluginDeviceIndex(0) not in caches
    assert torch.device("cpu", PluginDeviceIndex(0)).index == 0  # torch takes it as the int it is


@skip_without_simdev
def test_the_benchmarker_and_its_cache_flush(inactive, simdev_hardware):
    driver = devbridge.triton.activate()
    cache = driver.get_empty_cache_for_benchmark()
    assert cache.device.type == "simdev" and cache.numel() * 4 == 256 * 1024 * 1024
    driver.clear_cache(cache)
    interface = driver.get_device_interface()
    start, end = interface.Event(enable_timing=True), interface.Event(enable_timing=True)
    start.record()
    end.record()
    interface.synchronize()
    assert start.elapsed_time(end) >= 0
    from triton.testing import do_bench

    assert driver.get_benchmarker() is do_bench
    x = torch.ones(1024, device="simdev")
    assert do_bench(lambda: x.add_(1), warmup=1, rep=5) > 0


@skip_without_simdev
def test_utils_load_binaries_and_report_device_properties(inactive, simdev_hardware):
    driver = devbridge.triton.activate()
    module, function, n_regs, n_spills, n_max_threads = driver.utils.load_binary(
        "probe_args", simdev_kernels(), 0, PluginDeviceIndex(1))
    assert module == function and n_max_threads > 0
    driver.utils.unload_module(module)
    properties = driver.utils.get_device_properties(0)
    assert properties["max_shared_mem"] > 0 and properties["multiprocessor_count"] >= 1
    assert driver.launcher_cls is devbridge.triton.Launcher
    assert driver.map_python_to_cpp_type("i32") == "int32_t"
    assert driver.map_python_to_cpp_type("*fp32") == "void*"


@skip_without_simdev
def test_without_declared_hardware_the_error_names_the_declaration(inactive):
    before = devbridge.triton.declared("simdev")
    from devbridge.triton import hardware

    hardware._declared.pop("simdev", None)
    try:
        driver = devbridge.triton.activate()
        with pytest.raises(RuntimeError, match=r"no Triton hardware is declared for the 'simdev' device.*"
                                               r"declare_hardware\('simdev'"):
            driver.get_current_target()
    finally:
        if before is not None:
            hardware._declared["simdev"] = before


def test_declare_hardware_checks_its_arguments(monkeypatch):
    declare_before_the_rename(monkeypatch)  # 'xdev', no plugin's name: its other arguments are checked
    with pytest.raises(ValueError, match="needs the plugin's device type name"):
        devbridge.triton.declare_hardware("cudadev:0", compiler="nvidia", kernel_runtime="cuda")
    with pytest.raises(ValueError, match="is neither one of"):
        devbridge.triton.declare_hardware("xdev", compiler="nvidiaa", kernel_runtime="cuda")
    with pytest.raises(TypeError, match="kernel_runtime must be"):
        devbridge.triton.declare_hardware("xdev", compiler="nvidia", kernel_runtime=3)


# ---------------------------------------------------------------- the compiler


@triton.jit
def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


@triton.jit
def _unload_probe_kernel(x, out, BLOCK: tl.constexpr):
    tl.store(out + tl.arange(0, BLOCK), tl.load(x + tl.arange(0, BLOCK)) * 2)


class _RecordingUtils:
    def __init__(self):
        self.unloaded = []

    def unload_module(self, module):
        self.unloaded.append(module)


class _OtherDriver:
    def __init__(self):
        self.utils = _RecordingUtils()


@skip_without_simdev
def test_each_kernel_is_unloaded_by_the_driver_that_loaded_it(inactive):
    # Triton 3.8's CompiledKernel.__del__ unloads through whichever driver is
    # active at collection; devbridge routes it to the driver that loaded it.
    from triton.compiler.compiler import CompiledKernel

    from devbridge import launch

    if "__del__" not in CompiledKernel.__dict__:
        pytest.skip(f"Triton {triton.__version__} never unloads a kernel (3.8 does)")
    devbridge.triton.driver()
    assert hasattr(CompiledKernel.__dict__["__del__"], "__devbridge_wraps__")
    x = torch.arange(8.0, device="simdev:0")
    out = torch.empty(8, device="simdev:0")
    try:
        with devbridge.triton.activate():
            compiled = _unload_probe_kernel[(1,)](x, out, BLOCK=8)
            ours = compiled.module
        assert launch.is_loaded(ours) and torch.equal(out.cpu(), torch.arange(8.0) * 2)
        other = _OtherDriver()
        _triton_api.restore_active_driver(other)  # another driver is active when it is collected
        compiled.__del__()
        assert not launch.is_loaded(ours) and other.utils.unloaded == [] and compiled.module is None
        # A kernel another driver loaded, collected while devbridge's is active.
        foreign = object.__new__(CompiledKernel)
        foreign.module, foreign.function, foreign.name = 0x1234, 0x1234, "foreign"
        foreign.metadata_group, foreign.hash, foreign._devbridge_loaded_by = {}, "0", other.utils
        with devbridge.triton.activate():
            foreign.__del__()
        assert other.utils.unloaded == [0x1234] and foreign.module is None
    finally:
        _unload_probe_kernel.device_caches.clear()


@pytest.fixture
def testdev(monkeypatch):
    """'testdev', a device type no plugin loads, declared as before a rename; removed afterwards."""
    from devbridge.triton import hardware

    declare_before_the_rename(monkeypatch)
    yield "testdev"
    hardware._declared.pop("testdev", None)


def test_the_compiler_claims_declared_plugin_devices_only(testdev):
    devbridge.triton.declare_hardware("testdev", compiler="nvidia", kernel_runtime="cuda")
    assert DevbridgeBackend.supports_target(GPUTarget("testdev", 90, 32))
    assert not DevbridgeBackend.supports_target(GPUTarget("cuda", 90, 32))
    assert not DevbridgeBackend.supports_target(GPUTarget("undeclared_dev", 90, 32))


def test_a_plugin_target_compiles_to_the_same_cubin_as_cuda(testdev):
    """Ahead of time, no GPU: GPUTarget('testdev', 90, 32), served by NVIDIA's
    compiler through devbridge's backend, gives the very cubin of
    GPUTarget('cuda', 90, 32)."""
    devbridge.triton.declare_hardware("testdev", compiler="nvidia", kernel_runtime="cuda")
    signature = {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32", "BLOCK": "constexpr"}

    def compile_for(backend):
        source = ASTSource(add_kernel, signature=signature, constexprs={"BLOCK": 256},
                           attrs={(0,): [["tt.divisibility", 16]]})
        return triton.compile(source, target=GPUTarget(backend, 90, 32), options={"num_warps": 4})

    ours, cuda = compile_for("testdev"), compile_for("cuda")
    assert ours.metadata.target.backend == "testdev" and cuda.metadata.target.backend == "cuda"
    assert ours.asm["cubin"] == cuda.asm["cubin"]
    assert ours.packed_metadata == cuda.packed_metadata
    assert ours.metadata.hash != cuda.metadata.hash  # separate cache entries
    launcher = devbridge.triton.Launcher(ours.src, ours.metadata)
    assert launcher.param_sizes == (8, 8, 8, 4, 8, 8)


# ---------------------------------------------------------------- binding the active policy


@pytest.fixture
def policy_reset(monkeypatch):
    """The selection, the environment and the torch_plugin device name as they were."""
    from devbridge.triton import policy, torch_plugin

    for variable in policy.ENVIRONMENT:
        monkeypatch.delenv(variable, raising=False)
    policy.select(None)
    yield policy
    policy.select(None)
    torch_plugin.configure(device_name=None)


def _category():
    import uuid

    return f"bind_{uuid.uuid4().hex[:8]}"


@skip_without_simdev
def test_the_default_policy_binds_the_hot_path_in_c(policy_reset):
    driver = devbridge.triton.driver()
    assert driver.get_current_stream is devbridge._C.current_stream
    from devbridge.triton.backend import driver as driver_module

    assert driver.get_current_device() is driver_module._INDICES[0]  # the canonical key, from C
    assert driver.get_current_stream(0) == torch.accelerator.current_stream(0).native_handle


@skip_without_simdev
def test_select_rebinds_the_driver_and_none_restores_the_default(policy_reset):
    policy = policy_reset
    driver = devbridge.triton.driver()
    category = _category()
    policy.register(category, "get_current_device", lambda: 3)
    policy.register(category, "get_current_stream", lambda device=None: 0x1234 + (device or 0))
    policy.select(category)
    device = driver.get_current_device()
    assert device == PluginDeviceIndex(3) and type(device) is PluginDeviceIndex
    assert driver.get_current_stream(3) == 0x1234 + 3
    policy.select(None)
    assert driver.get_current_stream is devbridge._C.current_stream
    assert driver.get_current_device() == PluginDeviceIndex(0)


@skip_without_simdev
def test_a_policy_missing_a_method_raises_naming_it_until_it_is_registered(policy_reset):
    policy = policy_reset
    driver = devbridge.triton.driver()
    category = _category()
    policy.register(category, "device_name", lambda: "simdev")
    policy.select(category)
    with pytest.raises(ValueError, match=rf"policy '{category}' has no method 'get_current_device'"):
        driver.get_current_device()
    policy.register(category, "get_current_device", lambda: 1)
    policy.register(category, "get_current_stream", lambda device=None: 77)
    assert driver.get_current_device() == PluginDeviceIndex(1) and driver.get_current_stream() == 77


@skip_without_simdev
def test_activate_binds_the_policy_the_environment_names(policy_reset, inactive, monkeypatch):
    policy = policy_reset
    category = _category()
    policy.register(category, "get_current_device", lambda: 2)
    policy.register(category, "get_current_stream", lambda device=None: 99)
    driver = devbridge.triton.driver()
    monkeypatch.setenv("DEVBRIDGE_TRITON_POLICY", category)
    with devbridge.triton.activate():
        assert driver.get_current_device() == PluginDeviceIndex(2) and driver.get_current_stream(2) == 99
    monkeypatch.delenv("DEVBRIDGE_TRITON_POLICY")
    policy.select(None)
    assert driver.get_current_stream is devbridge._C.current_stream


@skip_without_simdev
def test_configuring_another_device_name_leaves_the_c_hot_path(policy_reset):
    from devbridge.triton import torch_plugin

    driver = devbridge.triton.driver()
    torch_plugin.configure(device_name="otherdev")
    assert driver.get_current_stream is not devbridge._C.current_stream
    assert driver.device_name() == "otherdev"
    torch_plugin.configure(device_name=None)
    assert driver.get_current_stream is devbridge._C.current_stream
    assert driver.get_current_device() == PluginDeviceIndex(0)
