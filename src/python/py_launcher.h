// The Python launcher type (devbridge.triton.Launcher), defined in
// py_launcher.cpp; the bindings add it to devbridge._C.
#pragma once

#include <Python.h>

namespace devbridge {
namespace launch {

// The type, created on first call (a heap type); nullptr with a Python error
// set if creation failed.
PyTypeObject* LauncherType();

// triton.knobs.HookChain: an empty chain of this type is skipped without a
// Python call. None forgets it.
void SetHookChainType(PyObject* type);

// Module functions of the driver's hot path (METH_FASTCALL, no pybind11):
//   plugin_current_device_key(keys) -> key   keys[the calling thread's PrivateUse1 device]
//   current_stream(device=None, device_type=None) -> int   the current stream's
//     native handle (device_type None: the PrivateUse1 plugin)
// Triton's JIT asks both on every launch.
PyMethodDef* HotPathFunctions();

}  // namespace launch
}  // namespace devbridge
