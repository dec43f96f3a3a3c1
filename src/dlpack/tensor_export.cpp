// torch tensor -> DLPack, owning and non-owning.
//
// Same layout decisions as PyTorch's at::toDLPackVersioned (data_ptr() with
// byte_offset 0, shape/strides pointing into the TensorImpl, flags 0, dtype
// from at::getDLDataType) so consumers see identical tensors whichever table
// they got; the device label and the checks are ours.
#include <ATen/DLConvertor.h>

#include <memory>

#include "devbridge/dlpack_exchange.h"
#include "devbridge/runtime.h"
#include "runtime/dl_device_type.h"

namespace devbridge {
namespace {

// One heap block per export: the managed tensor and the reference that keeps
// the torch tensor (and so its storage and metadata) alive.
struct ExportedTensor {
  at::Tensor tensor;
  DLManagedTensorVersioned managed{};
};

struct LegacyExportedTensor {
  at::Tensor tensor;
  DLManagedTensor managed{};
};

// Deleting an at::Tensor needs no GIL: if it drops the last reference to a
// tensor that still has a Python object, torch takes the GIL itself.
void DeleteExportedTensor(DLManagedTensorVersioned* self) {
  delete static_cast<ExportedTensor*>(self->manager_ctx);
}

void DeleteLegacyExportedTensor(DLManagedTensor* self) {
  delete static_cast<LegacyExportedTensor*>(self->manager_ctx);
}

// What DLPack cannot describe. Cheap key-set checks, done before any work.
void CheckExportable(const at::Tensor& tensor) {
  if (C10_UNLIKELY(!tensor.defined())) {
    throw Error(ErrorKind::kValue, "devbridge: cannot export an undefined tensor");
  }
  if (C10_UNLIKELY(tensor.layout() != c10::kStrided)) {
    throw Error(ErrorKind::kBuffer,
                "devbridge: DLPack describes only strided tensors, got layout " +
                    c10::str(tensor.layout()) + "; convert first (e.g. tensor.to_dense())");
  }
  if (C10_UNLIKELY(tensor.is_conj())) {
    throw Error(ErrorKind::kBuffer,
                "devbridge: cannot export a tensor with the conjugate bit set (its memory holds "
                "the unconjugated values); call tensor.resolve_conj() first");
  }
  if (C10_UNLIKELY(tensor.is_neg())) {
    throw Error(ErrorKind::kBuffer,
                "devbridge: cannot export a tensor with the negative bit set (its memory holds "
                "the un-negated values); call tensor.resolve_neg() first");
  }
}

void FillDLTensor(const at::Tensor& tensor, DLTensor* out) {
  out->data = tensor.data_ptr();
  out->device = ToDLDevice(tensor.device());
  out->ndim = static_cast<int32_t>(tensor.dim());
  out->dtype = at::getDLDataType(tensor);
  out->shape = const_cast<int64_t*>(tensor.sizes().data());
  out->strides = const_cast<int64_t*>(tensor.strides().data());
  out->byte_offset = 0;
}

}  // namespace

DLDevice ToDLDevice(c10::Device device) {
  switch (device.type()) {
    case c10::DeviceType::CPU:
      return DLDevice{kDLCPU, 0};
    case c10::DeviceType::PrivateUse1: {
      const bool ascend = GetOptions().export_ascend_device_type;
      return DLDevice{ascend ? static_cast<DLDeviceType>(kDLAscendDeviceType) : kDLExtDev,
                      static_cast<int32_t>(device.index())};
    }
    default:
      // Every other device exactly as PyTorch labels it (XPU's global index,
      // CUDA as kDLROCM on ROCm builds, ...). Throws c10::BufferError for
      // devices DLPack has no value for.
      return at::torchDeviceToDLDevice(device);
  }
}

DLManagedTensorVersioned* ExportOwning(const at::Tensor& tensor) {
  CheckExportable(tensor);
  auto holder = std::make_unique<ExportedTensor>();
  holder->tensor = tensor;
  DLManagedTensorVersioned& managed = holder->managed;
  managed.version.major = DLPACK_MAJOR_VERSION;
  managed.version.minor = DLPACK_MINOR_VERSION;
  managed.manager_ctx = holder.get();
  managed.deleter = &DeleteExportedTensor;
  managed.flags = 0;
  FillDLTensor(holder->tensor, &managed.dl_tensor);
  return &holder.release()->managed;
}

DLManagedTensor* ExportOwningLegacy(const at::Tensor& tensor) {
  CheckExportable(tensor);
  auto holder = std::make_unique<LegacyExportedTensor>();
  holder->tensor = tensor;
  holder->managed.manager_ctx = holder.get();
  holder->managed.deleter = &DeleteLegacyExportedTensor;
  FillDLTensor(holder->tensor, &holder->managed.dl_tensor);
  return &holder.release()->managed;
}

void ExportNonOwning(const at::Tensor& tensor, DLTensor* out) {
  CheckExportable(tensor);
  FillDLTensor(tensor, out);
}

}  // namespace devbridge
