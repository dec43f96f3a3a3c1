"""The device interface of a plugin device: one class per device, shared by
Triton and torch.compile.

Triton's benchmarker and autotuner take it from the driver
(`get_device_interface()`: synchronize(), Event(enable_timing=True));
devbridge.inductor registers a subclass of it with Dynamo, adding what only
Inductor asks (the hardware's properties, its compile workers' hooks).
Everything here comes from generic torch (torch.accelerator, torch.Stream,
torch.Event) and devbridge's C calls: the stream Inductor launches on is the
native handle of the calling thread's current stream, the same call Triton's
driver binds.
"""

from __future__ import annotations

import threading

import torch

from .. import _C


def _make(device: str) -> type:
    def current_index() -> int:
        return _C.current_device(device)

    def index_of(where) -> int:
        if where is None:
            return current_index()
        if isinstance(where, str):
            where = torch.device(where)
        if isinstance(where, torch.device):
            if where.type != device:
                raise ValueError(f"devbridge: the {device} device interface was asked about {where}")
            return current_index() if where.index is None else where.index
        return int(where)

    class PluginEvent(torch.Event):
        """torch.Event on the plugin device. torch.Event.elapsed_time accepts
        only an exact torch.Event as its argument, so the timing is kept in an
        inner plain event that every method uses."""

        def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
            return super().__new__(cls, torch.device(device, current_index()), enable_timing=enable_timing,
                                   blocking=blocking, interprocess=interprocess)

        def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
            self._event = torch.Event(torch.device(device, current_index()), enable_timing=enable_timing,
                                      blocking=blocking, interprocess=interprocess)

        def record(self, stream=None):
            return self._event.record(stream)

        def wait(self, stream=None):
            return self._event.wait(stream)

        def query(self):
            return self._event.query()

        def synchronize(self):
            return self._event.synchronize()

        def elapsed_time(self, end):
            return self._event.elapsed_time(end._event if isinstance(end, PluginEvent) else end)

    class PluginStream(torch.Stream):
        """torch.Stream on the plugin device (the current device by default)."""

        def __new__(cls, *args, **kwargs):
            where = kwargs.pop("device", args[0] if args else None)
            priority = kwargs.pop("priority", args[1] if len(args) > 1 else 0)
            where = torch.device(device, current_index()) if where is None else torch.device(where)
            return super().__new__(cls, device=where, priority=priority, **kwargs)

        def __init__(self, *args, **kwargs):
            pass

    class PluginDeviceInterface:
        device = torch.accelerator.device_index  # the guard: `with device(i):`
        Event = PluginEvent
        Stream = PluginStream

        # The stream Inductor's wrapper and autotuner launch on: the native
        # handle of the calling thread's current stream, from C.
        get_raw_stream = staticmethod(_C.current_stream)
        # devbridge's own: a device index from None, an int, "name:i" or a torch.device
        _index_of = staticmethod(index_of)

        @staticmethod
        def current_device() -> int:
            return current_index()

        @staticmethod
        def set_device(where) -> None:
            _C.set_current_device(device, index_of(where))

        @staticmethod
        def exchange_device(index: int) -> int:
            previous = current_index()
            if index != previous:
                _C.set_current_device(device, int(index))
            return previous

        @staticmethod
        def maybe_exchange_device(index: int) -> int:
            if index < 0:
                return -1
            return PluginDeviceInterface.exchange_device(index)

        @staticmethod
        def device_count() -> int:
            return _C.device_count(device)

        @staticmethod
        def is_available() -> bool:
            return _C.device_count(device) > 0

        @staticmethod
        def stream(stream):
            return torch.accelerator.stream(stream) if hasattr(torch.accelerator, "stream") else stream

        @staticmethod
        def current_stream(where=None):
            return torch.accelerator.current_stream(index_of(where))

        @staticmethod
        def set_stream(stream) -> None:
            torch.accelerator.set_stream(stream)

        @staticmethod
        def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
            torch.accelerator.set_stream(torch.Stream(stream_id=stream_id, device_index=device_index,
                                                      device_type=device_type))

        @staticmethod
        def synchronize(where=None) -> None:
            """Wait for every stream of the device (torch.accelerator.synchronize)."""
            torch.accelerator.synchronize(index_of(where))

        @staticmethod
        def is_bf16_supported(including_emulation: bool = False) -> bool:
            return True

        @staticmethod
        def memory_allocated(where=None) -> int:
            return torch.accelerator.memory_allocated(index_of(where)) if hasattr(
                torch.accelerator, "memory_allocated") else 0

        @staticmethod
        def is_triton_capable(where=None) -> bool:
            from .hardware import declared

            return declared(device) is not None

        @classmethod
        def raise_if_triton_unavailable(cls, where=None) -> None:
            from .hardware import require

            require(device)

    name = f"DevbridgeInterface_{device}"
    PluginDeviceInterface.__name__ = PluginDeviceInterface.__qualname__ = name
    PluginEvent.__qualname__ = f"{name}.Event"
    PluginStream.__qualname__ = f"{name}.Stream"
    return PluginDeviceInterface


_interfaces: dict[str, type] = {}
_interfaces_lock = threading.Lock()


def for_device(device: str) -> type:
    """The device interface class of the plugin device named `device` (one per name)."""
    with _interfaces_lock:
        if device not in _interfaces:
            _interfaces[device] = _make(device)
        return _interfaces[device]
