"""Shared fixtures for the simdev backend tests.

The tests need the installed plugin (pip install --no-build-isolation
plugins/simdev); without it every test module skips itself, saying so.
"""

import pytest
import torch

try:
    import torch_simdev  # noqa: F401  (registers the simdev device)

    SIMDEV_INSTALLED = True
except ImportError:
    # Each test module skips itself (pytest.importorskip) with the build command.
    SIMDEV_INSTALLED = False


@pytest.fixture(autouse=True)
def clean_device_state():
    """Every test starts and ends on simdev:0, default streams, no op delay, nothing queued."""
    if not SIMDEV_INSTALLED:
        yield
        return
    torch.simdev.set_device(0)
    torch.simdev.set_op_delay_us(0)
    yield
    torch.simdev.set_op_delay_us(0)
    for index in range(torch.simdev.device_count()):
        torch.accelerator.set_stream(torch.simdev.default_stream(index))  # undo a failed test's stream
        torch.simdev.synchronize(index)
    torch.simdev.set_device(0)


@pytest.fixture
def two_devices():
    if torch.simdev.device_count() < 2:
        pytest.skip("needs 2 simdev devices (SIMDEV_DEVICE_COUNT>=2)")
    return torch.device("simdev:0"), torch.device("simdev:1")
