"""torch.cudadev: the device module of the cudadev backend.

Registered as ``torch.cudadev`` when torch_cudadev is imported. Streams and
events are PyTorch's generic ones: ``torch.Stream(device="cudadev")``,
``torch.Event(device="cudadev")``, ``torch.accelerator.current_stream()``, and
``torch.Stream.native_handle`` is the ``cudaStream_t``.

Device-generic torch code (FSDP2's ``fully_shard``, ``DeviceMesh``, DTensor's
random-number tracker) reaches the device as ``getattr(torch, device_type)``
and uses torch.cuda's names: ``Stream(priority=...)``, ``Event()``, ``with
stream(s):``, ``StreamContext``, ``set_stream``, ``current_stream``,
``default_stream``, ``get_rng_state``/``set_rng_state`` are here for it
(``Stream`` is a ``torch.Stream`` subclass, ``Event()`` a ``torch.Event``),
written as simdev's (plugins/simdev/python/torch_simdev/device_module.py).
"""

import threading
from typing import Any, Optional, Union

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
        raise ValueError(f"expected a cudadev device, got {device}; pass e.g. 'cudadev:0' or an index")
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


def _current_if_negative(index: int) -> int:
    return current_device() if index < 0 else index


def get_rng_state(device: _Device = None) -> torch.Tensor:
    """The random-number state of `device` (default: current): torch.cuda's of the
    same GPU, the generator cudadev's random operators draw from (a Philox seed
    and offset, as DTensor's random-number tracker expects)."""
    return torch.cuda.get_rng_state(_current_if_negative(_device_index(device)))


def set_rng_state(new_state: torch.Tensor, device: _Device = None) -> None:
    """Set the random-number state of `device` (default: current), torch.cuda's of the same GPU."""
    torch.cuda.set_rng_state(new_state, _current_if_negative(_device_index(device)))


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


# ---------------------------------------------------------------- streams and events
# torch.cuda's names, for device-generic torch code (FSDP2, DeviceMesh). The
# same code as simdev's device_module.py; keep the two alike.


def _check_stream(stream: Any) -> torch.Stream:
    """`stream` if it is a cudadev stream; a TypeError or ValueError naming what to pass if not."""
    if not isinstance(stream, torch.Stream):
        raise TypeError(
            f"expected a cudadev stream, got {type(stream).__name__}; pass torch.cudadev.Stream(), "
            "torch.cudadev.current_stream() or torch.Stream(device='cudadev')"
        )
    if stream.device.type != "cudadev":
        raise ValueError(
            f"expected a cudadev stream, got a stream of {stream.device}; pass torch.cudadev.Stream(), "
            "torch.cudadev.current_stream() or torch.Stream(device='cudadev')"
        )
    return stream


# The StreamContexts of the `with s:` blocks that each thread is in (Stream.__enter__).
_entered = threading.local()


class Stream(torch.Stream):
    """A cudadev stream, like ``torch.cuda.Stream``: ``Stream(device=None, priority=0)``.

    A subclass of ``torch.Stream`` (``torch.Stream`` can be subclassed from Python
    with a ``__new__`` of its own on torch 2.13, checked, so this is not a factory
    returning a plain ``torch.Stream``): torch's stream APIs take it
    (``torch.accelerator.set_stream``, ``Event.record``/``wait``,
    ``Tensor.record_stream``; they check with isinstance) and it has all of
    ``torch.Stream``'s methods (``wait_event``, ``wait_stream``, ``record_event``,
    ``query``, ``synchronize``, ``native_handle``: the ``cudaStream_t``),
    comparing equal to the plain ``torch.Stream`` of the same stream.

    ``device``: a cudadev device or index (None or a negative index: the current
    device). ``priority``: as torch.cuda's, negative is higher; cudadev has two
    pools, so a negative priority gives a stream of the greatest priority and any
    other one of the least.

    ``Stream(stream_id=..., device_index=..., device_type=...)`` wraps an
    existing stream, as ``torch.Stream`` does.

    ``with s:`` makes ``s`` current like ``with torch.cudadev.stream(s):``, with
    what it restores kept per ``with`` block and thread (``torch.Stream``'s own
    ``__enter__`` keeps it on the stream object, so two threads in ``with s:``
    of one stream could restore each other's previous stream).
    """

    def __new__(
        cls,
        device: _Device = None,
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
        index = _current_if_negative(_device_index(device))
        return super().__new__(cls, device=torch.device("cudadev", index), priority=int(priority))

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
    # isinstance(e, torch.cudadev.Event): any torch.Event of cudadev (what Event() returns).
    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, torch.Event) and instance.device.type == "cudadev"


class Event(metaclass=_EventType):
    """A cudadev event, like ``torch.cuda.Event``:
    ``Event(enable_timing=False, blocking=False, interprocess=False)``.

    Returns a plain ``torch.Event`` on cudadev, not an instance of a subclass:
    on torch 2.13 ``torch.Event`` can be subclassed from Python, but
    ``torch.Event.elapsed_time`` and ``torch.Stream.record_event`` then refuse
    the subclass's instances as their event argument ("expected other to be a
    torch.Event object"), so a subclass would break ``start.elapsed_time(end)``.
    ``isinstance(e, torch.cudadev.Event)`` holds for every cudadev ``torch.Event``.
    The event takes the device of the stream it is first recorded on.
    """

    def __new__(  # type: ignore[misc]
        cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> torch.Event:
        if interprocess:
            raise NotImplementedError(
                "cudadev events cannot be shared between processes (interprocess=True): cudadev's "
                "events are torch.Event, which has no IPC support in torch; create the event with "
                "interprocess=False"
            )
        return torch.Event(device="cudadev", enable_timing=bool(enable_timing), blocking=bool(blocking))


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
        previous_device = current_device()
        self.src_prev_stream = torch.accelerator.current_stream(torch.device("cudadev", previous_device))
        self.dst_prev_stream = None
        if stream.device_index != previous_device:
            self.dst_prev_stream = torch.accelerator.current_stream(stream.device)
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
    """``with torch.cudadev.stream(s):`` runs the block with ``s`` current on its device
    (and its device current), restoring both after; ``None``: does nothing."""
    return StreamContext(stream)


def set_stream(stream: Optional[torch.Stream]) -> None:
    """Make ``stream`` current on its device (and its device current); ``None``: no-op."""
    if stream is None:
        return
    torch.accelerator.set_stream(_check_stream(stream))


def _wrap(stream: torch.Stream) -> Stream:
    return Stream(stream_id=stream.stream_id, device_index=stream.device_index, device_type=stream.device_type)


def current_stream(device: _Device = None) -> Stream:
    """The current cudadev stream of `device` (default: current), as a
    ``torch.cudadev.Stream``; equal to ``torch.accelerator.current_stream``'s."""
    index = _current_if_negative(_device_index(device))
    return _wrap(torch.accelerator.current_stream(torch.device("cudadev", index)))


def default_stream(device: _Device = None) -> Stream:
    """cudadev's default stream of `device` (stream id 0; its own CUDA stream,
    or CUDA's null stream with CUDADEV_USE_NULL_STREAM=1)."""
    index = _current_if_negative(_device_index(device))
    return Stream(stream_id=0, device_index=index, device_type=_C._privateuse1_device_type())
