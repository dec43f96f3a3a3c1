"""devbridge as the host runtime of Triton's Ascend backends (docs/ascend.md).

Two Triton routes, picked by what is installed:

  install()    triton-ascend main / FlagTree (a BackendStrategyRegistry):
               registers the `torch_plugin` category (strategies.py), selects
               it through the backend's `backend_policy` global (its
               TRITON_BACKEND is whitelisted to torch_npu and mindspore), and
               answers NPUDriver.get_active_torch_device from the policy.
               On triton-ascend 3.2.0 (no registry) it activates the driver.
  activate()   triton-ascend 3.2.0: devbridge's driver (driver_320.py)
               becomes Triton's active driver.

Both serve whatever PrivateUse1 plugin is loaded (devbridge's torch_plugin
policy) and import neither torch_npu nor mindspore. A plugin calls install()
from its autoload hook, before any kernel runs.
"""

from __future__ import annotations

from . import _upstream


def install():
    """Make devbridge the Ascend backend's host runtime; returns "registry" or
    "driver" (the route taken). Raises naming the versions when neither
    triton-ascend 3.2.0 nor a registry version is installed."""
    registry = _upstream.registry()
    if registry is not None:
        from . import strategies

        strategies.register_into(registry)
        _upstream.select_policy(strategies.CATEGORY)
        _answer_active_torch_device(_upstream.registry_npu_driver_class())
        return "registry"
    activate()
    return "driver"


def activate():
    """triton-ascend 3.2.0: make devbridge's driver Triton's active driver."""
    from . import driver_320

    return driver_320.activate()


def _answer_active_torch_device(npu_driver) -> None:
    # Upstream's imports torch_npu and hard-codes "npu".
    def get_active_torch_device(self):
        from .. import policy

        return policy.call("get_active_torch_device")

    npu_driver.get_active_torch_device = get_active_torch_device


__all__ = ["activate", "install"]
