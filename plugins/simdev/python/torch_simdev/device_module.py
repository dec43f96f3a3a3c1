"""``torch.simdev``: the device module of the simdev backend.

Streams and events are the generic ``torch.Stream(device="simdev")`` and
``torch.Event``; ``torch.accelerator`` works on simdev as well. This module
adds what is simdev-specific (the debug op delay) and the usual per-device
helpers (``device``, ``synchronize``, memory statistics), mirroring
``torch.cuda`` names where they exist.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional, Union

import torch

from . import _C

_DeviceLike = Union[torch.device, str, int, None]


def _index(device: _DeviceLike) -> int:
    """The device index of ``device`` (None: the current device)."""
    if device is None:
        return _C.current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "simdev":
        raise ValueError(f"expected a simdev device, got {device}; pass e.g. 'simdev:0' or an index")
    return _C.current_device() if device.index is None else device.index


# ---------------------------------------------------------------- devices


def is_available() -> bool:
    return _C.device_count() > 0


def device_count() -> int:
    return _C.device_count()


def current_device() -> int:
    return _C.current_device()


def set_device(device: _DeviceLike) -> None:
    _C.set_device(_index(device))


class device:
    """Context manager that makes ``device`` current, restoring the previous one on exit."""

    def __init__(self, device: _DeviceLike):
        self.index = _index(device)
        self.previous = -1

    def __enter__(self) -> None:
        self.previous = _C.current_device()
        if self.index != self.previous:
            _C.set_device(self.index)

    def __exit__(self, *exc: Any) -> None:
        if self.index != self.previous:
            _C.set_device(self.previous)


def is_initialized() -> bool:
    # simdev needs no lazy initialization: the runtime starts with the module.
    return True


def init() -> None:
    """No-op: simdev is ready as soon as torch_simdev is imported."""


def _lazy_init() -> None:
    """torch's lazy-initialization hook for PrivateUse1 (``device_lazy_init``).

    Nothing to initialize, but the function must exist: torch calls it on the
    first simdev tensor and only then marks the device type initialized, and
    torch 2.11's ``torch.accelerator.synchronize()`` silently returns without
    synchronizing for a lazy-init device type that is not marked initialized.
    Without it a read after ``synchronize()`` raced the streams (seen on the
    H200 host: tests/stress/ordering_stress.py, 39 bad of 400).
    """


def _is_in_bad_fork() -> bool:
    # Streams are threads; a forked child gets none of them. simdev does not
    # track forks, and torch only asks this before seeding.
    return False


def synchronize(device: _DeviceLike = None) -> None:
    """Wait for all work queued on every stream of ``device`` (default: current)."""
    _C.synchronize(_index(device))


# ---------------------------------------------------------------- debug delay


def set_op_delay_us(microseconds: int) -> None:
    """Sleep this long before every queued operation, on every stream and device."""
    _C.set_op_delay_us(microseconds)


def get_op_delay_us() -> int:
    return _C.get_op_delay_us()


@contextlib.contextmanager
def op_delay(microseconds: int) -> Iterator[None]:
    """Run the body with the debug op delay set, restoring the previous delay after."""
    previous = _C.get_op_delay_us()
    _C.set_op_delay_us(microseconds)
    try:
        yield
    finally:
        _C.set_op_delay_us(previous)


# ---------------------------------------------------------------- fault injection


def inject_fault(kind: str, nth: int = 1) -> None:
    """Make the nth operation of `kind` from now on (1: the next) fail, for
    tests of what a program does when a device fails:

      "allocation"  the nth allocation of a non-empty simdev tensor raises
                    torch.OutOfMemoryError at once (the message says it was
                    injected), as a full device would
      "kernel"      the nth kernel to start running (a Triton kernel's grid,
                    or an operator's work on a stream) fails instead of
                    running, as a device fault would: the next
                    synchronization of its stream raises
                    torch.AcceleratorError (sdErrorLaunchFailure) naming it

    Kernels count when they start running, so work queued before the call
    that has not started yet counts too: synchronize first to aim at a given
    kernel. One fault per call, on any device, stream or thread; nth=0
    disarms."""
    _C.inject_fault(kind, nth)


def injected_faults() -> dict:
    """{"allocation": n, "kernel": n}: the faults injected in this process so far."""
    return dict(_C.injected_faults())


# ---------------------------------------------------------------- memory


def empty_cache() -> None:
    """Return the caching allocator's unused blocks (all devices) to the runtime."""
    _C.empty_cache()


def memory_stats(device: _DeviceLike = None) -> dict:
    return _C.memory_stats(_index(device))


def memory_allocated(device: _DeviceLike = None) -> int:
    """Bytes held by live tensors on ``device`` (rounded to the allocator's block size)."""
    return _C.memory_stats(_index(device))["allocated_bytes"]


def max_memory_allocated(device: _DeviceLike = None) -> int:
    return _C.memory_stats(_index(device))["allocated_bytes_peak"]


def memory_reserved(device: _DeviceLike = None) -> int:
    """Bytes the caching allocator holds from the runtime (live and cached blocks)."""
    return _C.memory_stats(_index(device))["reserved_bytes"]


def max_memory_reserved(device: _DeviceLike = None) -> int:
    return _C.memory_stats(_index(device))["reserved_bytes_peak"]


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    _C.reset_peak_memory_stats(_index(device))


def mem_get_info(device: _DeviceLike = None) -> tuple[int, int]:
    """(free, total) bytes of ``device``, like ``torch.cuda.mem_get_info``."""
    used, capacity = _C.mem_get_info(_index(device))
    return capacity - used, capacity


# ---------------------------------------------------------------- random numbers
# simdev has no generator of its own: random operators run through the CPU
# fallback and use the CPU default generator. torch.manual_seed() calls
# manual_seed_all() here; both seed that generator.


def manual_seed(seed: int) -> None:
    torch.default_generator.manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    torch.default_generator.manual_seed(int(seed))


def seed() -> None:
    torch.default_generator.seed()


def seed_all() -> None:
    torch.default_generator.seed()


def initial_seed() -> int:
    return torch.default_generator.initial_seed()


def current_stream(device: _DeviceLike = None) -> torch.Stream:
    """The current stream of ``device``: same as ``torch.accelerator.current_stream``."""
    return torch.accelerator.current_stream(_index(device))


def default_stream(device: _DeviceLike = None) -> torch.Stream:
    """The default stream of ``device`` (stream id 0, the runtime's sdStreamGetDefault)."""
    index = _index(device)
    device_type = torch.accelerator.current_stream(index).device_type
    return torch.Stream(stream_id=0, device_index=index, device_type=device_type)


def external_stream(handle: int, device: _DeviceLike = None) -> torch.Stream:
    """A ``torch.Stream`` for a simdev stream created outside torch (an ``sdStream_t``
    from ``sdStreamCreate``, as a kernel library or a DLPack consumer makes one),
    like ``torch.cuda.ExternalStream``. The stream stays the creator's: destroying
    it while torch still uses it is the creator's error."""
    index = _index(device)
    device_type = torch.accelerator.current_stream(index).device_type
    return torch.Stream(stream_id=_C.external_stream_id(index, handle), device_index=index,
                        device_type=device_type)


def _current_stream_handle(device: Optional[int] = None) -> int:
    return _C.current_stream_handle(-1 if device is None else device)
