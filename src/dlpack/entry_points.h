// The five DLPackExchangeAPI functions (C ABI; each never throws).
#pragma once

#include <ATen/dlpack.h>

namespace devbridge {
namespace dlpack_entry {

int ManagedTensorAllocator(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                           void (*SetError)(void* error_ctx, const char* kind, const char* message));
int ManagedTensorFromPyObjectNoSync(void* py_object, DLManagedTensorVersioned** out);
int ManagedTensorToPyObjectNoSync(DLManagedTensorVersioned* tensor, void** out_py_object);
int DLTensorFromPyObjectNoSync(void* py_object, DLTensor* out);
int CurrentWorkStream(DLDeviceType device_type, int32_t device_id, void** out_current_stream);

}  // namespace dlpack_entry
}  // namespace devbridge
