// devbridge._C: Python bindings only. Everything they expose lives in
// devbridge_core (src/runtime, src/dlpack); the Python API is
// python/devbridge/__init__.py.
#include <c10/util/Exception.h>
#include <torch/csrc/Exceptions.h>

#include "devbridge/error.h"
#include "dlpack/python_abi.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace devbridge {
namespace python {
namespace {

// devbridge errors become the matching Python built-in exception, c10 errors
// the torch exception torch's own bindings raise for them, with the message
// but without the C++ backtrace. pybind11's own exception types are left to
// pybind11 (rethrown to the next translator). Local to this module: a global
// translator would also translate the exceptions of torch's and plugins'
// pybind11 functions, turning their torch.AcceleratorError into RuntimeError.
void TranslateException(std::exception_ptr error) {
  try {
    if (error) std::rethrow_exception(error);
  } catch (const devbridge::Error&) {
    std::string message;
    const ErrorKind kind = DescribeCurrentException(&message);
    PyErr_SetString(PythonExceptionType(kind), message.c_str());
  } catch (const c10::Error&) {
    // What torch's own functions raise for it (torch.OutOfMemoryError,
    // torch.AcceleratorError, ValueError, ...), message intact.
    torch::translate_exception_to_python(std::current_exception());
  }
}

}  // namespace

c10::DeviceType ParseDeviceType(const std::string& device_type) {
  try {
    return c10::Device(device_type).type();
  } catch (const c10::Error&) {
    throw Error(ErrorKind::kValue, "devbridge: '" + device_type +
                                       "' is not a device type this PyTorch knows; use e.g. "
                                       "'cpu', 'cuda' or the plugin's name ('" +
                                       c10::get_privateuse1_backend() + "')");
  }
}

void* CapsulePointer(const py::handle& capsule, const char* name, const char* what) {
  if (!PyCapsule_CheckExact(capsule.ptr())) {
    throw Error(ErrorKind::kType, std::string("devbridge: ") + what +
                                      " must be a PyCapsule named '" + name + "', got '" +
                                      Py_TYPE(capsule.ptr())->tp_name + "'");
  }
  const char* actual = PyCapsule_GetName(capsule.ptr());
  if (actual == nullptr || std::string(actual) != name) {
    throw Error(ErrorKind::kValue, std::string("devbridge: ") + what +
                                       " must be a PyCapsule named '" + name +
                                       "', got one named '" + (actual ? actual : "<NULL>") + "'");
  }
  void* pointer = PyCapsule_GetPointer(capsule.ptr(), name);
  if (pointer == nullptr) throw py::error_already_set();
  return pointer;
}

}  // namespace python
}  // namespace devbridge

// The torch version this module was built against, findable in the file's
// bytes: when a different torch makes the module fail to load, the Python
// package reads it from the .so to say which torch to go back to.
extern "C" __attribute__((used, visibility("default"))) const char devbridge_built_with_torch[] =
    "DEVBRIDGE_BUILT_WITH_TORCH=" DEVBRIDGE_TORCH_VERSION ";";

PYBIND11_MODULE(_C, module) {
  module.doc() = "devbridge's C++ core (bindings only; use the devbridge package)";
  py::register_local_exception_translator(&devbridge::python::TranslateException);
  module.attr("built_with_torch") = DEVBRIDGE_TORCH_VERSION;
  devbridge::python::BindRuntime(module);
  devbridge::python::BindDLPack(module);
  devbridge::python::BindProtocol(module);
  devbridge::python::BindLaunch(module);
  devbridge::python::BindAllocation(module);
  devbridge::python::BindGraphs(module);
}
