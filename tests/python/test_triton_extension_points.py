"""The extension points a plugin's own Triton target uses (docs/plugin-authors.md
§6), each through its public face: a compiler given as a class, devbridge's
optional compiler hooks and their defaults, a kernel runtime declared as the
function that makes it, devbridge.triton.compiling_source(), and
devbridge.launch.python_kernel_runtime (kernels whose programs are Python
calls on simdev's streams). simdev's own target is served by exactly these."""

from __future__ import annotations

import ctypes
import re
import struct

import pytest
import torch

pytest.importorskip("triton")

import devbridge  # noqa: E402
import devbridge.triton  # noqa: E402
from devbridge import _C, launch  # noqa: E402
from devbridge.triton import hardware, torch_plugin  # noqa: E402

from launch_support import PACKED, declare_before_the_rename, skip_without_simdev, stream_of, sync  # noqa: E402


@pytest.fixture
def scratch_device(monkeypatch):
    """A device name no other test declares, removed afterwards."""
    declare_before_the_rename(monkeypatch)
    yield "hookdev"
    hardware._declared.pop("hookdev", None)


@pytest.fixture
def declare_simdev():
    """declare(**kw) declares simdev's hardware; the declaration before the test is restored after it."""
    before = devbridge.triton.declared("simdev")

    def declare(**kwargs):
        devbridge.triton.declare_hardware("simdev", **kwargs)

    yield declare
    if before is not None:
        devbridge.triton.declare_hardware("simdev", compiler=before.compiler, kernel_runtime=before.kernel_runtime)


def library() -> str:
    import torch_simdev

    return torch_simdev.runtime_library_path()


# ---------------------------------------------------------------- the compiler


def test_a_compiler_class_is_kept_and_named_by_its_path(scratch_device):
    from triton.backends.nvidia.compiler import CUDABackend

    class Untimed(CUDABackend):
        times_kernels = False

    declared = devbridge.triton.declare_hardware(scratch_device, compiler=Untimed, kernel_runtime="cuda")
    assert declared.compiler == f"{__name__}:{Untimed.__qualname__}"
    assert declared.compiler_backend() == (Untimed, None)  # the class itself, though <locals> cannot be imported
    assert declared.hook("times_kernels") is False and declared.hook("l2_cache_size") is None


def test_a_named_compiler_without_hooks_gets_the_defaults(scratch_device):
    declared = devbridge.triton.declare_hardware(scratch_device, compiler="nvidia", kernel_runtime="cuda")
    assert {name: declared.hook(name) for name in hardware.COMPILER_HOOKS} == hardware.COMPILER_HOOKS
    assert hardware.COMPILER_HOOKS == {"times_kernels": True, "l2_cache_size": None, "before_load": None}


def test_a_compiler_of_another_type_is_refused_naming_the_forms(scratch_device):
    with pytest.raises(TypeError, match=re.escape("devbridge: compiler must be a name ('nvidia', 'amd', 'interpreter'), "
                                                  "'module.path:ClassName' or a Triton backend class, got int")):
        devbridge.triton.declare_hardware(scratch_device, compiler=3, kernel_runtime="cuda")
    assert devbridge.triton.declared(scratch_device) is None


@skip_without_simdev
def test_simdev_declares_its_target_through_the_same_points():
    from torch_simdev import triton_target
    from devbridge.triton.interpreter.compiler import InterpreterBackend

    simdev = devbridge.triton.declared("simdev")
    assert simdev.compiler == triton_target.COMPILER and simdev.kernel_runtime is triton_target.kernel_runtime
    assert simdev.compiler_backend() == (InterpreterBackend, None)
    assert simdev.hook("times_kernels") is False and simdev.hook("l2_cache_size") == 1 << 20
    assert simdev.hook("before_load") == InterpreterBackend.before_load


def test_interpreter_names_devbridges_interpreter_compiler(scratch_device):
    declared = devbridge.triton.declare_hardware(scratch_device, compiler="interpreter", kernel_runtime="host")
    assert declared.compiler == "interpreter"
    assert declared.compiler_class() == ("devbridge.triton.interpreter.compiler", "InterpreterBackend", None)


def test_the_older_path_of_the_interpreter_compiler_names_devbridges_class(scratch_device):
    old = "torch_simdev.triton_target.compiler:InterpreterBackend"
    declared = devbridge.triton.declare_hardware(scratch_device, compiler=old, kernel_runtime="cuda")
    assert declared.compiler == old
    assert declared.compiler_class() == ("devbridge.triton.interpreter.compiler", "InterpreterBackend", None)


def test_compiling_source_is_none_outside_a_compile():
    assert devbridge.triton.compiling_source() is None


# ---------------------------------------------------------------- a kernel runtime made when first needed


@skip_without_simdev
def test_a_kernel_runtime_function_is_called_once_when_the_driver_first_needs_it(declare_simdev):
    made = []

    def make():
        made.append(1)
        return launch.kernel_runtime("simdev", library=library())

    before = devbridge.triton.declared("simdev")
    declare_simdev(compiler=before.compiler, kernel_runtime=make)
    assert made == []  # declaring calls nothing
    with devbridge.triton.activate() as driver:
        runtime = driver.kernel_runtime()
        assert _C.kernel_runtime_name(runtime) == "simdev" and driver.kernel_runtime() is runtime
        assert made == [1]
        # Cache keys name the function, without calling it.
        assert torch_plugin.version_hash()[-1] == f"kernel runtime {__name__}.{make.__qualname__}"


@skip_without_simdev
def test_a_kernel_runtime_function_that_returns_no_capsule_is_named(declare_simdev):
    def make():
        return "simdev:" + library()

    before = devbridge.triton.declared("simdev")
    declare_simdev(compiler=before.compiler, kernel_runtime=make)
    with devbridge.triton.activate() as driver:
        with pytest.raises(TypeError, match=re.escape(
                f"the kernel runtime function {__name__}.{make.__qualname__} declared for 'simdev' must return a "
                "'devbridge_kernel_runtime' capsule, got str")):
            driver.kernel_runtime()


@skip_without_simdev
def test_a_redeclared_kernel_runtime_function_is_called_even_where_the_old_one_lived(declare_simdev):
    """Each declaration's function is the one called. A cache keyed by the
    function's id alone served a new function, allocated where a dropped one
    had lived, the dropped one's capsule: here, every other declaration
    returns no capsule and must be refused."""
    compiler = devbridge.triton.declared("simdev").compiler
    for attempt in range(20):
        if attempt % 2 == 0:
            def make():
                return launch.kernel_runtime("simdev", library=library())
        else:
            def make():
                return "not a capsule"
        declare_simdev(compiler=compiler, kernel_runtime=make)
        del make  # only the declaration holds it now; the next one drops it
        with devbridge.triton.activate() as driver:
            if attempt % 2 == 0:
                assert _C.kernel_runtime_name(driver.kernel_runtime()) == "simdev"
            else:
                with pytest.raises(TypeError, match="must return a 'devbridge_kernel_runtime' capsule, got str"):
                    driver.kernel_runtime()


def test_declare_hardware_names_the_function_form_when_refusing_a_type(scratch_device):
    with pytest.raises(TypeError, match="a plugin whose capsule cannot be made yet may pass the function that makes it"):
        devbridge.triton.declare_hardware(scratch_device, compiler="nvidia", kernel_runtime=3)


# ---------------------------------------------------------------- Python kernels


@skip_without_simdev
def test_a_python_kernel_runs_each_program_on_the_stream_in_order():
    """A kernel whose "binary" is a note and whose programs are Python: each
    adds 1 to its element of x, in place, through the simdev address the
    launcher packed; after the fill queued before it on the same stream."""
    loaded, ran = [], []

    def load(image):
        loaded.append(bytes(image))
        return 41

    def run(kernel_id, program, grid, device, payload):
        address, n = struct.unpack_from("<Q", payload, 0)[0], struct.unpack_from("<i", payload, 8)[0]
        ran.append((kernel_id, program, grid, device, n))
        element = ctypes.c_float.from_address(address + 4 * program[0])
        element.value += 1.0
        return 0

    runtime = launch.python_kernel_runtime("toy-python", library=library(), load=load, run=run)
    assert _C.kernel_runtime_name(runtime) == "toy-python"
    kernel = launch.load_binary(b"add one", "add_one", device="simdev:0", runtime=runtime)
    assert loaded == [b"add one"]
    launcher = launch.launcher({"x": "*fp32", "n": "i32"}, name="add_one")
    x = torch.empty(5, device="simdev:0")
    with torch.simdev.op_delay(20_000):  # the fill sleeps first: a kernel not ordered after it reads garbage
        x.fill_(2.0)
        launcher(5, 1, 1, stream_of("simdev:0"), kernel.function, PACKED, None, None, None, x, 5)
        sync()
    assert torch.equal(x.cpu(), torch.full((5,), 3.0))
    assert ran == [(41, (i, 0, 0), (5, 1, 1), 0, 5) for i in range(5)]
    launch.unload(kernel.module)


@skip_without_simdev
def test_a_python_kernel_whose_load_raises_is_refused_with_its_error():
    def load(image):
        raise ValueError("not one of mine")

    runtime = launch.python_kernel_runtime("toy-python", library=library(), load=load, run=lambda *a: 0)
    with pytest.raises(RuntimeError, match="load refused the binary: ValueError: not one of mine"):
        launch.load_binary(b"?", "k", device="simdev:0", runtime=runtime)


def test_python_kernel_runtime_checks_its_arguments():
    with pytest.raises(TypeError, match="a Python kernel runtime's run must be callable, got int"):
        launch.python_kernel_runtime("toy", library="/x.so", load=lambda image: 1, run=3)
    with pytest.raises(ValueError, match=re.escape("needs library=<path of libsimdev_runtime.so>")):
        launch.python_kernel_runtime("toy", library="", load=lambda image: 1, run=lambda *a: 0)
    with pytest.raises(ValueError, match="needs a name"):
        launch.python_kernel_runtime("", library="/x.so", load=lambda image: 1, run=lambda *a: 0)
