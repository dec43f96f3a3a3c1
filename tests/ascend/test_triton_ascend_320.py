"""devbridge's driver for triton-ascend 3.2.0, in an environment of its own:
the real triton-ascend==3.2.0 wheel (which replaces the `triton` package),
torch 2.13 (CPU), simdev and devbridge; no CANN, no NPU, no torch_npu.

Run by `./dev test` (run_ascend_tests), never by the main suite: that
environment's Triton is upstream's.
"""

from __future__ import annotations

import functools
import importlib.metadata
import pathlib
import subprocess
import sys
import textwrap

import pytest
import torch

import devbridge
import triton
import triton.language as tl
from devbridge import _C, launch
from devbridge.triton import ascend
from devbridge.triton.ascend import _upstream

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))
from launch_support import compile_library, simdev_runtime  # noqa: E402


@pytest.fixture(scope="module")
def driver():
    return ascend.activate()


def test_the_environment_is_triton_ascend_320_alone():
    assert triton.__version__ == "3.2.0" and _upstream.triton_ascend_version() == "3.2.0"
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("triton")  # upstream's Triton is not visible here
    assert set(triton.backends.backends) == {"ascend"}
    assert _upstream.registry() is None  # 3.2.0 has no host-runtime registry
    assert devbridge.plugin_name() == "simdev"


def test_install_takes_the_driver_route_and_the_driver_is_active(driver):
    from triton.runtime.driver import driver as config

    assert ascend.install() == "driver"
    assert config.active is ascend.activate() is driver
    assert isinstance(driver, triton.backends.backends["ascend"].driver)  # the discovered NPUDriver
    assert not type(driver).is_active()


def test_device_and_stream_come_from_the_policy(driver):
    assert driver.get_current_device() == torch.accelerator.current_device_index() == 0
    assert driver.get_current_stream() == torch.accelerator.current_stream(0).native_handle
    side = torch.Stream(device="simdev:1")
    with side:
        assert driver.get_current_stream(1) == side.native_handle
    driver.set_current_device(1)
    try:
        assert driver.get_current_device() == 1
        assert driver.get_active_torch_device() == torch.device("simdev", 1)
    finally:
        driver.set_current_device(0)
    assert driver.get_active_torch_device() == torch.device("simdev", 0)


def test_the_benchmarker_times_plugin_work(driver):
    cache = driver.get_empty_cache_for_benchmark()
    assert cache.device.type == "simdev" and cache.dtype == torch.int32 and cache.numel() == 192 * 1024 * 1024 // 4
    driver.clear_cache(cache)
    del cache
    interface = driver.get_device_interface()
    start, end = interface.Event(enable_timing=True), interface.Event(enable_timing=True)
    start.record(); end.record(); interface.synchronize()
    assert start.elapsed_time(end) >= 0
    x = torch.ones(1024, device="simdev:0")
    bench = driver.get_benchmarker()
    assert bench.__module__ == "devbridge.triton.ascend._benchmark"
    ms = bench(lambda: x.add_(1), warmup=1, rep=5)
    assert isinstance(ms, float) and ms >= 0
    low, high = bench(lambda: x.add_(1), warmup=1, rep=5, quantiles=[0.2, 0.8])
    assert 0 <= low <= high


@triton.jit
def plain(out, x, BLOCK: tl.constexpr):
    tl.store(out + tl.arange(0, BLOCK), x)


@functools.lru_cache(maxsize=None)
def ascend_kernels() -> bytes:
    import torch_simdev

    source = ROOT / "tests" / "python" / "kernels" / "simdev_ascend_kernels.cc"
    return compile_library(source, f"-I{torch_simdev.get_include()}").read_bytes()


def test_the_launcher_of_a_real_triton_ascend_source_runs_on_simdev(driver, monkeypatch):
    """launcher_cls gets what 3.2.0's CompiledKernel gives it: the ASTSource of a
    @triton.jit kernel and the compiler's metadata fields (here without the
    npubin, which needs CANN). The launch goes to a simdev kernel that reads
    the Ascend block; FFTS off and simt_only, so the block is (out, x, grid)."""
    from collections import namedtuple

    from triton.compiler import ASTSource

    src = ASTSource(plain, {"out": "*i64", "x": "i32"}, {"BLOCK": 4})
    Metadata = namedtuple("Metadata", "name workspace_size lock_num lock_init_val mix_mode force_simt_only shared")
    metadata = Metadata("ascend_plain aiv", -1, -1, 0, "aiv", True, 0)
    monkeypatch.setenv("TRITON_DISABLE_FFTS", "1")
    launcher = driver.launcher_cls(src, metadata)
    assert launcher.kernel_name == "ascend_plain"
    assert launcher.param_sizes == (8, 4, 4, 4, 4)
    assert launcher.metadata["layout"] == "ascend" and launcher.metadata["vector_cores"] is True
    kernel = launch.load_binary(ascend_kernels(), "ascend_plain", device="simdev:0", runtime=simdev_runtime())
    out = torch.zeros(7, dtype=torch.int64, device="simdev:0")
    packed = {"kernel_name": "ascend_plain", "tensor_kinds": []}  # 3.2.0's pack_metadata dict
    launcher(3, 2, 1, driver.get_current_stream(), kernel.function, packed, None, None, None, out, 99)
    torch.accelerator.synchronize()
    assert out.cpu().tolist() == [1, 2, 3, 1001, 1002, 1003, 99]


def test_lock_and_workspace_metadata_become_the_ascend_layout(driver, monkeypatch):
    from collections import namedtuple

    from triton.compiler import ASTSource

    monkeypatch.delenv("TRITON_DISABLE_FFTS", raising=False)
    monkeypatch.setenv("TRITON_ALL_BLOCKS_PARALLEL", "1")
    src = ASTSource(plain, {"out": "*i64", "x": "i32"}, {"BLOCK": 4})
    Metadata = namedtuple("Metadata", "name workspace_size lock_num lock_init_val mix_mode force_simt_only")
    launcher = driver.launcher_cls(src, Metadata("k mix", 32, 3, -1, "mix", False))
    assert launcher.param_sizes == (8, 8, 8, 8, 4, 4, 4, 4)  # ffts, lock, workspace, out, x, grid
    assert {k: launcher.metadata[k] for k in ("workspace_size", "lock_num", "lock_init_value", "ffts",
                                              "cap_blocks", "vector_cores")} == {
        "workspace_size": 32, "lock_num": 3, "lock_init_value": -1, "ffts": True, "cap_blocks": True,
        "vector_cores": False}


def test_the_first_step_that_needs_cann_says_so(driver):
    x = torch.zeros(4, dtype=torch.int64, device="simdev:0")
    with pytest.raises(RuntimeError, match=r"cannot open libascendcl.so \(CANN's AscendCL runtime\)"):
        plain[(1,)](x, 5, BLOCK=4)  # the target's SoC name is CANN's
    with pytest.raises(RuntimeError, match="CANN"):
        driver.utils.get_device_properties(0)


GUARD = textwrap.dedent("""
    import importlib.abc, sys

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch_npu", "mindspore"):
                raise ImportError(f"import guard: {name} imported")
            return None

    sys.meta_path.insert(0, Refuse())
""")


def test_no_torch_npu_import_anywhere():
    """Everything the driver does here, with torch_npu and mindspore refused to
    every importer (triton-ascend's own modules included)."""
    script = GUARD + textwrap.dedent("""
        import torch, triton, devbridge
        from devbridge.triton import ascend
        d = ascend.activate()
        d.get_current_device(); d.get_current_stream(); d.get_active_torch_device(); d.set_current_device(0)
        d.get_device_interface().synchronize(); d.clear_cache(d.get_empty_cache_for_benchmark())
        d.get_benchmarker()(lambda: torch.ones(4, device="simdev").add_(1), warmup=1, rep=2)
        try:
            d.get_current_target()
        except RuntimeError as error:
            assert "CANN" in str(error)
        assert not any(m.split(".")[0] in ("torch_npu", "mindspore") for m in sys.modules)
        print("guarded ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "guarded ok" in done.stdout


def test_the_import_guard_can_fail():
    done = subprocess.run([sys.executable, "-c", GUARD + "import torch_npu\n"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0 and "import guard: torch_npu imported" in done.stderr


def test_other_triton_ascend_versions_are_refused(monkeypatch):
    monkeypatch.setattr(_upstream, "triton_ascend_version", lambda: "3.2.1")
    with pytest.raises(RuntimeError, match=r"triton-ascend 3.2.1 is not a version devbridge's Ascend driver was "
                                           r"checked on \(3.2.0\)"):
        _upstream.discovered_npu_driver_class()
