"""devbridge's driver for triton-ascend 3.2.0, the release without a
host-runtime registry.

It derives from the NPUDriver Triton discovered (so every other behaviour is
triton-ascend's own) and replaces what 3.2.0 hard-wires to torch_npu: device,
stream, device interface, benchmark cache, benchmarker and torch device come
from devbridge's active policy (torch_plugin: any PrivateUse1 plugin);
binaries are loaded and launched by devbridge's CANN kernel runtime through
the generic launcher in the Ascend layout (no generated C++, no torch or
torch_npu headers, no C compiler at run time). It is made active with
set_active: 3.2.0 loads its driver module by path, twice, so patching
triton.backends.ascend.driver would not reach the driver Triton uses.
"""

from __future__ import annotations

import threading

from .. import policy
from . import _upstream

_lock = threading.Lock()
_driver = None


class AscendUtils:
    """`driver.utils`: what triton-ascend's NPUUtils answers, from devbridge's CANN runtime."""

    def __init__(self, driver):
        self._driver = driver
        self._runtime = None

    def runtime(self):
        if self._runtime is None:
            from devbridge import launch

            self._runtime = launch.kernel_runtime("ascend")
        return self._runtime

    def load_binary(self, name, kernel, shared, device):
        """(module, function, n_regs, n_spills): `name` is "<kernel> <mix_mode>", as 3.2.0's compiler names it."""
        from devbridge import launch

        loaded = launch.load_binary(kernel, name, device=self._driver.torch_device(int(device)),
                                    runtime=self.runtime(), shared=shared)
        return loaded.module, loaded.function, loaded.n_regs, loaded.n_spills

    def get_device_properties(self, device):
        from devbridge import _C

        cores = _C.kernel_runtime_device_properties(self.runtime(), int(device))["multiprocessor_count"]
        return {"max_shared_mem": 1, "num_aicore": cores, "num_vectorcore": 2 * cores}

    def get_aicore_num(self):
        return self.get_device_properties(self._driver.get_current_device())["num_aicore"]

    def get_arch(self):
        from devbridge import _C

        return _C.ascend_soc_name()


def ascend_launcher(src, metadata):
    """`launcher_cls`: devbridge's generic launcher in the Ascend layout."""
    from devbridge import launch

    from ._describe import describe

    ffts, cap_blocks = _upstream.launch_rules()
    name, plan, names, fields = describe(src, metadata, ffts=ffts, cap_blocks=cap_blocks)
    launch.register_hook_chain_type()
    return launch.Launcher._from_plan(name, plan, names, fields)


def _driver_class():
    from triton.backends.compiler import GPUTarget
    from triton.backends.driver import DriverBase

    npu_driver = _upstream.discovered_npu_driver_class()

    class DevbridgeAscendDriver(npu_driver):
        """triton-ascend 3.2.0's NPUDriver with devbridge's host runtime."""

        @classmethod
        def is_active(cls):
            return False  # devbridge.triton.ascend.activate() selects it

        def __init__(self):
            # NPUDriver.__init__ builds npu_utils.so against CANN and torch_npu: skipped.
            DriverBase.__init__(self)
            self.utils = AscendUtils(self)
            self.launcher_cls = ascend_launcher

        def device_name(self):
            return policy.call("device_name")

        def torch_device(self, index=None):
            import torch

            return torch.device(self.device_name(), self.get_current_device() if index is None else int(index))

        def get_current_device(self):
            return policy.call("get_current_device")

        def set_current_device(self, device):
            policy.call("set_current_device", int(device))

        def get_current_stream(self, device=None):
            return policy.call("get_current_stream", device)

        def get_active_torch_device(self):
            return policy.call("get_active_torch_device")

        def get_device_interface(self):
            return policy.call("get_device_interface")

        def get_empty_cache_for_benchmark(self):
            return policy.call("get_empty_tensor", 192 * 1024 * 1024 // 4)  # triton-ascend's size

        def clear_cache(self, cache):
            cache.zero_()

        def get_benchmarker(self):
            from ._benchmark import do_bench

            return do_bench

        def get_current_target(self):
            arch = npu_driver.__init__.__globals__["get_ascend_arch_from_env"]() or self.utils.get_arch()
            return GPUTarget("npu", arch, 0)

        def __repr__(self):
            return "<devbridge driver for triton-ascend 3.2.0 (policy-driven, CANN kernel runtime)>"

    return DevbridgeAscendDriver


def driver():
    """devbridge's triton-ascend 3.2.0 driver (created once)."""
    global _driver
    with _lock:
        if _driver is None:
            _driver = _driver_class()()
        return _driver


def activate():
    """Make it Triton's active driver and return it."""
    ours = driver()
    _upstream.set_active(ours)
    return ours
