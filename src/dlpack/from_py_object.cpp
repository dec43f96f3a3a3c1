// Export entry points: torch.Tensor (a PyObject*) -> DLPack.
//
// Hot path: one type check (a pointer compare for exact torch.Tensor and
// nn.Parameter), a reference to the tensor inside the Python object (no
// refcount change), the export. No Python API call on success.
#include <torch/csrc/autograd/python_variable.h>

#include "devbridge/dlpack_exchange.h"
#include "devbridge/error.h"
#include "dlpack/entry_points.h"
#include "dlpack/python_abi.h"

namespace devbridge {
namespace dlpack_entry {
namespace {

const at::Tensor& UnpackTensor(void* py_object) {
  auto* object = static_cast<PyObject*>(py_object);
  if (C10_UNLIKELY(object == nullptr)) {
    throw Error(ErrorKind::kValue, "devbridge: py_object is NULL; pass a torch.Tensor");
  }
  if (C10_LIKELY(THPVariable_CheckExact(object))) return THPVariable_Unpack(object);
  // Subclasses of torch.Tensor are tensors too (PyTorch's table accepts them).
  const int is_tensor = THPVariableClass ? PyObject_IsInstance(object, THPVariableClass) : 0;
  if (is_tensor < 0) throw PythonErrorAlreadySet();
  if (is_tensor == 0) {
    throw Error(ErrorKind::kType, std::string("devbridge: expected a torch.Tensor, got '") +
                                      Py_TYPE(object)->tp_name + "'");
  }
  return THPVariable_Unpack(object);
}

}  // namespace

int ManagedTensorFromPyObjectNoSync(void* py_object, DLManagedTensorVersioned** out) {
  return RunGuardedPython([&] {
    if (C10_UNLIKELY(out == nullptr)) {
      throw Error(ErrorKind::kValue,
                  "devbridge: managed_tensor_from_py_object_no_sync got out == NULL; pass the "
                  "address of a DLManagedTensorVersioned* to receive the export");
    }
    *out = nullptr;
    *out = ExportOwning(UnpackTensor(py_object));
  });
}

int DLTensorFromPyObjectNoSync(void* py_object, DLTensor* out) {
  return RunGuardedPython([&] {
    if (C10_UNLIKELY(out == nullptr)) {
      throw Error(ErrorKind::kValue,
                  "devbridge: dltensor_from_py_object_no_sync got out == NULL; pass the address "
                  "of a DLTensor to fill");
    }
    ExportNonOwning(UnpackTensor(py_object), out);
  });
}

}  // namespace dlpack_entry
}  // namespace devbridge
