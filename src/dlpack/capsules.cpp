#include "dlpack/capsules.h"

#include <memory>

#include "devbridge/dlpack_exchange.h"
#include "devbridge/error.h"
#include "dlpack/python_abi.h"

namespace devbridge {
namespace {

constexpr const char* kVersioned = "dltensor_versioned";
constexpr const char* kUsedVersioned = "used_dltensor_versioned";
constexpr const char* kLegacy = "dltensor";
constexpr const char* kUsedLegacy = "used_dltensor";

// Capsule destructors run in any context (garbage collection, interpreter
// shutdown) and must leave a pending Python exception as they found it.
template <class Managed>
void DestroyUnusedCapsule(PyObject* capsule, const char* unused_name) {
  if (!PyCapsule_IsValid(capsule, unused_name)) return;  // consumed ("used_...")
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  auto* managed = static_cast<Managed*>(PyCapsule_GetPointer(capsule, unused_name));
  if (managed == nullptr) {
    PyErr_WriteUnraisable(capsule);
  } else if (managed->deleter != nullptr) {
    managed->deleter(managed);
  }
  PyErr_Restore(type, value, traceback);
}

void DestroyVersionedCapsule(PyObject* capsule) {
  DestroyUnusedCapsule<DLManagedTensorVersioned>(capsule, kVersioned);
}

void DestroyLegacyCapsule(PyObject* capsule) {
  DestroyUnusedCapsule<DLManagedTensor>(capsule, kLegacy);
}

// A legacy DLManagedTensor seen as a versioned one (DLPack 1.0, so NULL
// strides keep their pre-1.2 meaning), so one importer serves both.
struct LegacyAdapter {
  DLManagedTensorVersioned versioned{};
  DLManagedTensor* legacy = nullptr;
};

void DeleteLegacyAdapter(DLManagedTensorVersioned* self) {
  auto* adapter = static_cast<LegacyAdapter*>(self->manager_ctx);
  if (adapter->legacy->deleter != nullptr) adapter->legacy->deleter(adapter->legacy);
  delete adapter;
}

void CheckIsCapsule(PyObject* capsule) {
  if (!PyCapsule_CheckExact(capsule)) {
    throw Error(ErrorKind::kType, std::string("devbridge: expected a DLPack capsule, got '") +
                                      Py_TYPE(capsule)->tp_name + "'");
  }
  if (PyCapsule_IsValid(capsule, kUsedVersioned) || PyCapsule_IsValid(capsule, kUsedLegacy)) {
    throw Error(ErrorKind::kValue,
                "devbridge: this DLPack capsule was already consumed; a capsule can be imported "
                "once (call __dlpack__() again for another one)");
  }
  if (!PyCapsule_IsValid(capsule, kVersioned) && !PyCapsule_IsValid(capsule, kLegacy)) {
    const char* name = PyCapsule_GetName(capsule);
    PyErr_Clear();
    throw Error(ErrorKind::kValue, std::string("devbridge: a DLPack capsule is named '") +
                                       kVersioned + "' or '" + kLegacy + "', got one named '" +
                                       (name ? name : "<NULL>") + "'");
  }
}

template <class T>
T* CapsulePointer(PyObject* capsule, const char* name) {
  auto* pointer = static_cast<T*>(PyCapsule_GetPointer(capsule, name));
  if (pointer == nullptr) throw PythonErrorAlreadySet();
  return pointer;
}

}  // namespace

PyObject* MakeDLPackCapsule(const at::Tensor& tensor, bool versioned, bool copied, bool read_only) {
  if (versioned) {
    DLManagedTensorVersioned* managed = ExportOwning(tensor);
    if (copied) managed->flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
    if (read_only) managed->flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
    PyObject* capsule = PyCapsule_New(managed, kVersioned, &DestroyVersionedCapsule);
    if (capsule == nullptr) {
      managed->deleter(managed);
      throw PythonErrorAlreadySet();
    }
    return capsule;
  }
  if (read_only) {
    throw Error(ErrorKind::kBuffer, "devbridge: a read-only DLPack export needs the versioned protocol (the legacy DLManagedTensor has no "
                "flags); ask for max_version=(1, 0) or higher");
  }
  DLManagedTensor* managed = ExportOwningLegacy(tensor);
  PyObject* capsule = PyCapsule_New(managed, kLegacy, &DestroyLegacyCapsule);
  if (capsule == nullptr) {
    managed->deleter(managed);
    throw PythonErrorAlreadySet();
  }
  return capsule;
}

at::Tensor ConsumeDLPackCapsule(PyObject* capsule) {
  CheckIsCapsule(capsule);
  if (PyCapsule_IsValid(capsule, kVersioned)) {
    auto* managed = CapsulePointer<DLManagedTensorVersioned>(capsule, kVersioned);
    at::Tensor tensor = ImportBorrowing(*managed);
    // Renamed before the tensor takes over: if renaming failed after, both
    // the tensor and the capsule would call the deleter.
    if (PyCapsule_SetName(capsule, kUsedVersioned) != 0) throw PythonErrorAlreadySet();
    AdoptManagedTensor(tensor, managed);
    return tensor;
  }
  auto adapter = std::make_unique<LegacyAdapter>();
  adapter->legacy = CapsulePointer<DLManagedTensor>(capsule, kLegacy);
  adapter->versioned.version = DLPackVersion{1, 0};
  adapter->versioned.manager_ctx = adapter.get();
  adapter->versioned.deleter = &DeleteLegacyAdapter;
  adapter->versioned.dl_tensor = adapter->legacy->dl_tensor;
  at::Tensor tensor = ImportBorrowing(adapter->versioned);
  if (PyCapsule_SetName(capsule, kUsedLegacy) != 0) throw PythonErrorAlreadySet();
  AdoptManagedTensor(tensor, &adapter.release()->versioned);
  return tensor;
}

DLDevice DLPackCapsuleDevice(PyObject* capsule) {
  CheckIsCapsule(capsule);
  if (PyCapsule_IsValid(capsule, kVersioned)) {
    return CapsulePointer<DLManagedTensorVersioned>(capsule, kVersioned)->dl_tensor.device;
  }
  return CapsulePointer<DLManagedTensor>(capsule, kLegacy)->dl_tensor.device;
}

}  // namespace devbridge
