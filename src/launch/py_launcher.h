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

}  // namespace launch
}  // namespace devbridge
