// How operators run on hostplug: device memory is host memory, so an operator
// needs no kernels of its own. On the calling thread it checks its arguments
// and allocates its outputs; it then queues ONE task on the device's current
// stream, which runs ATen's CPU kernel on CPU tensors aliasing the device
// memory (hostAlias), and returns at once.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Storage.h>

#include <optional>

namespace hostplug {

inline bool isDevice(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

// A CPU tensor over `t`'s memory with its sizes, strides and dtype, made when
// the task is queued (later resize_ or set_ on `t` do not reach queued work)
// and holding `t`'s storage, so that memory stays allocated until the task has
// run and dropped it. A CPU `t` is returned as is, except a 0-dim one (a
// scalar operand), which is copied: the host may change it before the task runs.
at::Tensor hostAlias(const at::Tensor& t);

// Storage growth (resize_, out= arguments): a new block, the old bytes copied
// into it and the old block freed in stream order on the current stream.
void resizeStorage(const c10::Storage& storage, size_t nbytes);
void setSizesAndStrides(const at::Tensor& t, at::IntArrayRef sizes, at::IntArrayRef strides);

}  // namespace hostplug
