"""torch.cudadev: the device module of the cudadev backend.

Registered as ``torch.cudadev`` when torch_cudadev is imported. Streams and
events are PyTorch's generic ones: ``torch.Stream(device="cudadev")``,
``torch.Event(device="cudadev")``, ``torch.accelerator.current_stream()``, and
``torch.Stream.native_handle`` is the ``cudaStream_t``.
"""

from typing import Optional, Union

import torch

from . import _C

_Device = Union[int, str, torch.device, None]


def _device_index(device: _Device) -> int:
    """The cudadev device index for `device`; -1 means the current device."""
    if device is None:
        return -1
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "cudadev":
        raise ValueError(f"expected a cudadev device, got {device}")
    return -1 if device.index is None else device.index


def is_available() -> bool:
    return _C._device_count() > 0


def device_count() -> int:
    return _C._device_count()


def current_device() -> int:
    return _C._current_device()


def set_device(device: _Device) -> None:
    index = _device_index(device)
    if index >= 0:
        _C._set_device(index)


class device:
    """Context manager that makes `device` the current cudadev device."""

    def __init__(self, device: _Device):
        self.index = _device_index(device)
        self.previous = -1

    def __enter__(self):
        self.previous = _C._exchange_device(self.index)
        return self

    def __exit__(self, *exc_info):
        _C._exchange_device(self.previous)
        return False


def synchronize(device: _Device = None) -> None:
    """Wait for all work on the GPU of `device` (cudadev's and torch.cuda's)."""
    _C._synchronize(_device_index(device))


def current_stream(device: _Device = None) -> torch.Stream:
    index = _device_index(device)
    if index < 0:
        index = current_device()
    return torch.accelerator.current_stream(torch.device("cudadev", index))


def default_stream(device: _Device = None) -> torch.Stream:
    """cudadev's default stream of `device` (stream id 0; its own CUDA stream,
    or CUDA's null stream with CUDADEV_USE_NULL_STREAM=1)."""
    index = _device_index(device)
    if index < 0:
        index = current_device()
    return torch.Stream(
        stream_id=0, device_index=index, device_type=_C._privateuse1_device_type()
    )


def empty_cache() -> None:
    """Return memory cached by cudadev's allocator to the driver."""
    _C._empty_cache()


def memory_allocated(device: _Device = None) -> int:
    """Bytes held by cudadev tensors on `device`, including memory adopted from
    torch.cuda's caching allocator for operator results."""
    return _C._memory_allocated(_device_index(device))


def max_memory_allocated(device: _Device = None) -> int:
    return _C._max_memory_allocated(_device_index(device))


def reset_peak_memory_stats(device: _Device = None) -> None:
    _C._reset_peak_memory_stats(_device_index(device))


# cudadev's random operators run torch's CUDA kernels, which draw from the
# CUDA generators of the same GPUs, so seeding is torch.cuda's.
def manual_seed(seed: int) -> None:
    torch.cuda.manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    torch.cuda.manual_seed_all(seed)


_initialized = False


def _lazy_init() -> None:
    """Called by torch before the first cudadev tensor is made: cudadev runs on
    the CUDA runtime that torch.cuda initialises."""
    global _initialized
    if not _initialized:
        torch.cuda.init()
        _initialized = True


def is_initialized() -> bool:
    return _initialized


def _sleep_on_current_stream(milliseconds: float, device: _Device = None) -> None:
    """Test helper: keep the current cudadev stream of `device` busy for about
    `milliseconds` (a spin kernel), so later work on it visibly waits."""
    _C._sleep_on_current_stream(float(milliseconds), _device_index(device))


def _current_stream_handle(device: _Device = None) -> int:
    """The cudaStream_t of the current cudadev stream of `device`, as an int."""
    return _C._current_stream_handle(_device_index(device))


def _default_stream_is_null_stream() -> bool:
    """True when CUDADEV_USE_NULL_STREAM=1 made CUDA's null stream the default."""
    return _C._default_stream_is_null_stream()
