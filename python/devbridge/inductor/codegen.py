"""What Inductor generates for a plugin device: Triton kernels (TritonScheduling)
in a Python wrapper (PythonWrapperCodegen), with device op overrides whose
source text uses only torch.accelerator and devbridge.

Two lines differ from what Inductor writes for CUDA:
  * the wrapper's `get_raw_stream` is devbridge's C function returning the
    native handle of the calling thread's current plugin stream, evaluated at
    every call of the compiled graph, so kernels follow the caller's stream;
  * each kernel module starts with `devbridge.inductor.worker.prepare(...)`,
    so that Inductor's compile workers, fresh interpreters in which the
    plugin may not be autoloaded, load the plugin and register it before the
    module's first Triton call.
"""

from __future__ import annotations

from . import _torch_api


def make_op_overrides(device: str):
    base = _torch_api.device_op_overrides_base()

    class PluginDeviceOpOverrides(base):
        def import_get_raw_stream_as(self, name: str) -> str:
            return f"from devbridge._C import plugin_current_stream as {name}"

        def set_device(self, device_idx: int) -> str:
            return f"torch.accelerator.set_device_index({device_idx})"

        def synchronize(self) -> str:
            return "torch.accelerator.synchronize()"

        def device_guard(self, device_idx: int) -> str:
            return f"torch.accelerator.device_index({device_idx})"

        def current_stream(self) -> str:
            return "torch.accelerator.current_stream()"

        # stream_handle (torch 2.13): the base's `<stream>.native_handle` serves.

        def __repr__(self) -> str:
            return f"<devbridge device op overrides for '{device}'>"

    PluginDeviceOpOverrides.__name__ = PluginDeviceOpOverrides.__qualname__ = f"DevbridgeOpOverrides_{device}"
    return PluginDeviceOpOverrides()


def kernel_prelude(device: str, plugin_entry_point: str | None) -> str:
    return (f"from devbridge.inductor import worker as devbridge_worker\n"
            f"devbridge_worker.prepare({device!r}, {plugin_entry_point!r})\n")


def install(device: str, plugin_entry_point: str | None):
    """Every kernel module for the device starts with the worker prelude;
    returns (scheduling, wrapper codegen) to register: Inductor's own."""
    _torch_api.add_kernel_prelude(device, kernel_prelude(device, plugin_entry_point))
    return _torch_api.triton_scheduling_classes()
