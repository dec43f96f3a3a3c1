"""Kernel-runtime names and specs, through every face that takes one:
launch.kernel_runtime(name, library=...), declare_hardware(kernel_runtime=...)
(the type only, nothing opened), the Triton driver's kernel_runtime() (the
spec resolved on first use, cached per spec) and version_hash() (the name in
cache keys). One table (python/devbridge/_kernel_runtimes.py) answers them
all, so each accepted spelling and each refusal is pinned here, with the
literal lists the messages give."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("triton")

import devbridge  # noqa: E402
import devbridge.triton  # noqa: E402
from devbridge import _C, launch  # noqa: E402
from devbridge.triton import hardware, torch_plugin  # noqa: E402

from launch_support import declare_before_the_rename, skip_without_simdev  # noqa: E402

NAMES = "'cuda', 'ascend', 'host', 'simdev' and 'simdev-interpreter'"
SPECS = ("'cuda', 'host', 'simdev:<library path>', 'simdev-interpreter:<library path>' or a "
         "'devbridge_kernel_runtime' capsule")


def library() -> str:
    import torch_simdev

    return torch_simdev.runtime_library_path()


# ---------------------------------------------------------------- launch.kernel_runtime


@skip_without_simdev
@pytest.mark.parametrize("name", ["simdev", "simdev-interpreter"])
def test_launch_opens_each_simdev_runtime_with_its_library(name):
    runtime = launch.kernel_runtime(name, library=library())
    assert type(runtime).__name__ == "PyCapsule" and _C.kernel_runtime_name(runtime) == name


@pytest.mark.parametrize("name", ["cuda", "ascend", "host"])
def test_launch_opens_the_runtimes_that_need_no_library(name):
    # Their vendor library is opened on first use, so this runs without one
    # (the host runtime opens none).
    assert _C.kernel_runtime_name(launch.kernel_runtime(name)) == name


def test_launch_refuses_an_unknown_name_listing_every_name():
    with pytest.raises(ValueError, match=re.escape(
            f"devbridge: unknown kernel runtime 'rocm'; devbridge has {NAMES}, and a plugin may pass its own "
            "table as a 'devbridge_kernel_runtime' capsule")):
        launch.kernel_runtime("rocm")
    with pytest.raises(ValueError, match="unknown kernel runtime 'simdev:/x'"):
        launch.kernel_runtime("simdev:/x")  # a spec is not a name


@pytest.mark.parametrize("name, opens", [
    ("cuda", "libcuda.so.1"),
    ("ascend", "CANN's libascendcl.so; DEVBRIDGE_ASCENDCL_LIBRARY names another path"),
    ("host", "nothing: it runs the interpreter Triton target's programs on the launching thread")])
def test_launch_refuses_a_library_for_runtimes_that_open_their_own(name, opens):
    with pytest.raises(ValueError, match=re.escape(f"the {name} kernel runtime takes no library (it opens {opens})")):
        launch.kernel_runtime(name, library="/x.so")


@pytest.mark.parametrize("name", ["simdev", "simdev-interpreter"])
@pytest.mark.parametrize("missing", [None, ""])
def test_launch_refuses_a_simdev_runtime_without_its_library(name, missing):
    with pytest.raises(ValueError, match=re.escape(
            f"the {name} kernel runtime needs library=<path of libsimdev_runtime.so> "
            "(torch_simdev.runtime_library_path())")):
        launch.kernel_runtime(name, library=missing)


# ---------------------------------------------------------------- declare_hardware


@pytest.fixture
def scratch_device(monkeypatch):
    """A device name no test of the suite declares, removed afterwards."""
    declare_before_the_rename(monkeypatch)
    yield "specdev"
    hardware._declared.pop("specdev", None)


@pytest.mark.parametrize("spec", ["cuda", "simdev:/no/such/lib.so", "simdev-interpreter:/no/such/lib.so",
                                  "rocm", "simdev:"])
def test_declare_hardware_checks_the_type_only_and_opens_nothing(scratch_device, spec):
    # As before the one table existed: a string is kept as declared (even one
    # the driver will refuse), and resolved when a kernel is first loaded.
    declared = devbridge.triton.declare_hardware(scratch_device, compiler="interpreter", kernel_runtime=spec)
    assert declared.kernel_runtime == spec and devbridge.triton.declared(scratch_device) is declared


def test_declare_hardware_keeps_a_capsule_as_is(scratch_device):
    runtime = launch.kernel_runtime("cuda")
    assert devbridge.triton.declare_hardware(scratch_device, compiler="interpreter",
                                             kernel_runtime=runtime).kernel_runtime is runtime


@pytest.mark.parametrize("spec", [3, None, b"cuda", ("simdev", "/x")])
def test_declare_hardware_refuses_another_type_listing_every_spec(scratch_device, spec):
    with pytest.raises(TypeError, match=re.escape(
            f"devbridge: kernel_runtime must be {SPECS}, got {type(spec).__name__}")):
        devbridge.triton.declare_hardware(scratch_device, compiler="interpreter", kernel_runtime=spec)
    assert devbridge.triton.declared(scratch_device) is None


# ---------------------------------------------------------------- the driver and version_hash


@pytest.fixture
def declare_simdev():
    """declare(spec) declares the simdev device's hardware; the declaration
    before the test is restored after it."""
    before = devbridge.triton.declared("simdev")

    def declare(spec):
        devbridge.triton.declare_hardware("simdev", compiler="interpreter", kernel_runtime=spec)

    yield declare
    if before is not None:
        devbridge.triton.declare_hardware("simdev", compiler=before.compiler, kernel_runtime=before.kernel_runtime)


@skip_without_simdev
@pytest.mark.parametrize("prefix, name", [("simdev:", "simdev"), ("simdev-interpreter:", "simdev-interpreter")])
def test_the_driver_resolves_each_simdev_spec_once_per_spec(declare_simdev, prefix, name):
    declare_simdev(prefix + library())
    with devbridge.triton.activate() as driver:
        runtime = driver.kernel_runtime()
        assert _C.kernel_runtime_name(runtime) == name
        assert driver.kernel_runtime() is runtime  # cached for this spec
        declare_simdev(prefix + library())  # the same spec declared again: still the cached one
        assert driver.kernel_runtime() is runtime
        assert torch_plugin.version_hash()[-1] == f"kernel runtime {prefix}{library()}"


@skip_without_simdev
def test_the_driver_resolves_cuda_and_takes_a_capsule_as_is(declare_simdev):
    with devbridge.triton.activate() as driver:
        declare_simdev("cuda")
        assert _C.kernel_runtime_name(driver.kernel_runtime()) == "cuda"
        assert torch_plugin.version_hash()[-1] == "kernel runtime cuda"
        own = launch.kernel_runtime("simdev", library=library())
        declare_simdev(own)
        assert driver.kernel_runtime() is own
        assert torch_plugin.version_hash()[-1] == "kernel runtime simdev"  # the capsule's table names it


@skip_without_simdev
@pytest.mark.parametrize("spec", ["rocm", "ascend", "simdev", "cuda:0", "simdev-interpreter"])
def test_the_driver_refuses_an_unknown_spec_listing_every_spec(declare_simdev, spec):
    declare_simdev(spec)
    with devbridge.triton.activate() as driver:
        with pytest.raises(ValueError, match=re.escape(
                f"devbridge: unknown kernel runtime {spec!r} declared for 'simdev'; use {SPECS}")):
            driver.kernel_runtime()
        # Naming it for cache keys opens nothing, so it does not refuse.
        assert torch_plugin.version_hash()[-1] == f"kernel runtime {spec}"


@skip_without_simdev
@pytest.mark.parametrize("name", ["simdev", "simdev-interpreter"])
def test_the_driver_refuses_a_simdev_spec_without_its_library(declare_simdev, name):
    declare_simdev(name + ":")
    with devbridge.triton.activate() as driver:
        with pytest.raises(ValueError, match=re.escape(f"the {name} kernel runtime needs library=<path of "
                                                       "libsimdev_runtime.so>")):
            driver.kernel_runtime()
