// Shared pieces of the devbridge._C bindings.
#pragma once

#include <torch/csrc/utils/pybind.h>

#include "python/device_type.h"

namespace devbridge {
namespace python {

// The pointer inside `capsule`, which must be a PyCapsule named `name`.
void* CapsulePointer(const pybind11::handle& capsule, const char* name, const char* what);

void BindRuntime(pybind11::module_& module);
void BindDLPack(pybind11::module_& module);
void BindProtocol(pybind11::module_& module);
void BindLaunch(pybind11::module_& module);
void BindAllocation(pybind11::module_& module);
void BindGraphs(pybind11::module_& module);

}  // namespace python
}  // namespace devbridge
