"""devbridge's Triton driver for plugin devices.

It derives from DriverBase, never GPUDriver (which binds torch.cuda). It is
Triton's default driver where the PrivateUse1 plugin is the only accelerator
Triton could serve (is_active()); where another Triton backend is active,
Triton's choice is untouched and devbridge.triton.activate() makes this one
the active driver. Every question Triton's
runtime asks goes to the active host-runtime policy (devbridge.triton.policy,
`torch_plugin` by default); binaries are loaded and launched through the
kernel runtime of the device's declared hardware.
"""

from __future__ import annotations

import threading

from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase

# upstream's ty_to_cpp, for map_python_to_cpp_type
_CPP_TYPES = {
    "i1": "int8_t", "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
    "u1": "uint8_t", "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t",
    "fp16": "double", "bf16": "double", "fp32": "double", "f32": "double", "fp64": "double",
}


class PluginDeviceIndex(int):
    """A plugin device index as get_current_device() returns it: an int (so
    torch.device, load_binary and properties take it as is) that is never
    equal to, and never hashes like, the plain int of another driver.
    Triton's JIT keys each kernel's compile cache and binder by this value
    (JITFunction.device_caches), so a kernel used on cuda:0 with NVIDIA's
    driver and on a plugin device 0 with this one keeps one cache for each
    instead of reusing the other's binaries and target."""

    __slots__ = ()

    def __eq__(self, other):
        return type(other) is PluginDeviceIndex and int(self) == int(other)

    def __ne__(self, other):
        return not self.__eq__(other)

    # int's own (C) hash: a dict finds the one canonical instance by identity
    # without a Python-level __eq__ call; next to a plain int of the same
    # value the two still differ by __eq__.
    __hash__ = int.__hash__

    def __repr__(self):
        return f"PluginDeviceIndex({int(self)})"


_INDICES = [PluginDeviceIndex(i) for i in range(128)]  # c10 device indices are < 128


class DevbridgeUtils:
    """What Triton calls `driver.utils`: load and unload binaries, device properties."""

    def __init__(self, driver: "DevbridgeDriver"):
        self._driver = driver

    def load_binary(self, name, kernel, shared, device):
        from devbridge import launch

        loaded = launch.load_binary(kernel, name, device=self._driver.torch_device(int(device)),
                                    runtime=self._driver.kernel_runtime(), shared=shared)
        return loaded.module, loaded.function, loaded.n_regs, loaded.n_spills, loaded.n_max_threads

    def unload_module(self, module):
        # Triton 3.8 calls this from CompiledKernel.__del__ (3.6 and 3.7 never
        # unload). A handle devbridge did not load belongs to another driver:
        # never an error inside __del__ (_triton_api.route_kernel_unloads
        # sends each kernel to the driver that loaded it).
        from devbridge import launch

        if launch.is_loaded(module):
            launch.unload(module)

    def get_device_properties(self, device):
        from devbridge import _C

        properties = dict(_C.kernel_runtime_device_properties(self._driver.kernel_runtime(), int(device)))
        # The names Triton's testing helpers read. The memory's clock and bus
        # width are the declared hardware's, else a nominal 1024 GB/s
        # (hardware.NOMINAL_MEMORY), never 0: Inductor divides by the
        # bandwidth triton.testing.get_dram_gbps() makes of them. The SM clock
        # stays 0 (torch asks nvidia-smi for it, on CUDA only).
        properties.setdefault("warpSize", properties["warp_size"])
        properties.setdefault("sm_clock_rate", 0)
        hardware = self._driver.hardware()
        declared_memory = hardware.memory_clock_khz is not None
        for name, value in hardware.memory_properties().items():
            if declared_memory or not properties.get(name):
                properties[name] = value
        return properties


def serves_by_default() -> bool:
    """Whether Triton's default driver should be devbridge's: a PrivateUse1
    plugin is loaded, this Triton is one devbridge was checked on, and no
    other Triton backend is active, so the plugin is the only accelerator
    Triton could serve (an NPU host; a simulated device on a CPU one). A plugin without
    declared hardware then gets devbridge's error naming the declaration,
    not Triton's "0 active drivers". Where another backend is active (cuda
    beside cudadev), Triton keeps it and activate() selects devbridge's."""
    import sys

    from devbridge import _triton_api, _versions

    if not (_versions.is_checked("triton") or _versions.allow_unchecked()):
        return False
    devbridge = sys.modules.get("devbridge")
    if devbridge is None or not hasattr(devbridge, "plugin_name"):
        import devbridge  # loads torch, whose autoload may load the plugin
    if not devbridge.plugin_name():
        return False
    return not _triton_api.other_active_backends()


_instance_lock = threading.Lock()


class DevbridgeDriver(DriverBase):
    """One per process: Triton creates its default driver by calling the
    class, torch's Inductor calls it again in set_driver_to_gpu(), and
    devbridge.triton.driver() once more; all get the same driver, so Triton
    and devbridge.triton.is_active() agree on which one is active."""

    _instance = None

    @classmethod
    def is_active(cls) -> bool:
        # Triton's question when it picks its default driver: it must not
        # raise, or no Triton kernel could run in this process.
        try:
            return serves_by_default()
        except Exception:  # noqa: BLE001 - a devbridge that cannot load serves nothing
            return False

    @classmethod
    def instance(cls):
        """The driver, if it was created; None otherwise."""
        return cls._instance

    def __new__(cls):
        with _instance_lock:
            if cls._instance is None:
                from devbridge import _triton_api

                _triton_api.route_kernel_unloads()  # before any kernel of ours is loaded
                driver = super().__new__(cls)
                driver._setup()
                cls._instance = driver
            return cls._instance

    def __init__(self) -> None:  # __new__ set the one driver up
        pass

    def _setup(self) -> None:
        super().__init__()
        from devbridge._C import Launcher

        self.launcher_cls = Launcher
        self.utils = DevbridgeUtils(self)
        self._runtimes = {}
        self.bind_policy()

    def bind_policy(self) -> None:
        """Bind the active policy's device and stream functions as this
        driver's get_current_device / get_current_stream: Triton's JIT calls
        both on every launch, so they go straight to the policy's functions.
        Called here, at every activate(), and by the registry's select() and
        register() and torch_plugin.configure(), which find this driver in
        Triton's backend table (_triton_api.devbridge_driver_or_none)."""
        from devbridge.triton import policy

        try:
            name = policy.active()
            device_fn = policy.lookup(name, "get_current_device")
            stream_fn = policy.lookup(name, "get_current_stream")
        except ValueError:
            # The selected policy lacks a method (or is unknown): calls then
            # go through policy.call and raise its error, naming the policy.
            name = None
            device_fn = lambda: policy.call("get_current_device")  # noqa: E731
            stream_fn = lambda device=None: policy.call("get_current_stream", device)  # noqa: E731
        indices, count = _INDICES, len(_INDICES)

        def get_current_device():
            index = device_fn()
            return indices[index] if 0 <= index < count else PluginDeviceIndex(index)

        if name == policy.DEFAULT:
            from devbridge.triton import torch_plugin

            fast = torch_plugin.fast_device_and_stream(_INDICES)
            if fast is not None:  # the same answers, from C without a Python frame
                get_current_device, stream_fn = fast
        self.get_current_device = get_current_device
        self.get_current_stream = stream_fn

    # -- policy
    @staticmethod
    def _call(method, *args):
        from devbridge.triton import policy

        return policy.call(method, *args)

    def device_name(self) -> str:
        return self._call("device_name")

    def torch_device(self, index=None):
        import torch

        return torch.device(self.device_name(), self.get_current_device() if index is None else int(index))

    # get_current_device() and get_current_stream(device=None) are bound per
    # instance by bind_policy().

    def set_current_device(self, device) -> None:
        self._call("set_current_device", int(device))

    def get_active_torch_device(self):
        return self._call("get_active_torch_device")

    def get_device_interface(self):
        return self._call("get_device_interface")

    def get_empty_cache_for_benchmark(self):
        # 256 MiB, as upstream's CUDA driver: larger than any L2 to flush.
        return self._call("get_empty_tensor", 256 * 1024 * 1024 // 4)

    def clear_cache(self, cache) -> None:
        cache.zero_()

    def get_benchmarker(self):
        from triton.testing import do_bench

        return do_bench

    # -- hardware
    def hardware(self):
        from devbridge.triton.hardware import require

        return require(self.device_name())

    def kernel_runtime(self):
        """The devbridge_kernel_runtime capsule of the device's hardware."""
        hardware = self.hardware()
        declared = hardware.kernel_runtime
        key = declared if isinstance(declared, str) else id(declared)
        # The entry holds the declared object itself: while it is cached its id
        # cannot be reused by a later declaration (a new function at a freed
        # address would otherwise be served the old function's capsule).
        cached = self._runtimes.get(key)
        if cached is not None and (cached[0] is declared or isinstance(declared, str)):
            return cached[1]
        from devbridge import _kernel_runtimes

        runtime = _kernel_runtimes.resolve(declared, f" declared for '{hardware.device}'")
        self._runtimes[key] = (declared, runtime)
        return runtime

    def get_current_target(self) -> GPUTarget:
        properties = self.utils.get_device_properties(int(self.get_current_device()))
        return GPUTarget(self.device_name(), properties["arch"], properties["warp_size"])

    def map_python_to_cpp_type(self, ty: str) -> str:
        if ty.startswith("*"):
            return "CUdeviceptr" if self.hardware().compiler == "nvidia" else "void*"
        if ty not in _CPP_TYPES:
            raise ValueError(f"devbridge: unknown Triton type {ty!r}")
        return _CPP_TYPES[ty]

    # -- context manager: `with devbridge.triton.activate():`
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        from devbridge.triton import _activation

        _activation.pop(self)  # devbridge.triton.deactivate()
        return False

    def __repr__(self) -> str:
        return "<devbridge Triton driver (policy-driven, for PrivateUse1 plugin devices)>"
