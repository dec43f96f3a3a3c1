// Running an ATen operator on simdev tensors as host work (see HostWork.h),
// with shapes, dtypes and argument errors settled on the calling thread, so a
// bad call raises at the call site and queued work only fails for
// data-dependent reasons.
//
// Settling uses meta tensors: either ATen's own meta kernels (through the
// dispatcher: exact, but some are Python functions, ~100 us a call), or, for
// elementwise ops, TensorIterator directly in C++ (the same shape, dtype
// promotion and casting rules, a few microseconds).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

#include "ops/ArgumentDevices.h"

namespace torch_simdev {

// The CPU kernel of an op: tensors[0] is the output, the rest the inputs, all
// CPU tensors (aliases of simdev memory, or CPU scalar operands).
using OpKernel = std::function<void(std::vector<at::Tensor>& tensors)>;
// Validates an out=/in-place call on meta tensors laid out like the kernel's
// (metas[0] is the output); may resize metas[0] as the op would resize out.
using OpCheck = std::function<void(std::vector<at::Tensor>& metas)>;

// An op's tensor argument and its name in the op's schema (for the device
// check's messages, ArgumentDevices.h).
struct Input {
  const char* name;
  at::Tensor tensor;
};
using Inputs = std::vector<Input>;

// `op` is the operator's schema name (aten::add.Tensor): it names the op in
// errors and its work in stream failures. `cpu_scalars` says whether a 0-dim
// CPU input may accompany the simdev tensors, as on CUDA (ArgumentDevices.h).

// A functional op: `meta_op` maps meta inputs to the meta result (giving the
// output's sizes, strides and dtype); the output is allocated on the inputs'
// simdev device and `kernel` fills it, on the device's current stream.
at::Tensor runFunctional(const char* op, const Inputs& inputs, CpuScalars cpu_scalars,
                         const std::function<at::Tensor(std::vector<at::Tensor>&)>& meta_op,
                         OpKernel kernel);

// An out= or in-place op writing `out` (a simdev tensor, the argument
// `out_name`): `check` validates on meta tensors (default: `kernel` itself run
// on them), then `kernel` runs as host work. For in-place ops, pass self as
// `out` ("self") and only the other inputs.
at::Tensor& runInto(const char* op, at::Tensor& out, const char* out_name, const Inputs& inputs,
                    CpuScalars cpu_scalars, OpKernel kernel, OpCheck check = nullptr);
const at::Tensor& runInto(const char* op, const at::Tensor& out, const char* out_name, const Inputs& inputs,
                          CpuScalars cpu_scalars, OpKernel kernel, OpCheck check = nullptr);

// ---------------------------------------------------------------- elementwise
// TensorIterator's rules for elementwise ops, on meta tensors.

enum class Promotion {
  kCommonDtype,      // add, sub, mul: inputs promote to their common dtype
  kIntegerToFloat,   // div, exp: as above, then integers to the default float
  kSameDtype,        // neg: unary, output dtype must equal the input's
};

// The meta result of an elementwise op over `metas` (broadcast shape,
// layout-preserving strides, promoted dtype).
at::Tensor elementwiseResult(std::vector<at::Tensor>& metas, Promotion promotion);

// An OpCheck for an elementwise out= (resizes metas[0] if needed) or in-place
// (metas[0] is self: never resized, must hold the broadcast shape) call.
OpCheck elementwiseCheck(Promotion promotion, bool inplace);

}  // namespace torch_simdev
