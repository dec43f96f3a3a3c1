"""The `torch_plugin` category for the Ascend backends' BackendStrategyRegistry
(devbridge.triton.ascend.strategies) on simdev.

triton-ascend main and FlagTree are not on the package index, so their
registry cannot be imported here: registration is tested against an object
with the registry's documented interface (register(category, method) ->
decorator, ValueError on a duplicate; FlagTree's
third_party/ascend/backend/backend_register.py, branch triton_v3.5.x). The C++
snippets are tested for real: spliced into a launcher laid out as main's
make_launcher lays out `_launch`, compiled with get_cc_cmd's flags and
Python's headers only (no torch, no CANN), and run on simdev.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import textwrap

import pytest
import torch

import devbridge
from devbridge.triton.ascend import strategies

from launch_support import compile_library, skip_without_simdev

# The 15 methods of the torch_npu and mindspore categories (backend_register.py on main).
UPSTREAM_METHODS = {"version_hash", "cxx_abi", "type_convert", "get_device_interface", "get_empty_tensor",
                    "get_tensor_params_shape", "get_cc_cmd", "get_current_device", "set_current_device",
                    "get_current_stream", "header_file", "allocate_memory", "allocate_sync_block_lock",
                    "pre_launch", "async_launch"}


class DocumentedRegistry:
    """The interface of BackendStrategyRegistry as FlagTree's backend_register.py defines it."""

    def __init__(self):
        self.strategies = {}

    def register(self, category, method):
        def decorator(fn):
            methods = self.strategies.setdefault(category, {})
            if method in methods:
                raise ValueError(f"Strategy {method} already registered")
            methods[method] = fn
            return fn

        return decorator

    def execute_func(self, category, method, *args, **kwargs):
        return self.strategies[category][method](*args, **kwargs)


def test_all_fifteen_methods_register_under_torch_plugin_and_twice_is_harmless():
    registry = DocumentedRegistry()
    strategies.register_into(registry)
    assert set(registry.strategies["torch_plugin"]) == UPSTREAM_METHODS
    strategies.register_into(registry)  # a second install leaves them as they are
    assert set(registry.strategies["torch_plugin"]) == UPSTREAM_METHODS


def test_the_cpp_text_names_no_torch_and_the_flags_no_torch():
    text = "".join([strategies.header_file(True), strategies.header_file(False), strategies.pre_launch(True),
                    strategies.pre_launch(False), strategies.allocate_memory("totalWorkSpaceSize", "stream"),
                    strategies.allocate_sync_block_lock("syncBlockLockSize", "stream"),
                    strategies.async_launch("launch_call")])
    for forbidden in ("ATen", "at::", "at_npu", "c10", "torch", "OpCommand", "mindspore"):
        assert forbidden not in text
    import os

    include = os.path.join(os.path.dirname(devbridge.__file__), "include")
    assert os.path.isfile(os.path.join(include, "devbridge", "ascend_launch_support.h"))
    for build_pch in (True, False):
        assert strategies.get_cc_cmd(build_pch) == [f"-I{os.path.abspath(include)}"]  # no torch, no -l


@skip_without_simdev
def test_the_runtime_methods_answer_from_the_policy_on_simdev():
    assert strategies.get_current_device() == torch.accelerator.current_device_index()
    side = torch.Stream(device="simdev:1")
    with side:
        assert strategies.get_current_stream(1) == side.native_handle
    strategies.set_current_device(1)
    try:
        assert strategies.get_current_device() == 1
    finally:
        strategies.set_current_device(0)
    empty = strategies.get_empty_tensor(8)
    assert empty.device.type == "simdev" and empty.dtype == torch.int32 and empty.numel() == 8
    assert strategies.get_tensor_params_shape(empty, 3, torch.zeros(2, 3)) == [[8], [2, 3]]
    interface = strategies.get_device_interface()
    start, end = interface.Event(enable_timing=True), interface.Event(enable_timing=True)
    start.record(); end.record(); interface.synchronize()
    assert start.elapsed_time(end) >= 0
    assert strategies.cxx_abi() in (0, 1)
    assert strategies.type_convert()[torch.float16].__name__ == "float16"
    assert any("plugin simdev" in part for part in strategies.version_hash())


HARNESS = """
#include <Python.h>
#include <string>
{header}
static void* g_workspace = nullptr;
static void* g_lock = nullptr;

// Laid out as triton-ascend main's make_launcher lays out _launch.
static void _launch(const char* kernelName, void* stream, uint64_t workspace_size, uint64_t lock_bytes,
                    int status) {{
  std::string name = "";
  name.append(kernelName);
  void *workspace_addr_ptr = NULL;
  {pre_launch_true}
  if (workspace_size > 0) {{
    uint64_t totalWorkSpaceSize = workspace_size;
    {allocate_memory}
  }}
  auto launch_call = [=]() -> int {{
    {pre_launch_false}
    void *syncBlockLock_ptr = NULL;
    if (lock_bytes > 0) {{
      uint64_t syncBlockLockSize = lock_bytes;
      {allocate_sync_block_lock}
      if (!syncBlockLock_ptr) {{ return 1; }}
    }}
    g_workspace = workspace_addr_ptr;
    g_lock = syncBlockLock_ptr;
    return status;
  }};
  {async_launch}
  return;
}}

static PyObject* launch(PyObject*, PyObject* args) {{
  const char* name;
  unsigned long long stream, workspace, lock;
  int status;
  if (!PyArg_ParseTuple(args, "sKKKi", &name, &stream, &workspace, &lock, &status)) return NULL;
  g_workspace = g_lock = nullptr;
  _launch(name, reinterpret_cast<void*>(stream), workspace, lock, status);
  if (PyErr_Occurred()) return NULL;
  return Py_BuildValue("KK", reinterpret_cast<unsigned long long>(g_workspace),
                       reinterpret_cast<unsigned long long>(g_lock));
}}

static PyMethodDef methods[] = {{{{"launch", launch, METH_VARARGS, ""}}, {{NULL, NULL, 0, NULL}}}};
static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "ascend_harness", NULL, -1, methods, NULL, NULL, NULL, NULL}};
PyMODINIT_FUNC PyInit_ascend_harness(void) {{ return PyModule_Create(&module); }}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    import importlib.util

    source = tmp_path_factory.mktemp("harness") / "ascend_harness.cc"
    source.write_text(HARNESS.format(
        header=strategies.header_file(True), pre_launch_true=strategies.pre_launch(True),
        allocate_memory=strategies.allocate_memory("totalWorkSpaceSize", "stream"),
        pre_launch_false=strategies.pre_launch(False),
        allocate_sync_block_lock=strategies.allocate_sync_block_lock("syncBlockLockSize", "stream"),
        async_launch=strategies.async_launch("launch_call")))
    library = compile_library(source, f"-I{sysconfig.get_paths()['include']}", *strategies.get_cc_cmd(False))
    spec = importlib.util.spec_from_file_location("ascend_harness", library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@skip_without_simdev
def test_the_snippets_compile_without_torch_and_allocate_from_the_plugin(harness):
    torch.accelerator.synchronize()
    before = torch.simdev.memory_allocated(0)
    torch.simdev.reset_peak_memory_stats(0)
    workspace, lock = harness.launch("k", devbridge.current_stream("simdev:0"), 1 << 20, 64, 0)
    assert workspace != 0 and lock != 0 and workspace != lock
    assert torch.simdev.max_memory_allocated(0) >= before + (1 << 20) + 64
    assert torch.simdev.memory_allocated(0) == before  # released once the launch was enqueued


@skip_without_simdev
def test_the_snippets_report_errors_as_python_exceptions(harness):
    with pytest.raises(RuntimeError, match="launching Ascend kernel 'k' failed with CANN runtime error 507"):
        harness.launch("k", devbridge.current_stream("simdev:0"), 0, 0, 507)
    side = torch.Stream(device="simdev:0")
    with pytest.raises(ValueError, match=r"workspace and lock come from the plugin's allocator on the current "
                                         r"stream .* make the launch stream current"):
        harness.launch("k", side.native_handle, 16, 0, 0)
    with pytest.raises(ValueError, match="make the launch stream current"):
        harness.launch("k", side.native_handle, 0, 16, 0)


@skip_without_simdev
def test_the_strategies_import_no_vendor_module():
    from test_triton_policy import GUARDED

    script = GUARDED.split("import devbridge.triton\n")[0] + textwrap.dedent("""
        import devbridge.triton
        from devbridge.triton.ascend import strategies
        for method in ("get_current_device", "get_current_stream", "get_device_interface", "version_hash",
                       "cxx_abi", "get_cc_cmd", "header_file", "async_launch"):
            fn = strategies.METHODS[method]
            fn("launch_call") if method == "async_launch" else fn()
        strategies.get_empty_tensor(4); strategies.set_current_device(0)
        strategies.get_tensor_params_shape(1); strategies.pre_launch(True)
        strategies.allocate_memory("s", "t"); strategies.allocate_sync_block_lock("s", "t")
        print("guarded ok", sorted(set(refused)))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "guarded ok []" in done.stdout
