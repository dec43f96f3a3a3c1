"""The `torch_plugin` category of the Ascend backends' BackendStrategyRegistry
(triton-ascend main, FlagTree's Ascend backend): all 15 methods, built on
devbridge's torch_plugin policy, for any PrivateUse1 plugin.

The runtime methods answer from the policy (no torch_npu, no mindspore). The
methods that return C++ text — spliced by the backend into the launcher it
generates — call devbridge's C runtime table only, through
include/devbridge/ascend_launch_support.h: no ATen, no at_npu, no torch
include or link flag. Where each snippet lands in the generated `_launch`
(main's driver.py make_launcher):

  pre_launch(True)            function scope, first: opens the LaunchScope
  allocate_memory(size, s)    function scope: the workspace (outside the lambda)
  pre_launch(False)           inside the launch lambda: nothing to bind, the
                              lambda runs inline on this thread
  allocate_sync_block_lock    inside the lambda: the lock
  async_launch(func)          function scope, last: runs the lambda now and
                              raises its runtime error in Python

The blocks go back to the plugin's allocator when `_launch` returns, after
the launch was enqueued. The backend's own template still initialises the
lock with a synchronous rtMemcpy after our allocation (not stream ordered):
docs/ascend.md lists that as an upstream change.
"""

from __future__ import annotations

import os

from .. import policy

CATEGORY = "torch_plugin"


def _include_dir() -> str:
    """devbridge's installed C headers (devbridge/include)."""
    import devbridge

    return os.path.join(os.path.dirname(os.path.abspath(devbridge.__file__)), "include")


def version_hash() -> list[str]:
    """What a launcher built with these snippets depends on: torch, devbridge,
    the plugin, and the CANN toolkit it compiles against."""
    import torch

    from ... import __version__

    name = policy.call("device_name")
    toolkit = os.environ.get("ASCEND_HOME_PATH", "")
    version_file = os.path.join(toolkit, "version.cfg") if toolkit else ""
    cann = open(version_file).read().strip() if version_file and os.path.isfile(version_file) else toolkit
    return [f"torch {torch.__version__}", f"devbridge {__version__}", f"plugin {name}", f"cann {cann}"]


def cxx_abi() -> int:
    # The generated launcher passes no C++ type across a library boundary (its
    # only link is CANN's C API): the value only names the launcher file.
    return 1


def type_convert() -> dict:
    """torch dtype -> numpy dtype, matched by name (no framework import beyond torch)."""
    import numpy
    import torch

    result = {}
    for name in ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
                 "complex64", "complex128"):
        result[getattr(torch, name)] = getattr(numpy, "bool_" if name == "bool" else name)
    return result


def get_device_interface():
    return policy.call("get_device_interface")


def get_empty_tensor(size):
    return policy.call("get_empty_tensor", size)


def get_tensor_params_shape(*args):
    return policy.call("get_tensor_params_shape", *args)


def get_cc_cmd(build_pch: bool = False) -> list[str]:
    """Only devbridge's headers: the launcher links CANN (the backend adds it) and nothing of torch."""
    return [f"-I{_include_dir()}"]


def get_current_device() -> int:
    return policy.call("get_current_device")


def set_current_device(device_id) -> None:
    policy.call("set_current_device", int(device_id))


def get_current_stream(device=None) -> int:
    """The plugin's current stream as its native handle (torch_npu's is the
    draining aclrtStream getter, so a direct launch is ordered after its queue)."""
    return policy.call("get_current_stream", device)


def header_file(enable_taskqueue=True) -> str:
    return "#include <devbridge/ascend_launch_support.h>\n"


def allocate_memory(size: str, stream: str) -> str:
    return (f"workspace_addr_ptr = devbridge_launch.allocate({size}, {stream});\n"
            "  if (workspace_addr_ptr == nullptr) return;\n")


def allocate_sync_block_lock(size: str, stream: str) -> str:
    # A NULL lock makes the template's own check return a failure from the lambda.
    return f"syncBlockLock_ptr = devbridge_launch_ptr->allocate({size}, {stream});\n"


def pre_launch(first_call: bool) -> str:
    if not first_call:
        return ""
    return ("devbridge_ascend::LaunchScope devbridge_launch;\n"
            "  devbridge_ascend::LaunchScope* devbridge_launch_ptr = &devbridge_launch;\n"
            "  (void)devbridge_launch_ptr;\n"
            "  if (!devbridge_launch.ok()) return;\n")


def async_launch(func: str) -> str:
    return f"devbridge_launch.run({func}, name.c_str());\n"


METHODS = {
    "version_hash": version_hash, "cxx_abi": cxx_abi, "type_convert": type_convert,
    "get_device_interface": get_device_interface, "get_empty_tensor": get_empty_tensor,
    "get_tensor_params_shape": get_tensor_params_shape, "get_cc_cmd": get_cc_cmd,
    "get_current_device": get_current_device, "set_current_device": set_current_device,
    "get_current_stream": get_current_stream, "header_file": header_file, "allocate_memory": allocate_memory,
    "allocate_sync_block_lock": allocate_sync_block_lock, "pre_launch": pre_launch, "async_launch": async_launch,
}


def register_into(registry, category: str = CATEGORY) -> None:
    """Register the 15 methods under `category` with the registry's
    register(category, method) decorator. Methods already registered there
    (a second install) are left as they are."""
    for method, function in METHODS.items():
        try:
            registry.register(category, method)(function)
        except ValueError as error:
            if "already registered" not in str(error):
                raise
