// How simdev operators run: asynchronously, in stream order, like a real device.
//
// simdev device memory is host-addressable, so an operator does not need its
// own kernels. It validates its arguments and allocates its outputs on the
// calling thread (cheap, synchronous, errors raised right there), then
// enqueues ONE piece of host work on the device's current stream. On the
// stream's worker thread that work wraps the device buffers as CPU tensors
// (aliases: same data, sizes, strides; no copy) and runs ATen's CPU kernel
// on them. The caller returns as soon as the work is queued.
//
// Lifetime: every Operand holds its storage, so a tensor freed by Python
// while its work is queued stays valid until the work has run; the last
// reference is then dropped on the worker thread, and the caching allocator
// records the free on the stream (see SimdevAllocator.h).
//
// Failure: work that throws marks its stream failed (the runtime's sticky
// error); the next synchronization of that stream raises, with the work's
// message (SimdevCheck.h).
#pragma once

#include <simdev/runtime.h>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <vector>

namespace torch_simdev {

// Queues `work` on `stream`. `what` (a string literal) names the work in
// error messages. Throws if the runtime refuses the launch.
void enqueueHostWork(sdStream_t stream, const char* what, std::function<void()> work);

// A tensor argument of host work, captured when the work is queued. Later
// changes to the tensor's metadata (resize_, set_) do not affect queued work.
class Operand {
 public:
  // simdev tensor: a snapshot of its layout plus its storage (kept alive).
  // CPU tensor: the tensor itself; a 0-dim CPU tensor (a scalar operand, as
  // in `x + 2`) is copied, so later host writes cannot change queued work.
  static Operand of(const at::Tensor& tensor);
  // A tensor the work writes: like of(), but a CPU tensor is never copied.
  static Operand output(const at::Tensor& tensor);

  // On the worker: a CPU tensor over the operand's memory.
  at::Tensor materialize() const;

 private:
  at::Tensor host_;  // set for CPU operands
  c10::Storage storage_;
  void* data_ = nullptr;
  std::vector<int64_t> sizes_;
  std::vector<int64_t> strides_;
  c10::ScalarType dtype_ = c10::ScalarType::Undefined;
  bool is_conj_ = false;
  bool is_neg_ = false;
};

using Operands = std::vector<Operand>;

// Queues `kernel` on the current stream of simdev:`device`; it receives the
// materialized operands, in order.
void launchOnDevice(const char* what, c10::DeviceIndex device, Operands operands,
                    std::function<void(std::vector<at::Tensor>&)> kernel);

// A meta tensor with the layout and dtype of `tensor` (a CPU scalar operand
// is returned as is), to let ATen's meta kernels compute output shapes and
// dtypes and validate arguments on the calling thread.
at::Tensor toMeta(const at::Tensor& tensor);

// A simdev tensor on `device` with the sizes, strides and dtype of `meta`.
at::Tensor emptyLike(const at::Tensor& meta, c10::DeviceIndex device);

// Makes `out` (an out= argument) match the layout ATen's meta kernel gave
// `meta_out` (after it ran the op on toMeta(out)), growing storage if needed.
void matchLayout(const at::Tensor& out, const at::Tensor& meta_out);

}  // namespace torch_simdev
