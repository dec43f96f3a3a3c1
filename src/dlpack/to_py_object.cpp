// Import entry point: DLManagedTensorVersioned -> new torch.Tensor reference.
// On failure the managed tensor is not consumed (see dlpack_exchange.h).
#include <torch/csrc/autograd/python_variable.h>

#include "devbridge/dlpack_exchange.h"
#include "devbridge/error.h"
#include "dlpack/entry_points.h"
#include "dlpack/python_abi.h"

namespace devbridge {
namespace dlpack_entry {

int ManagedTensorToPyObjectNoSync(DLManagedTensorVersioned* tensor, void** out_py_object) {
  return RunGuardedPython([&] {
    if (tensor == nullptr) {
      throw Error(ErrorKind::kValue,
                  "devbridge: managed_tensor_to_py_object_no_sync got tensor == NULL");
    }
    if (out_py_object == nullptr) {
      throw Error(ErrorKind::kValue,
                  "devbridge: managed_tensor_to_py_object_no_sync got out_py_object == NULL; the "
                  "tensor was not consumed (the caller still owns it)");
    }
    at::Tensor imported = ImportBorrowing(*tensor);
    PyObject* object = THPVariable_Wrap(imported);
    if (object == nullptr) throw PythonErrorAlreadySet();
    // Only now, with nothing left that can fail, does the tensor take over.
    AdoptManagedTensor(imported, tensor);
    *out_py_object = object;
  });
}

}  // namespace dlpack_entry
}  // namespace devbridge
