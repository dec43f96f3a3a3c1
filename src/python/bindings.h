// Shared pieces of the devbridge._C bindings.
#pragma once

#include <c10/core/DeviceType.h>
#include <torch/csrc/utils/pybind.h>

#include <string>

namespace devbridge {
namespace python {

// "privateuseone", the plugin's own name ("simdev"), "cpu", "cuda", ... as
// torch.device understands them (the Python layer normalises first).
c10::DeviceType ParseDeviceType(const std::string& device_type);

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
