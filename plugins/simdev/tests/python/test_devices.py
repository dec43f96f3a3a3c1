"""Devices: count, selection, and clear errors for bad device indices."""

import pytest
import torch

torch_simdev = pytest.importorskip(
    "torch_simdev", reason="torch_simdev is not installed; build it with: pip install --no-build-isolation plugins/simdev"
)


def test_device_module_is_registered():
    assert torch.simdev.is_available()
    assert torch.simdev.is_initialized()
    assert torch.simdev.device_count() >= 1
    assert torch.get_device_module("simdev") is torch.simdev
    assert torch._C._get_privateuse1_backend_name() == "simdev"
    assert torch.device("simdev:0").type == "simdev"


def test_set_device_and_context_manager(two_devices):
    assert torch.simdev.current_device() == 0
    with torch.simdev.device(1):
        assert torch.simdev.current_device() == 1
        assert torch.empty(2, device="simdev").device == torch.device("simdev:1")
        assert torch.ones(2).simdev().device == torch.device("simdev:1")
    assert torch.simdev.current_device() == 0
    torch.simdev.set_device("simdev:1")
    assert torch.simdev.current_device() == 1
    torch.simdev.set_device(0)


def test_tensor_on_explicit_device(two_devices):
    _, d1 = two_devices
    t = torch.arange(5, device=d1)
    assert t.device == d1
    assert torch.simdev.current_device() == 0  # creating it did not change the current device
    assert torch.equal(t.cpu(), torch.arange(5))


def test_invalid_device_index_has_a_clear_error():
    count = torch.simdev.device_count()
    with pytest.raises(RuntimeError, match=f"simdev:7 is not a valid device: this process has {count} simdev device"):
        torch.empty(1, device="simdev:7")
    with pytest.raises(RuntimeError, match="SIMDEV_DEVICE_COUNT"):
        torch.ones(3).to("simdev:7")
    with pytest.raises(RuntimeError, match="is not a valid device"):
        torch.simdev.set_device(7)
    with pytest.raises(RuntimeError, match="is not a valid device"):
        torch.Stream(device="simdev:7")
    assert torch.simdev.current_device() == 0


def test_device_module_rejects_other_device_types():
    with pytest.raises(ValueError, match="expected a simdev device"):
        torch.simdev.set_device("cpu")


def test_synchronize_waits_for_the_queued_work_of_the_device_it_names():
    """synchronize(device) returns once that device's queued work has run:
    an event recorded behind delayed work is complete then (the delay is
    read as each item starts, so the synchronize stays inside it)."""
    with torch.simdev.op_delay(20_000):
        events = []
        for index in range(torch.simdev.device_count()):
            torch.ones(10, device=f"simdev:{index}").add_(1)
            event = torch.Event(device=torch.device("simdev", index))
            event.record(torch.accelerator.current_stream(index))
            events.append(event)
        assert not events[-1].query()  # still queued behind the delays
        for index, event in enumerate(events):
            torch.simdev.synchronize(index)
            assert event.query(), f"synchronize({index}) returned before its work ran"
    torch.simdev.synchronize()
    torch.simdev.synchronize("simdev:0")
