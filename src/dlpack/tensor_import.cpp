// DLPack -> torch tensor.
//
// Import happens in two steps so that a failure never leaves the managed
// tensor half-owned: ImportBorrowing validates everything and builds a tensor
// over the memory without a deleter (anything may throw here; the caller
// still owns the managed tensor), then AdoptManagedTensor swaps in a DataPtr
// whose deleter calls the managed tensor's deleter (cannot fail).
#include <ATen/DLConvertor.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <limits>
#include <vector>

#include "devbridge/dlpack_exchange.h"
#include "devbridge/runtime.h"
#include "runtime/dl_device_type.h"

namespace devbridge {
namespace {

void CallManagedTensorDeleter(void* context) {
  auto* managed = static_cast<DLManagedTensorVersioned*>(context);
  if (managed->deleter != nullptr) managed->deleter(managed);
}

c10::Device TorchDeviceOf(const DLTensor& dl) {
  const c10::DeviceType type = C10DeviceTypeFromDL(dl.device.device_type);
  if (type == c10::DeviceType::CPU) return c10::Device(c10::DeviceType::CPU);
  const c10::DeviceIndex index = DeviceIndexFromDL(dl.device.device_id);
  // A tensor on a device this process has no backend for (CUDA memory in a
  // CPU-only torch, kDLExtDev without the plugin) would fail later, far from
  // the cause: refuse it here, naming what to load.
  const DeviceRuntime& runtime = DeviceRuntime::For(type);
  if (!runtime.Available()) (void)runtime.CurrentDevice();  // throws the fix
  if (type != c10::DeviceType::PrivateUse1) {
    // Built-in devices exactly as PyTorch maps them (XPU needs the pointer).
    return at::dlDeviceToTorchDevice(dl.device.device_type, index, dl.data);
  }
  const int count = runtime.DeviceCount();
  if (index >= count) {
    throw Error(ErrorKind::kValue, "devbridge: DLPack tensor is on " + runtime.Name() + ":" +
                                       std::to_string(index) + ", but " + runtime.Name() +
                                       " has " + std::to_string(count) + " device(s)");
  }
  return c10::Device(type, index);
}

void CheckLayout(const DLTensor& dl) {
  if (dl.ndim < 0) {
    throw Error(ErrorKind::kValue,
                "devbridge: DLPack tensor has negative ndim " + std::to_string(dl.ndim));
  }
  if (dl.ndim == 0) return;
  if (dl.shape == nullptr) {
    throw Error(ErrorKind::kValue, "devbridge: DLPack tensor has ndim " + std::to_string(dl.ndim) +
                                       " but a NULL shape; the producer is broken");
  }
  if (dl.strides == nullptr) {
    throw Error(ErrorKind::kValue,
                "devbridge: DLPack tensor has ndim " + std::to_string(dl.ndim) +
                    " but NULL strides; DLPack >= 1.2 requires strides (in elements) whenever "
                    "ndim > 0, so the producer must fill them (compact row-major if need be)");
  }
  for (int32_t i = 0; i < dl.ndim; ++i) {
    if (dl.shape[i] < 0) {
      throw Error(ErrorKind::kValue, "devbridge: DLPack tensor has negative size " +
                                         std::to_string(dl.shape[i]) + " in dimension " +
                                         std::to_string(i));
    }
    if (dl.strides[i] < 0) {
      throw Error(ErrorKind::kBuffer, "devbridge: DLPack tensor has negative stride " +
                                          std::to_string(dl.strides[i]) + " in dimension " +
                                          std::to_string(i) +
                                          "; PyTorch tensors cannot have negative strides");
    }
  }
}

// The bytes the tensor spans from the start of its storage, checked for
// overflow. at::for_blob computes the same number in a noexcept function, so
// an overflowing shape would terminate the process there: reject it first.
void CheckAddressable(const DLTensor& dl, uint64_t storage_offset, uint64_t item_size) {
  if (storage_offset > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw Error(ErrorKind::kValue,
                "devbridge: DLPack byte_offset " + std::to_string(dl.byte_offset) +
                    " is beyond 2^63 elements; the producer sent a corrupt byte_offset");
  }
  uint64_t last = 0;  // largest element offset, in elements
  bool empty = false;
  bool overflow = false;
  for (int32_t i = 0; i < dl.ndim; ++i) {
    if (dl.shape[i] == 0) empty = true;
    uint64_t span = 0;
    if (dl.shape[i] > 0) {
      overflow |= __builtin_mul_overflow(static_cast<uint64_t>(dl.shape[i] - 1),
                                         static_cast<uint64_t>(dl.strides[i]), &span);
    }
    overflow |= __builtin_add_overflow(last, span, &last);
  }
  uint64_t bytes = 0;
  // Each step checked on its own: storage_offset + 1 itself wraps for a
  // byte_offset near 2^64 (found by tests/fuzz).
  overflow |= __builtin_add_overflow(last, storage_offset, &last);
  overflow |= __builtin_add_overflow(last, uint64_t{1}, &last);
  overflow |= __builtin_mul_overflow(last, item_size, &bytes);
  if (!empty && (overflow || bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
    throw Error(ErrorKind::kValue,
                "devbridge: DLPack tensor's shape and strides span more than 2^63 bytes; the "
                "producer sent a corrupt shape or strides");
  }
}

}  // namespace

at::Tensor ImportBorrowing(const DLManagedTensorVersioned& managed) {
  // Per DLPack, a different major version means the layout after `flags` may
  // differ: read nothing beyond it.
  if (managed.version.major != DLPACK_MAJOR_VERSION) {
    throw Error(ErrorKind::kBuffer,
                "devbridge: cannot import a DLPack tensor of version " +
                    std::to_string(managed.version.major) + "." +
                    std::to_string(managed.version.minor) + "; this table implements DLPack " +
                    std::to_string(DLPACK_MAJOR_VERSION) + "." +
                    std::to_string(DLPACK_MINOR_VERSION) +
                    " and only the same major version can be read. The tensor was not consumed: "
                    "the caller still owns it and must call its deleter");
  }
  if (managed.flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) {
    throw Error(ErrorKind::kBuffer,
                "devbridge: padded sub-byte DLPack tensors (flag IS_SUBBYTE_TYPE_PADDED) have no "
                "PyTorch dtype; the producer must export packed data");
  }
  // Before DLPack 1.2, NULL strides meant compact row-major; a producer that
  // declares such a minor version may still send them (TVM-FFI accepts them
  // too). From 1.2 on they are an error, reported by CheckLayout.
  DLTensor dl = managed.dl_tensor;
  std::vector<int64_t> compact_strides;
  if (dl.strides == nullptr && dl.ndim > 0 && dl.shape != nullptr && managed.version.minor < 2) {
    compact_strides.resize(static_cast<size_t>(dl.ndim));
    int64_t step = 1;
    for (int32_t i = dl.ndim - 1; i >= 0; --i) {
      compact_strides[static_cast<size_t>(i)] = step;
      if (dl.shape[i] > 0 && __builtin_mul_overflow(step, dl.shape[i], &step)) {
        throw Error(ErrorKind::kValue,
                    "devbridge: DLPack tensor's shape spans more than 2^63 elements; the "
                    "producer sent a corrupt shape");
      }
    }
    dl.strides = compact_strides.data();
  }
  CheckLayout(dl);
  const c10::Device device = TorchDeviceOf(dl);
  const c10::ScalarType dtype = at::toScalarType(dl.dtype);
  const auto item_size = static_cast<uint64_t>(c10::elementSize(dtype));
  if (dl.byte_offset % item_size != 0) {
    throw Error(ErrorKind::kValue,
                "devbridge: DLPack byte_offset " + std::to_string(dl.byte_offset) +
                    " is not a multiple of the element size " + std::to_string(item_size) +
                    " of " + c10::toString(dtype) +
                    "; a torch tensor can only start at a whole element");
  }
  const uint64_t storage_offset = dl.byte_offset / item_size;
  CheckAddressable(dl, storage_offset, item_size);
  const c10::IntArrayRef sizes(dl.shape, static_cast<size_t>(dl.ndim));
  const c10::IntArrayRef strides(dl.strides, dl.strides ? static_cast<size_t>(dl.ndim) : 0);
  if (dl.data == nullptr && c10::multiply_integers(sizes) != 0) {
    throw Error(ErrorKind::kValue,
                "devbridge: DLPack tensor has a NULL data pointer but is not empty");
  }
  return at::for_blob(dl.data, sizes)
      .strides(strides)
      .storage_offset(static_cast<int64_t>(storage_offset))
      .target_device(device)
      .options(at::TensorOptions().dtype(dtype).device(device))
      .make_tensor();
}

void AdoptManagedTensor(const at::Tensor& tensor, DLManagedTensorVersioned* managed) noexcept {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  void* data = storage->_mutable_data_ptr_no_checks().get();
  // Replaces the context-free DataPtr made by ImportBorrowing; destroying
  // that one frees nothing.
  storage->set_data_ptr_noswap(
      c10::DataPtr(data, managed, &CallManagedTensorDeleter, storage->device()));
}

}  // namespace devbridge
