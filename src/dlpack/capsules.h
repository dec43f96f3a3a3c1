// DLPack capsules of the Python protocol (`__dlpack__`, `from_dlpack`), as
// the DLPack Python specification names and owns them:
//   "dltensor_versioned" -> DLManagedTensorVersioned*  (max_version >= 1.0)
//   "dltensor"           -> DLManagedTensor*           (legacy, no max_version)
// A consumer renames the capsule to "used_dltensor[_versioned]" when it takes
// the tensor; a capsule dropped unused calls the tensor's deleter itself.
#pragma once

#include <Python.h>

#include <ATen/Tensor.h>
#include <ATen/dlpack.h>

namespace devbridge {

// A new reference to a capsule owning an export of `tensor` (ExportOwning /
// ExportOwningLegacy). `copied` sets DLPACK_FLAG_BITMASK_IS_COPIED and
// `read_only` DLPACK_FLAG_BITMASK_READ_ONLY (versioned only: the legacy
// struct has no flags, so read_only is refused there). Throws
// devbridge::Error, or PythonErrorAlreadySet when a Python call failed.
PyObject* MakeDLPackCapsule(const at::Tensor& tensor, bool versioned, bool copied, bool read_only);

// Imports an unused capsule of either kind and marks it used; the tensor then
// owns the managed tensor (its deleter runs when the storage dies). On failure
// the capsule is left unused (still owned by whoever holds it).
at::Tensor ConsumeDLPackCapsule(PyObject* capsule);

// The DLDevice an unused capsule of either kind describes, without taking it.
DLDevice DLPackCapsuleDevice(PyObject* capsule);

}  // namespace devbridge
