"""What a newcomer meets in a fresh interpreter: Triton kernels on a plugin
without devbridge.triton.activate() where the plugin is the only accelerator
(and with it where another Triton backend is active), a plain
`import torch_simdev` with autoload off setting simdev up completely, the
errors a plugin that never calls devbridge gets (each naming the missing
call), the launcher naming a misplaced argument, and `--version`.

Each scenario is one subprocess running several checks, to keep CI fast.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")
import triton  # noqa: E402

import devbridge  # noqa: E402

from launch_support import skip_without_simdev  # noqa: E402

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


def error_of(call):
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the error is what is checked
        return error
    raise AssertionError("no error raised")
'''


def run_script(tmp_path, body: str, *, pythonpath: list[str] = (), **env: str) -> str:
    """Runs KERNEL + body as a file (Triton reads a kernel's source from its
    file) in a fresh interpreter; returns its stdout. The scenarios are a
    newcomer's machine whose only accelerator is the plugin: CUDA GPUs are
    hidden (on a CUDA machine Triton's own nvidia driver is active, and
    devbridge's is then selected with activate(), as the last scenario shows
    with a backend of its own)."""
    script = tmp_path / "first_hour.py"
    script.write_text(KERNEL + textwrap.dedent(body))
    paths = [*pythonpath, os.environ.get("PYTHONPATH", "")]
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": "",
                               "PYTHONPATH": os.pathsep.join(p for p in paths if p), **env})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@skip_without_simdev
def test_a_plain_import_of_the_plugin_sets_everything_up(tmp_path):
    # Autoload off, the plugin imported by hand: how a process with two
    # plugins installed must run, and how the README's tour reads.
    out = run_script(tmp_path, """
        import torch
        import torch_simdev
        import devbridge, devbridge.triton
        from triton.runtime import driver as config
        from devbridge.triton.backend.driver import DevbridgeDriver

        assert devbridge.is_installed()
        assert devbridge.triton.declared("simdev").compiler == "interpreter"

        # Triton: no activate(); simdev is the only accelerator here, so
        # devbridge's driver is Triton's default.
        assert DevbridgeDriver.is_active()
        n = 1000
        x = torch.arange(n, dtype=torch.float32, device="simdev:0")
        y = torch.ones(n, device="simdev:0")
        out = torch.empty_like(x)
        add[(1,)](x, y, out, n, BLOCK=1024)
        assert torch.equal(out.cpu(), x.cpu() + 1)
        assert config.active is devbridge.triton.driver() and devbridge.triton.is_active()

        # The launcher names the argument on the wrong device.
        error = error_of(lambda: add[(1,)](x, y.to("simdev:1"), out, n, BLOCK=1024))
        assert isinstance(error, ValueError), error
        assert ("argument 1 ('y') of kernel 'add' is a tensor on simdev:1, but the kernel launches on "
                "simdev:0; move it there first (y.to('simdev:0'))") in str(error), error

        # DLPack: a consumer's own stream is accepted (simdev's external-stream
        # hook is registered; test_dlpack_protocol.py proves the ordering), and
        # the Python protocol works on a renamed backend's tensors.
        consumer = torch.Stream(device="simdev:0")
        capsule = x.__dlpack__(stream=consumer.native_handle, max_version=(1, 3))
        assert type(capsule).__name__ == "PyCapsule"
        alias = torch.from_dlpack(x)
        assert alias.device == x.device and alias.data_ptr() == x.data_ptr()

        # torch.compile, on Inductor's Triton for simdev.
        compiled = torch.compile(lambda t: t * 2 + 1)
        assert torch.equal(compiled(x).cpu(), x.cpu() * 2 + 1)
        print("set up")
    """, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert "set up" in out


@skip_without_simdev
def test_a_plugin_that_never_calls_devbridge_gets_errors_naming_the_missing_call(tmp_path):
    # SIMDEV_DEVBRIDGE=0: simdev calls neither devbridge.install() nor
    # declare_hardware(), as a plugin that knows nothing of devbridge.
    out = run_script(tmp_path, """
        import torch
        import torch_simdev
        import devbridge, devbridge.triton

        assert not devbridge.is_installed() and devbridge.triton.declared("simdev") is None
        x = torch.ones(64, device="simdev:0")
        out = torch.empty_like(x)

        def names_the_declaration(error):
            text = str(error)
            assert isinstance(error, RuntimeError), repr(error)
            assert "no Triton hardware is declared for the 'simdev' device" in text, text
            assert "devbridge.triton.declare_hardware('simdev', compiler=..., kernel_runtime=...)" in text, text
            assert "compiler='" not in text, text  # no hardware is guessed for the plugin

        # Triton, without and with activate(): devbridge's error, not "0 active drivers".
        names_the_declaration(error_of(lambda: add[(1,)](x, x, out, 64, BLOCK=64)))
        with devbridge.triton.activate():
            names_the_declaration(error_of(lambda: add[(1,)](x, x, out, 64, BLOCK=64)))

        # The user's own call for such a plugin (docs/plugin-authors.md).
        devbridge.install()
        assert torch.from_dlpack(x).data_ptr() == x.data_ptr()
        other = torch.Stream(device="simdev:0")
        error = error_of(lambda: x.__dlpack__(stream=other.native_handle))
        assert isinstance(error, BufferError), repr(error)
        assert "registers no external-stream hook" in str(error), error
        assert "devbridge.register_external_stream_hook(capsule, 'simdev')" in str(error), error

        # torch.compile: devbridge's error, not Inductor's KeyError: 'simdev'.
        error = error_of(lambda: torch.compile(lambda t: t + 1)(x))
        text = str(error)
        assert "devbridge: torch.compile on 'simdev' generates Triton kernels" in text, text
        assert "declare_hardware('simdev', compiler=..., kernel_runtime=...)" in text, text
        assert "KeyError" not in text, text
        assert torch.equal(torch.compile(lambda t: t + 1)(torch.ones(3)), torch.full((3,), 2.0))  # cpu still compiles
        # Declared later, the hardware serves the next compile.
        devbridge.triton.declare_hardware("simdev", compiler="interpreter",
                                          kernel_runtime="simdev-interpreter:" + torch_simdev.runtime_library_path())
        assert torch.equal(torch.compile(lambda t: t * 3)(x).cpu(), torch.full((64,), 3.0))
        print("named")
    """, TORCH_DEVICE_BACKEND_AUTOLOAD="0", SIMDEV_DEVBRIDGE="0")
    assert "named" in out


FAKE_COMPILER = '''
from triton.backends.compiler import BaseBackend


class FakeGpuBackend(BaseBackend):
    @staticmethod
    def supports_target(target):
        return target.backend == "fakegpu"

    def hash(self):
        return "fakegpu"

    def parse_options(self, options):
        raise RuntimeError("fakegpu compiles nothing")

    def add_stages(self, stages, options, language=None):
        raise RuntimeError("fakegpu compiles nothing")

    def load_dialects(self, context):
        pass

    def get_module_map(self):
        return {}
'''

FAKE_DRIVER = '''
from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase


class FakeGpuDriver(DriverBase):
    """A Triton backend that is active, as NVIDIA's is on a GPU host."""

    @classmethod
    def is_active(cls):
        return True

    def map_python_to_cpp_type(self, ty):
        return "void*"

    def get_current_target(self):
        return GPUTarget("fakegpu", 0, 32)

    def get_active_torch_device(self):
        import torch

        return torch.device("cpu")

    def get_benchmarker(self):
        from triton.testing import do_bench

        return do_bench

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0
'''


@skip_without_simdev
def test_where_another_triton_backend_is_active_triton_keeps_it_and_activate_selects_devbridge(tmp_path):
    # A real Triton backend, found through its `triton.backends` entry point,
    # whose driver reports active: Triton's choice must stay that backend (no
    # "2 active drivers"), and activate() must still run kernels on simdev.
    root = tmp_path / "site"
    (root / "fakegpu").mkdir(parents=True)
    (root / "fakegpu" / "__init__.py").write_text("")
    (root / "fakegpu" / "compiler.py").write_text(FAKE_COMPILER)
    (root / "fakegpu" / "driver.py").write_text(FAKE_DRIVER)
    info = root / "fakegpu-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakegpu\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[triton.backends]\nfakegpu = fakegpu\n")
    out = run_script(tmp_path, """
        import torch
        import triton.backends
        import devbridge, devbridge.triton
        from triton.runtime import driver as config
        from devbridge.triton.backend.driver import DevbridgeDriver
        from fakegpu.driver import FakeGpuDriver

        assert "fakegpu" in triton.backends.backends and devbridge.triton.declared("simdev") is not None
        assert not DevbridgeDriver.is_active()
        assert isinstance(config.active, FakeGpuDriver), config.active  # Triton's own choice
        assert not devbridge.triton.is_active()

        x = torch.arange(100, dtype=torch.float32, device="simdev:0")
        out = torch.empty_like(x)
        with devbridge.triton.activate():
            add[(1,)](x, x, out, 100, BLOCK=128)
        assert torch.equal(out.cpu(), x.cpu() * 2)
        assert isinstance(config.active, FakeGpuDriver)  # back to Triton's choice
        print("kept")
    """, pythonpath=[str(root)])
    assert "kept" in out


def test_version_names_devbridge_torch_and_triton():
    done = subprocess.run([sys.executable, "-m", "devbridge", "--version"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (f"devbridge {devbridge.__version__} (torch {torch.__version__}, "
                                   f"triton {triton.__version__})")
