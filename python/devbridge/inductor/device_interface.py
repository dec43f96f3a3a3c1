"""The Dynamo/Inductor device interface of a plugin device.

Everything comes from generic torch (torch.accelerator, torch.Stream,
torch.Event) and devbridge: the stream Inductor launches on is the live
native handle of the plugin's current stream (devbridge's C hot path, the
same call Triton's driver binds), and the hardware facts Inductor's
heuristics read (multiprocessor count, compute capability, warp size) are the
kernel runtime's answers for the declared hardware, so they agree with the
GPUTarget devbridge's Triton driver reports.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch

from .. import _C
from . import _torch_api


@dataclass(frozen=True)
class PluginDeviceProperties:
    """What Inductor reads of a device's properties (DeviceProperties.create,
    the benchmarker's flush buffer)."""

    name: str
    multi_processor_count: int
    major: int
    minor: int
    warp_size: int
    max_threads_per_block: int
    regs_per_multiprocessor: int
    max_shared_memory: int
    L2_cache_size: int | None  # noqa: N815 (Inductor's attribute name)


def _hardware_properties(device: str, index: int) -> PluginDeviceProperties:
    from ..triton import driver
    from ..triton.hardware import require

    hardware = require(device)
    properties = dict(_C.kernel_runtime_device_properties(driver().kernel_runtime(), index))
    arch = int(properties["arch"])
    return PluginDeviceProperties(
        name=f"{device}:{index} ({hardware.compiler} hardware)",
        multi_processor_count=int(properties["multiprocessor_count"]),
        major=arch // 10, minor=arch % 10,
        warp_size=int(properties["warp_size"]),
        max_threads_per_block=min(int(properties["max_threads_per_block"]), 1024),
        regs_per_multiprocessor=int(properties["max_num_regs"]),
        max_shared_memory=int(properties["max_shared_mem"]),
        # What the benchmarker flushes: the compiler's hook, None for Inductor's default
        L2_cache_size=hardware.hook("l2_cache_size"),
    )


def make_device_interface(device: str):
    """A DeviceInterface subclass for the plugin device `device`."""
    base = _torch_api.device_interface_base()
    properties_cache: dict[int, PluginDeviceProperties] = {}
    properties_lock = threading.Lock()

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

    def properties(where=None) -> PluginDeviceProperties:
        index = index_of(where)
        with properties_lock:
            if index not in properties_cache:
                properties_cache[index] = _hardware_properties(device, index)
            return properties_cache[index]

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

    class PluginDeviceInterface(base):
        device = torch.accelerator.device_index  # the guard: `with device(i):`
        Event = PluginEvent
        Stream = PluginStream

        class Worker:
            # Called in Inductor's compile sidecar before it forks its
            # workers: the kernel runtime's properties, no stream or memory.
            @staticmethod
            def set_device(index: int) -> None:
                _C.set_current_device(device, int(index))

            @staticmethod
            def current_device() -> int:
                return current_index()

            @staticmethod
            def get_device_properties(where=None) -> PluginDeviceProperties:
                return properties(where)

        # The stream Inductor's wrapper and autotuner launch on: the native
        # handle of the calling thread's current stream, from C.
        get_raw_stream = staticmethod(_C.plugin_current_stream)

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
        def current_stream():
            return torch.accelerator.current_stream(current_index())

        @staticmethod
        def set_stream(stream) -> None:
            torch.accelerator.set_stream(stream)

        @staticmethod
        def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
            torch.accelerator.set_stream(torch.Stream(stream_id=stream_id, device_index=device_index,
                                                      device_type=device_type))

        @staticmethod
        def synchronize(where=None) -> None:
            torch.accelerator.synchronize(index_of(where))

        @classmethod
        def get_device_properties(cls, where=None) -> PluginDeviceProperties:
            return properties(where)

        @staticmethod
        def get_compute_capability(where=None) -> int:
            # Inductor passes it as the `arch` of GPUTarget(device, arch,
            # warp_size): the kernel runtime's, as devbridge's driver reports.
            p = properties(where)
            return p.major * 10 + p.minor

        @staticmethod
        def is_bf16_supported(including_emulation: bool = False) -> bool:
            return True

        @staticmethod
        def memory_allocated(where=None) -> int:
            return torch.accelerator.memory_allocated(index_of(where)) if hasattr(
                torch.accelerator, "memory_allocated") else 0

        @staticmethod
        def is_triton_capable(where=None) -> bool:
            from ..triton.hardware import declared

            return declared(device) is not None

        @classmethod
        def raise_if_triton_unavailable(cls, where=None) -> None:
            from ..triton.hardware import require

            require(device)

    PluginDeviceInterface.__name__ = PluginDeviceInterface.__qualname__ = f"DevbridgeInterface_{device}"
    PluginEvent.__qualname__ = f"{PluginDeviceInterface.__name__}.Event"
    PluginStream.__qualname__ = f"{PluginDeviceInterface.__name__}.Stream"
    return PluginDeviceInterface
