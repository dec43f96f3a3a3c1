"""A consumer that is not torch: TVM-FFI's Python `from_dlpack` on simdev
tensors, through each route it has (the C exchange table on torch.Tensor,
legacy and versioned capsules from `__dlpack__`, and the bare Python protocol
of a foreign array), and back to torch with `torch.from_dlpack`, memory shared
all the way."""

from __future__ import annotations

import pytest
import torch

tvm_ffi = pytest.importorskip(
    "tvm_ffi", reason="apache-tvm-ffi is not installed: pip install 'apache-tvm-ffi>=0.1.15'")
torch_simdev = pytest.importorskip(
    "torch_simdev", reason="the simdev reference plugin is not installed: "
    "pip install --no-build-isolation plugins/simdev")

import devbridge  # noqa: E402

KDL_EXT_DEV = 12


class ForeignArray:
    """An array of another library: only the Python protocol, no C table, so
    TVM-FFI must call `__dlpack__` itself."""

    def __init__(self, tensor):
        self._tensor = tensor

    def __dlpack__(self, **kwargs):
        return self._tensor.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._tensor.__dlpack_device__()


ROUTES = {
    "exchange table": lambda x: x,
    "legacy capsule": lambda x: x.__dlpack__(),
    "versioned capsule": lambda x: x.__dlpack__(max_version=(1, 3)),
    "python protocol": ForeignArray,
}


@pytest.fixture(autouse=True)
def installed():
    devbridge.install()
    yield


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("index", [0, 1])
def test_tvm_ffi_imports_simdev_tensors_and_torch_takes_them_back(route, index):
    base = torch.arange(24, dtype=torch.float32, device=f"simdev:{index}").reshape(4, 6)
    x = base[:, 1:5]
    source = ROUTES[route](x)
    if route == "python protocol":  # what a generic consumer asks first
        assert source.__dlpack_device__() == (KDL_EXT_DEV, index)
    ffi = tvm_ffi.from_dlpack(source)
    assert ffi.__dlpack_device__() == (KDL_EXT_DEV, index)
    assert ffi.data_ptr() == x.data_ptr()
    assert tuple(ffi.shape) == tuple(x.shape) and tuple(ffi.strides) == x.stride()
    back = torch.from_dlpack(ffi)
    assert back.device == x.device and back.data_ptr() == x.data_ptr() and back.stride() == x.stride()
    back.fill_(-1.0)
    assert (base.cpu()[:, 1:5] == -1.0).all() and base.cpu()[0, 0] == 0.0


def test_the_tensor_lives_as_long_as_tvm_ffi_holds_it():
    torch.simdev.synchronize(0)
    before = torch.simdev.memory_allocated(0)
    ffi = tvm_ffi.from_dlpack(ForeignArray(torch.full((1 << 18,), 3.0, device="simdev:0")))
    assert torch.simdev.memory_allocated(0) > before
    assert torch.from_dlpack(ffi).cpu().min() == 3.0
    del ffi
    assert torch.simdev.memory_allocated(0) == before
