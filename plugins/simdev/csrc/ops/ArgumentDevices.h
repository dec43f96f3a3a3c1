// The device check of every simdev operator, registered ones and the CPU
// fallback alike: all tensor arguments on the operation's simdev device.
//
// The dispatcher routes a call to simdev whenever any tensor argument is a
// simdev tensor, and a kernel registered for a backend gets no device check
// from torch (CUDA's get one generated, aten/src/ATen/core/op_registration/
// adaption.h, or TensorIterator's). Unchecked, a CPU tensor would be read on
// the device's stream (or, through the fallback, every argument copied to the
// CPU and the result put on simdev:0), and another simdev device's tensor
// would be read with no ordering against the work queued on its own stream:
// the call would quietly succeed where CUDA raises, and a device-placement bug
// in the code under test would pass unseen.
//
// CUDA's exceptions are kept, no more: a 0-dim CPU tensor that the operation
// only reads (`x + torch.tensor(2.)`), where TensorIterator takes one
// (allow_cpu_scalars: binary elementwise ops, not unary ones or reductions);
// and CPU indices of advanced indexing (Tensor?[] arguments: `x[cpu_index]`),
// which ATen moves to the indexed tensor's device (make_info in
// aten/src/ATen/native/TensorAdvancedIndexingUtils.h).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>
#include <c10/util/ArrayRef.h>

#include <optional>

namespace torch_simdev {

// Whether a 0-dim CPU tensor the operation only reads may accompany simdev
// tensors: as TensorIterator's allow_cpu_scalars, which CUDA's binary
// elementwise ops set and its unary ops and reductions do not.
enum class CpuScalars { kRefused, kAccepted };

// One tensor argument of a call, named as in the operator's schema.
struct TensorArgument {
  const char* name;
  // Null or undefined for an absent optional tensor, which any device accepts.
  const at::Tensor* tensor;
  // Written by the operation (out=, in place): never a CPU scalar.
  bool written = false;
};

// The simdev device of the call: the device of its first simdev tensor, which
// every other defined argument must be on (but for the CPU scalars above).
// Raises a RuntimeError naming the operator, the argument, both devices and
// the fix otherwise.
c10::DeviceIndex commonSimdevDevice(const char* op, c10::ArrayRef<TensorArgument> arguments,
                                    CpuScalars cpu_scalars);

// The same check for a boxed call (the CPU fallback): every Tensor, Tensor?,
// Tensor[] and Tensor?[] argument of `op` on top of `stack`, written ones as
// the schema marks them (alias_info), CPU tensors in Tensor?[] index lists
// accepted. A 0-dim CPU tensor that is only read is accepted: the fallback
// serves every operator and cannot tell CUDA's elementwise kernels, which
// accept one, from its other kernels, which refuse one (so a 0-dim CPU
// operand such as index_select's index passes here where CUDA raises);
// refusing it would break the common case (`torch.where(mask, x,
// torch.tensor(0.))`). Returns the simdev device, or nothing when no checked
// argument is a simdev tensor.
std::optional<c10::DeviceIndex> checkBoxedCallDevices(const c10::OperatorHandle& op,
                                                      const torch::jit::Stack& stack);

// A storage argument (set_): on the tensor's own device, as ATen requires of
// every backend (checkSetStorage), with the same kind of message.
void checkStorageDevice(const char* op, const at::Tensor& self, const c10::Storage& source);

}  // namespace torch_simdev
