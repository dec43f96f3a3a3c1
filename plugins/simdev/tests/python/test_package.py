"""Packaging: autoload, the claim on PrivateUse1, and what native code needs."""

import os

import pytest
from simdev_subprocess import run_python

torch_simdev = pytest.importorskip(
    "torch_simdev", reason="torch_simdev is not installed; build it with: pip install --no-build-isolation plugins/simdev"
)


def test_autoload_through_the_torch_backends_entry_point():
    result = run_python(
        """
        import sys
        import torch  # no import of torch_simdev
        assert "torch_simdev" in sys.modules
        print(torch.ones(2, device="simdev").device)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "simdev:0"


def test_privateuse1_claimed_by_another_backend_is_a_clear_error():
    result = run_python(
        """
        import torch
        torch.utils.rename_privateuse1_backend("otherdev")
        try:
            import torch_simdev
        except RuntimeError as error:
            print(error)
        """,
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
    )
    assert result.returncode == 0, result.stderr
    assert "already claimed by the 'otherdev' backend" in result.stdout


def test_import_is_idempotent():
    result = run_python(
        """
        import importlib, torch, torch_simdev
        importlib.reload(torch_simdev)
        torch_simdev._autoload()
        print(torch.ones(1, device="simdev").device)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "simdev:0"


def test_runtime_header_and_library_are_installed():
    header = os.path.join(torch_simdev.get_include(), "simdev", "runtime.h")
    assert os.path.isfile(header)
    with open(header) as f:
        assert "sdLaunchHostFunc" in f.read()
    assert os.path.isfile(torch_simdev.runtime_library_path())
    assert torch_simdev._C.runtime_version[0] >= 1


def test_clean_exit_with_work_in_flight():
    result = run_python(
        """
        import torch, torch_simdev
        torch.simdev.set_op_delay_us(20000)
        x = torch.ones(1000, device="simdev")
        for _ in range(5):
            x = x + 1
        print("queued")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "queued"
    assert result.stderr == ""


def test_autoload_installs_devbridge_when_it_is_importable():
    probe = run_python("import devbridge")
    if probe.returncode != 0:
        pytest.skip("devbridge is not installed here: " + probe.stderr.strip().splitlines()[-1])
    result = run_python(
        """
        import torch  # autoload: torch_simdev._autoload() -> devbridge.install()
        import devbridge
        print(devbridge.is_installed())
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


@pytest.mark.parametrize(
    "first_import",
    ["torch_simdev", "devbridge"],
    ids=["plugin-before-torch", "devbridge-before-torch"],
)
def test_autoload_installs_devbridge_whatever_is_imported_first(first_import):
    # Importing the plugin or devbridge first makes torch's autoload run while
    # that package is itself half-imported; both orders must end installed.
    probe = run_python("import devbridge")
    if probe.returncode != 0:
        pytest.skip("devbridge is not installed here: " + probe.stderr.strip().splitlines()[-1])
    result = run_python(
        f"""
        import {first_import}
        import torch, devbridge
        x = torch.ones(3, device="simdev")
        print(devbridge.is_installed(), x.sum().item())
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True 3.0"


def test_autoload_without_devbridge_is_fine():
    result = run_python(
        """
        import sys
        sys.modules["devbridge"] = None  # makes `import devbridge` raise ImportError
        import torch
        print(torch.ones(1, device="simdev").device)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "simdev:0"


def test_autoload_raises_devbridge_install_failures(tmp_path):
    # A devbridge whose install() fails: the failure must not be swallowed.
    package = tmp_path / "devbridge"
    package.mkdir()
    (package / "__init__.py").write_text("def install():\n    raise ValueError('install failed on purpose')\n")
    result = run_python("import torch", PYTHONPATH=str(tmp_path))
    assert result.returncode != 0
    assert "install failed on purpose" in result.stderr
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD" in result.stderr  # torch's hint for a failing backend


def test_queued_work_releasing_python_owned_objects_does_not_deadlock():
    # Queued work holds tensors/storages that Python code also references; when
    # Python drops them first, the last release happens on a stream worker. That
    # must never need the GIL held by a thread that is waiting for the worker.
    result = run_python(
        """
        import gc, torch
        x = torch.ones(64, 64, device="simdev")
        torch.simdev.set_op_delay_us(20000)
        for _ in range(3):
            h = torch.empty(64, 64).t()          # non-contiguous: the copy is host work holding h
            h.note = "a Python attribute, so the PyObject must be preserved"
            h.copy_(x, non_blocking=True)
            s = x.untyped_storage()
            s.note = 1
            y = x + 1
            del h, s, y
            gc.collect()
            x.cpu()                               # waits for the stream, holding the GIL
            torch.accelerator.current_stream().synchronize()
        print("done")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done"
