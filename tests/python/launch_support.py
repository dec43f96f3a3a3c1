"""Shared pieces of the launcher tests on simdev.

`simdev_kernels()` compiles tests/python/kernels/simdev_launch_kernels.cc
once per session into a shared library (g++, against simdev's installed
header) and returns its bytes: the "binary" the simdev kernel runtime loads.
`load(name, device)` loads one of its kernels through devbridge.launch.
"""

from __future__ import annotations

import atexit
import functools
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest
import torch

import devbridge
from devbridge import launch

KERNEL_SOURCE = pathlib.Path(__file__).parent / "kernels" / "simdev_launch_kernels.cc"
SIMDEV = devbridge.plugin_name() == "simdev"
skip_without_simdev = pytest.mark.skipif(
    not SIMDEV, reason="torch_simdev is not installed (pip install --no-build-isolation plugins/simdev)")


def declare_before_the_rename(monkeypatch) -> None:
    """Let declare_hardware take a device name no plugin loads (a scratch
    name), as it does before a plugin renames PrivateUse1; once a plugin has
    claimed it, only its name is taken (devbridge/_device_names.py)."""
    from devbridge import _device_names

    monkeypatch.setattr(_device_names, "loaded_backend", lambda: _device_names.UNCLAIMED)


_build_root: pathlib.Path | None = None


def _build_dir() -> pathlib.Path:
    """A directory of this process's own for the compiled test libraries,
    removed at exit (a library dlopen'ed from it stays loaded)."""
    global _build_root
    if _build_root is None:
        _build_root = pathlib.Path(tempfile.mkdtemp(prefix="devbridge-launch-"))
        atexit.register(shutil.rmtree, _build_root, ignore_errors=True)
    return pathlib.Path(tempfile.mkdtemp(dir=_build_root))


def compile_library(source: pathlib.Path, *extra: str) -> pathlib.Path:
    """Compiles one test source into a shared library (g++, -Werror); returns its path."""
    compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler (g++) to build the launcher test libraries")
    library = _build_dir() / (source.stem + ".so")
    result = subprocess.run([compiler, "-std=c++17", "-O2", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
                             *extra, str(source), "-o", str(library), "-pthread"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"compiling {source.name} failed:\n{result.stderr}")
    return library


@functools.lru_cache(maxsize=None)
def simdev_kernels() -> bytes:
    import torch_simdev

    return compile_library(KERNEL_SOURCE, f"-I{torch_simdev.get_include()}").read_bytes()


@functools.lru_cache(maxsize=None)
def simdev_runtime():
    import torch_simdev

    return launch.kernel_runtime("simdev", library=torch_simdev.runtime_library_path())


def load(name: str, device="simdev:0") -> launch.LoadedBinary:
    return launch.load_binary(simdev_kernels(), name, device=device, runtime=simdev_runtime())


def stream_of(device) -> int:
    """Native handle of the current stream of `device`."""
    return devbridge.current_stream(device)


PACKED = (4, 1, 0)  # (num_warps, num_ctas, shared): what simdev kernels get


def run(launcher, grid, kernel, *args, stream=None, device="simdev:0", packed=PACKED,
        launch_metadata=None, enter=None, exit=None):
    """Calls `launcher` exactly as Triton's CompiledKernel.run does."""
    gx, gy, gz = (tuple(grid) + (1, 1))[:3]
    if stream is None:
        stream = stream_of(device)
    return launcher(gx, gy, gz, stream, kernel.function, packed, launch_metadata, enter, exit, *args)


def sync(device="simdev:0") -> None:
    torch.accelerator.synchronize(torch.device(device).index)
