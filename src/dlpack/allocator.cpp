// managed_tensor_allocator: a new owning tensor from the framework allocator.
//
// Called by kernels through tvm-ffi with the GIL released, so it must not
// touch Python: errors go only through the consumer's SetError callback.
#include <ATen/DLConvertor.h>
#include <ATen/ops/empty.h>

#include "devbridge/dlpack_exchange.h"
#include "devbridge/runtime.h"
#include "dlpack/entry_points.h"
#include "runtime/dl_device_type.h"

namespace devbridge {
namespace dlpack_entry {
namespace {

at::Tensor AllocateLike(const DLTensor& prototype) {
  if (prototype.ndim < 0) {
    throw Error(ErrorKind::kValue,
                "devbridge: allocator prototype has negative ndim " + std::to_string(prototype.ndim));
  }
  if (prototype.ndim > 0 && prototype.shape == nullptr) {
    throw Error(ErrorKind::kValue, "devbridge: allocator prototype has ndim " +
                                       std::to_string(prototype.ndim) + " but a NULL shape");
  }
  const c10::IntArrayRef shape(prototype.shape, static_cast<size_t>(prototype.ndim));
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      throw Error(ErrorKind::kValue, "devbridge: allocator prototype has negative size " +
                                         std::to_string(shape[i]) + " in dimension " +
                                         std::to_string(i));
    }
  }
  const c10::DeviceType type = C10DeviceTypeFromDL(prototype.device.device_type);
  c10::Device device(type);
  if (type != c10::DeviceType::CPU) {
    device = c10::Device(type, DeviceIndexFromDL(prototype.device.device_id));
    if (type == c10::DeviceType::PrivateUse1) {
      const DeviceRuntime& runtime = DeviceRuntime::For(type);
      if (!runtime.Available()) (void)runtime.CurrentDevice();  // throws "import the plugin"
    }
  }
  const c10::ScalarType dtype = at::toScalarType(prototype.dtype);
  return at::empty(shape, at::TensorOptions().dtype(dtype).device(device));
}

}  // namespace

int ManagedTensorAllocator(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                           void (*SetError)(void* error_ctx, const char* kind,
                                            const char* message)) {
  try {
    if (out == nullptr) {
      throw Error(ErrorKind::kValue, "devbridge: managed_tensor_allocator got out == NULL");
    }
    *out = nullptr;
    if (prototype == nullptr) {
      throw Error(ErrorKind::kValue, "devbridge: managed_tensor_allocator got prototype == NULL");
    }
    *out = ExportOwning(AllocateLike(*prototype));
    return 0;
  } catch (...) {
    std::string message;
    const ErrorKind kind = DescribeCurrentException(&message);
    try {
      SetLastError(message);
    } catch (...) {
    }
    // A consumer may pass no SetError; the -1 alone then reports the failure.
    if (SetError != nullptr) SetError(error_ctx, PythonExceptionName(kind), message.c_str());
    return -1;
  }
}

}  // namespace dlpack_entry
}  // namespace devbridge
