// What Python reaches of hostplug: a few control operators under
// torch.ops.hostplug (no pybind11: the package calls them through torch.ops),
// and the empty Python module that lets `import torch_hostplug._C` load the
// library, whose static initialisers register the backend (Guard.cpp,
// Memory.cpp, Ops.cpp, Fallback.cpp).
#include <Python.h>
#include <torch/library.h>

#include "Runtime.h"

namespace hostplug {
namespace {

TORCH_LIBRARY(hostplug, m) {
  m.def("set_op_delay_us(int us) -> ()", [](int64_t us) { setOpDelayUs(us); });
  m.def("get_op_delay_us() -> int", [] { return opDelayUs(); });
  m.def("device_count() -> int", [] { return static_cast<int64_t>(kDeviceCount); });
  m.def("current_device() -> int", [] { return static_cast<int64_t>(currentDevice()); });
  m.def("set_device(int device) -> ()",
        [](int64_t device) { setCurrentDevice(static_cast<c10::DeviceIndex>(device)); });
  m.def("synchronize(int device) -> ()",
        [](int64_t device) { synchronizeDevice(static_cast<c10::DeviceIndex>(device)); });
}

}  // namespace
}  // namespace hostplug

extern "C" PyMODINIT_FUNC PyInit__C(void) {
  static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", "hostplug's backend (see csrc/)", -1, nullptr};
  return PyModule_Create(&module);
}
