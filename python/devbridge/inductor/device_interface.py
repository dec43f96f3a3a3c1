"""The Dynamo/Inductor device interface of a plugin device: the one Triton's
driver hands out (devbridge/triton/device_interface.py: streams, events,
the device guard, the raw stream) under Dynamo's DeviceInterface base, plus
what only Inductor asks. The hardware facts its heuristics read
(multiprocessor count, compute capability, warp size) are the kernel
runtime's answers for the declared hardware, so they agree with the
GPUTarget devbridge's Triton driver reports.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

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
    from ..triton import device_interface

    shared = device_interface.for_device(device)
    properties_cache: dict[int, PluginDeviceProperties] = {}
    properties_lock = threading.Lock()

    def properties(where=None) -> PluginDeviceProperties:
        index = shared._index_of(where)
        with properties_lock:
            if index not in properties_cache:
                properties_cache[index] = _hardware_properties(device, index)
            return properties_cache[index]

    # The shared class comes first: Dynamo's base declares the same methods
    # (most raising NotImplementedError).
    class PluginDeviceInterface(shared, _torch_api.device_interface_base()):
        class Worker:
            # Called in Inductor's compile sidecar before it forks its
            # workers: the kernel runtime's properties, no stream or memory.
            @staticmethod
            def set_device(index: int) -> None:
                _C.set_current_device(device, int(index))

            @staticmethod
            def current_device() -> int:
                return _C.current_device(device)

            @staticmethod
            def get_device_properties(where=None) -> PluginDeviceProperties:
                return properties(where)

        @classmethod
        def get_device_properties(cls, where=None) -> PluginDeviceProperties:
            return properties(where)

        @staticmethod
        def get_compute_capability(where=None) -> int:
            # Inductor passes it as the `arch` of GPUTarget(device, arch,
            # warp_size): the kernel runtime's, as devbridge's driver reports.
            p = properties(where)
            return p.major * 10 + p.minor

    PluginDeviceInterface.__name__ = PluginDeviceInterface.__qualname__ = shared.__name__
    return PluginDeviceInterface
