"""cudadev devices: one per visible CUDA GPU, sharing CUDA's current device."""

import pytest
import torch

pytestmark = pytest.mark.gpu


def test_one_cudadev_device_per_cuda_gpu():
    assert torch.cudadev.is_available()
    assert torch.cudadev.device_count() == torch.cuda.device_count()
    assert torch.accelerator.current_accelerator().type == "cudadev"
    assert torch.accelerator.device_count() == torch.cuda.device_count()


def test_device_name_and_generated_tensor_methods():
    t = torch.ones(3).cudadev()
    assert t.device == torch.device("cudadev", 0)
    assert t.is_cudadev
    assert not t.is_cuda
    assert torch.empty(2, device="cudadev").device == torch.device("cudadev:0")
    assert torch.ones(2).to("cudadev").untyped_storage().device.type == "cudadev"


def test_current_device_is_cudas_current_device():
    assert torch.cudadev.current_device() == torch.cuda.current_device() == 0
    last = torch.cudadev.device_count() - 1
    with torch.cudadev.device(last):
        assert torch.cudadev.current_device() == last
        assert torch.cuda.current_device() == last
        assert torch.empty(1, device="cudadev").device.index == last
    assert torch.cudadev.current_device() == 0


def test_bad_device_index_names_the_valid_range():
    n = torch.cudadev.device_count()
    with pytest.raises(RuntimeError, match="out of range"):
        torch.cudadev.set_device(n)
    with pytest.raises(RuntimeError, match="out of range"):
        torch.empty(1, device=f"cudadev:{n}")


def test_device_module_rejects_other_device_types():
    with pytest.raises(ValueError, match="expected a cudadev device"):
        torch.cudadev.synchronize("cuda:0")


def test_plugin_is_registered_under_its_name():
    assert torch._C._get_privateuse1_backend_name() == "cudadev"
    assert torch.get_device_module("cudadev") is torch.cudadev
