"""`python -m devbridge check`: the report, its exit status, and the fixes it prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

EXPECTED_CHECKS = [
    "backend", "device.count", "device.current", "device.per_thread", "stream.current",
    "stream.native_handle", "allocator", "device.synchronize", "stream.ordering", "dlpack.installed",
    "dlpack.version", "dlpack.stream", "dlpack.roundtrip", "dlpack.allocator", "triton.kernel",
]


def run_check(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "devbridge", "check", *args],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=300,
    )


def simdev_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch_simdev") is not None


needs_simdev = pytest.mark.skipif(
    not simdev_installed(),
    reason="torch_simdev is not installed: pip install --no-build-isolation plugins/simdev")


@needs_simdev
def test_json_report_passes_on_simdev():
    result = run_check("--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["passed"] is True
    assert report["environment"]["backend"] == "simdev"
    assert [c["name"] for c in report["checks"]] == EXPECTED_CHECKS
    assert all(c["status"] == "pass" for c in report["checks"]), report["checks"]
    # The hot calls are measured, not just called.
    costs = {k for c in report["checks"] for k in c["costs_ns"]}
    assert {"current_device_index", "current_stream", "current_stream().native_handle"} <= costs


@needs_simdev
def test_text_report_summarises():
    result = run_check()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "15 passed, 0 failed, 0 skipped" in result.stdout
    assert "fix:" not in result.stdout


@needs_simdev
def test_plugin_that_does_not_install_devbridge_fails_with_the_fix():
    # With autoload off, importing the plugin by hand skips its autoload hook
    # (the one that calls devbridge.install()): PyTorch's table stays in place.
    result = run_check("--plugin", "torch_simdev", "--json", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    failed = [c for c in report["checks"] if c["status"] == "FAIL"]
    assert [c["name"] for c in failed] == ["dlpack.installed"]
    assert "devbridge.install()" in failed[0]["fix"]
    assert "autoload" in failed[0]["fix"]


@needs_simdev
def test_wrong_device_name_is_a_failure_naming_both():
    result = run_check("--device", "cudadev", "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["passed"] is False
    (only,) = report["checks"]
    assert "'simdev', not 'cudadev'" in only["detail"]
    assert "drop --device" in only["fix"]


def test_unknown_plugin_module_is_a_failure_with_the_fix():
    result = run_check("--plugin", "no_such_plugin_module", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert result.returncode == 1
    assert "cannot import plugin module 'no_such_plugin_module'" in result.stdout
    assert "fix: install the plugin's package" in result.stdout


def test_no_backend_and_no_simdev_is_a_failure_with_the_fix():
    # Autoload off and simdev made unimportable: nothing claims PrivateUse1.
    code = (
        "import sys; sys.modules['torch_simdev'] = None\n"
        "from devbridge.__main__ import main\n"
        "sys.exit(main(['check']))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, timeout=300)
    assert result.returncode == 1
    assert "no PrivateUse1 backend is loaded" in result.stdout
    assert "torch.backends" in result.stdout  # the fix names the entry point


def test_usage_error_exits_2():
    result = subprocess.run([sys.executable, "-m", "devbridge"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "check" in result.stderr


@needs_simdev
def test_device_module_without_lazy_init_fails_with_the_fix():
    # The pitfall found on torch 2.11: without torch.<name>._lazy_init torch
    # never marks the device initialized and accelerator.synchronize() is a no-op.
    code = (
        "import sys, torch, torch_simdev\n"
        "del torch.simdev._lazy_init\n"
        "from devbridge.__main__ import main\n"
        "sys.exit(main(['check', '--json']))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=dict(os.environ), timeout=300)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    failed = {c["name"]: c for c in report["checks"] if c["status"] == "FAIL"}
    assert list(failed) == ["device.synchronize"]
    assert "define _lazy_init()" in failed["device.synchronize"]["fix"]
