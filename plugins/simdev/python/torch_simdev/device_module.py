"""``torch.simdev``: the device module of the simdev backend.

Streams and events are the generic ``torch.Stream(device="simdev")`` and
``torch.Event``; ``torch.accelerator`` works on simdev as well. This module
adds what is simdev-specific (the debug op delay) and the usual per-device
helpers (``device``, ``synchronize``, memory statistics), mirroring
``torch.cuda`` names where they exist. Device-generic torch code (FSDP2's
``fully_shard``, ``DeviceMesh``) reaches the device as ``getattr(torch,
device_type)`` and uses torch.cuda's stream names: ``Stream(priority=...)``,
``Event()``, ``with stream(s):``, ``StreamContext``, ``set_stream``,
``current_stream``, ``default_stream`` are here for it (``Stream`` is a
``torch.Stream`` subclass, ``Event()`` a plain ``torch.Event``).
"""

from __future__ import annotations

import contextlib
import threading
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


# There is deliberately no get_rng_state/set_rng_state (nor their _all forms):
# simdev has no per-device generator whose state they could be. Handing out
# the CPU generator's state would mislead device-generic code: DTensor's
# OffsetBasedRNGTracker turns itself on when the device module has
# set_rng_state, then reads the state as a CUDA-style Philox (seed, offset)
# pair and rewrites its "offset" bytes, which in the CPU generator's Mersenne
# Twister state would silently corrupt it. Without them DTensor says that its
# random operators are not fully supported on the mesh and runs them plainly.


# ---------------------------------------------------------------- streams and events
# torch.cuda's names, for device-generic torch code (FSDP2, DeviceMesh).


def _check_stream(stream: Any) -> torch.Stream:
    """``stream`` if it is a simdev stream; a TypeError or ValueError naming what to pass if not."""
    if not isinstance(stream, torch.Stream):
        raise TypeError(
            f"expected a simdev stream, got {type(stream).__name__}; pass torch.simdev.Stream(), "
            "torch.simdev.current_stream() or torch.Stream(device='simdev')"
        )
    if stream.device.type != "simdev":
        raise ValueError(
            f"expected a simdev stream, got a stream of {stream.device}; pass torch.simdev.Stream(), "
            "torch.simdev.current_stream() or torch.Stream(device='simdev')"
        )
    return stream


def _stream_device(device: _DeviceLike) -> torch.device:
    """The simdev device of a new stream: None or a negative index is the current device."""
    if isinstance(device, int) and device < 0:
        device = None
    return torch.device("simdev", _index(device))


# The StreamContexts of the `with s:` blocks that each thread is in (Stream.__enter__).
_entered = threading.local()


class Stream(torch.Stream):
    """A simdev stream, like ``torch.cuda.Stream``: ``Stream(device=None, priority=0)``.

    A subclass of ``torch.Stream`` (``torch.Stream`` can be subclassed from Python
    with a ``__new__`` of its own on torch 2.13, checked, so this is not a factory
    returning a plain ``torch.Stream``): torch's stream APIs take it
    (``torch.accelerator.set_stream``, ``Event.record``/``wait``,
    ``Tensor.record_stream``; they check with isinstance) and it has all of
    ``torch.Stream``'s methods (``wait_event``, ``wait_stream``, ``record_event``,
    ``query``, ``synchronize``, ``native_handle``), comparing equal to the plain
    ``torch.Stream`` of the same stream. New streams come from the device's pool,
    as ``torch.Stream(device=...)`` gives them.

    ``device``: a simdev device or index (None or a negative index: the current
    device). ``priority`` is accepted for torch.cuda's signature (FSDP2 asks for
    ``priority=-1``) and ignored: simdev streams have no priorities, every
    stream's worker thread runs at the same priority.

    ``Stream(stream_id=..., device_index=..., device_type=...)`` wraps an
    existing stream, as ``torch.Stream`` does.

    ``with s:`` makes ``s`` current like ``with torch.simdev.stream(s):``, with
    what it restores kept per ``with`` block and thread (``torch.Stream``'s own
    ``__enter__`` keeps it on the stream object, so two threads in ``with s:``
    of one stream could restore each other's previous stream).
    """

    def __new__(
        cls,
        device: _DeviceLike = None,
        priority: int = 0,
        *,
        stream_id: Optional[int] = None,
        device_index: Optional[int] = None,
        device_type: Optional[int] = None,
    ) -> "Stream":
        if stream_id is not None or device_index is not None or device_type is not None:
            if stream_id is None or device_index is None or device_type is None:
                raise TypeError("Stream(stream_id=, device_index=, device_type=) needs all three")
            stream = super().__new__(cls, stream_id=stream_id, device_index=device_index, device_type=device_type)
            return _check_stream(stream)
        return super().__new__(cls, device=_stream_device(device), priority=int(priority))

    def __enter__(self) -> "Stream":
        context = StreamContext(self)
        context.__enter__()
        stack = getattr(_entered, "contexts", None)
        if stack is None:
            stack = _entered.contexts = []
        stack.append(context)
        return self

    def __exit__(self, *exc: Any) -> None:
        stack = getattr(_entered, "contexts", [])
        for position in range(len(stack) - 1, -1, -1):  # this thread's innermost `with self:`
            if stack[position].stream is self:
                stack.pop(position).__exit__(*exc)
                return
        raise RuntimeError("Stream.__exit__ without a matching __enter__ in this thread")


class _EventType(type):
    # isinstance(e, torch.simdev.Event): any torch.Event of simdev (what Event() returns).
    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, torch.Event) and instance.device.type == "simdev"


class Event(metaclass=_EventType):
    """A simdev event, like ``torch.cuda.Event``:
    ``Event(enable_timing=False, blocking=False, interprocess=False)``.

    Returns a plain ``torch.Event`` on simdev, not an instance of a subclass:
    on torch 2.13 ``torch.Event`` can be subclassed from Python, but
    ``torch.Event.elapsed_time`` and ``torch.Stream.record_event`` then refuse
    the subclass's instances as their event argument ("expected other to be a
    torch.Event object"), so a subclass would break ``start.elapsed_time(end)``.
    ``isinstance(e, torch.simdev.Event)`` holds for every simdev ``torch.Event``.
    The event takes the device of the stream it is first recorded on;
    ``record``, ``wait``, ``query``, ``synchronize`` and (with
    ``enable_timing=True``) ``elapsed_time`` are ``torch.Event``'s.
    """

    def __new__(  # type: ignore[misc]
        cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> torch.Event:
        if interprocess:
            raise NotImplementedError(
                "simdev events cannot be shared between processes (interprocess=True): a simdev "
                "device is simulated inside one process, so there is no IPC handle to give another "
                "process; create the event with interprocess=False"
            )
        return torch.Event(device="simdev", enable_timing=bool(enable_timing), blocking=bool(blocking))


class StreamContext:
    """Context manager that makes ``stream`` current on its device, like
    ``torch.cuda.StreamContext``; ``None``: does nothing.

    On entry it saves the current device, that device's current stream and, when
    ``stream`` is on another device, that device's current stream; on exit it
    restores all three. The saved state is this object's (one per ``with``
    block), never the stream's.
    """

    def __init__(self, stream: Optional[torch.Stream]):
        self.stream = None if stream is None else _check_stream(stream)
        self.src_prev_stream: Optional[torch.Stream] = None
        self.dst_prev_stream: Optional[torch.Stream] = None

    def __enter__(self) -> Optional[torch.Stream]:
        stream = self.stream
        if stream is None:
            return None
        previous_device = _C.current_device()
        self.src_prev_stream = torch.accelerator.current_stream(previous_device)
        self.dst_prev_stream = None
        if stream.device_index != previous_device:
            self.dst_prev_stream = torch.accelerator.current_stream(stream.device_index)
        torch.accelerator.set_stream(stream)  # also makes the stream's device current
        return stream

    def __exit__(self, *exc: Any) -> None:
        if self.stream is None:
            return
        if self.dst_prev_stream is not None:
            torch.accelerator.set_stream(self.dst_prev_stream)
        torch.accelerator.set_stream(self.src_prev_stream)  # and the previous device
        self.src_prev_stream = self.dst_prev_stream = None


def stream(stream: Optional[torch.Stream]) -> StreamContext:
    """``with torch.simdev.stream(s):`` runs the block with ``s`` current on its device
    (and its device current), restoring both after; ``None``: does nothing."""
    return StreamContext(stream)


def set_stream(stream: Optional[torch.Stream]) -> None:
    """Make ``stream`` current on its device (and its device current); ``None``: no-op."""
    if stream is None:
        return
    torch.accelerator.set_stream(_check_stream(stream))


def _wrap(stream: torch.Stream) -> Stream:
    return Stream(stream_id=stream.stream_id, device_index=stream.device_index, device_type=stream.device_type)


def current_stream(device: _DeviceLike = None) -> Stream:
    """The current stream of ``device`` (default: the current device), as a
    ``torch.simdev.Stream``; equal to ``torch.accelerator.current_stream``'s."""
    return _wrap(torch.accelerator.current_stream(_index(device)))


def default_stream(device: _DeviceLike = None) -> Stream:
    """The default stream of ``device`` (stream id 0, the runtime's sdStreamGetDefault)."""
    index = _index(device)
    device_type = torch.accelerator.current_stream(index).device_type
    return Stream(stream_id=0, device_index=index, device_type=device_type)


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
