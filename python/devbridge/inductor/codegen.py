"""What Inductor generates for a plugin device: Triton kernels (TritonScheduling)
in a Python wrapper (PythonWrapperCodegen), with device op overrides whose
source text uses only torch.accelerator and devbridge.

Three lines differ from what Inductor writes for CUDA:
  * the wrapper's `get_raw_stream` is devbridge's C function returning the
    native handle of the calling thread's current plugin stream, evaluated at
    every call of the compiled graph, so kernels follow the caller's stream;
  * each kernel module starts with `devbridge.inductor.worker.prepare(...)`,
    so that Inductor's compile workers, fresh Python processes in which the
    plugin may not be autoloaded, load the plugin and register it before the
    module's first Triton call;
  * buffers are allocated by devbridge's C `plugin_empty_strided` (the
    dispatcher's empty_strided on the current plugin device, so a plugin's
    own storage is kept), where Inductor's generic line for a non-built-in
    device parses torch.empty_strided's arguments in Python at every buffer;
    cuda has its own C fast path for the same reason.
"""

from __future__ import annotations

from . import _torch_api


def make_op_overrides(device: str):
    base = _torch_api.device_op_overrides_base()

    class PluginDeviceOpOverrides(base):
        def import_get_raw_stream_as(self, name: str) -> str:
            return f"from devbridge._C import current_stream as {name}"

        def set_device(self, device_idx: int) -> str:
            return f"torch.accelerator.set_device_index({device_idx})"

        def synchronize(self) -> str:
            return "torch.accelerator.synchronize()"

        def device_guard(self, device_idx: int) -> str:
            return f"torch.accelerator.device_index({device_idx})"

        def current_stream(self) -> str:
            return "torch.accelerator.current_stream()"

        def current_device_idx_expr(self) -> str:
            # torch 2.14: the device index of a rank-agnostic graph
            # (compile-on-one-rank), an expression the wrapper evaluates.
            return "torch.accelerator.current_device_index()"

        # stream_handle (torch 2.13): the base's `<stream>.native_handle` serves.

        def __repr__(self) -> str:
            return f"<devbridge device op overrides for '{device}'>"

    PluginDeviceOpOverrides.__name__ = PluginDeviceOpOverrides.__qualname__ = f"DevbridgeOpOverrides_{device}"
    return PluginDeviceOpOverrides()


def kernel_prelude(device: str, plugin_entry_point: str | None) -> str:
    return (f"from devbridge.inductor import worker as devbridge_worker\n"
            f"devbridge_worker.prepare({device!r}, {plugin_entry_point!r})\n")


def make_wrapper_codegen(device: str, base):
    """Inductor's Python wrapper codegen with the allocation fast path for `device`."""
    allocate = f"empty_strided_{device}"

    class PluginWrapperCodegen(base):
        @staticmethod
        def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
            if is_subgraph:  # subgraphs keep Inductor's own class (and its generic allocation)
                return base.create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures)
            return PluginWrapperCodegen()

        def write_header(self) -> None:
            super().write_header()
            self.header.writeline(f"from devbridge._C import plugin_empty_strided as {allocate}")

        def make_allocation(self, name, device_, dtype, shape, stride, allocation_shape=None, is_pinned=False):
            if device_.type != device or _torch_api.tracking_allocations():
                return super().make_allocation(name, device_, dtype, shape, stride, allocation_shape, is_pinned)
            shape_text = self.codegen_python_shape_tuple(shape)
            allocation_text = self.codegen_python_shape_tuple(shape if allocation_shape is None else allocation_shape)
            stride_text = self.codegen_python_shape_tuple(stride)
            line = f"{name} = {allocate}({allocation_text}, {stride_text}, {dtype})"
            if shape_text != allocation_text:
                line += f".as_strided({shape_text}, {stride_text})"
            return line

    PluginWrapperCodegen.__name__ = PluginWrapperCodegen.__qualname__ = f"DevbridgeWrapperCodegen_{device}"
    return PluginWrapperCodegen


def install(device: str, plugin_entry_point: str | None):
    """Every kernel module for the device starts with the worker prelude;
    returns (scheduling, wrapper codegen) to register: Inductor's
    TritonScheduling and its Python wrapper with the allocation fast path."""
    _torch_api.add_kernel_prelude(device, kernel_prelude(device, plugin_entry_point))
    scheduling, wrapper = _torch_api.triton_scheduling_classes()
    return scheduling, make_wrapper_codegen(device, wrapper)
