// torch's multi-tensor operators (_foreach_add_, _foreach_lerp_, ... : what
// torch.optim's foreach implementations and clip_grad_norm_ call) on CUDA's
// multi-tensor kernels.
//
// Each of them has two kernels in torch: CUDA's, one launch for a whole list
// of tensors, and a CompositeExplicitAutograd one, a loop calling the
// single-tensor operator per tensor. A composite kernel serves every backend
// key without a kernel of its own, PrivateUse1 included, and the dispatcher
// prefers it to a backend's boxed fallback. So without this file an
// AdamW(foreach=True) step on cudadev ran every tensor's lerp_, mul_,
// addcmul_, sqrt, div_ and addcdiv_ alone through the fallback: per step of
// the GPT block (12 parameters), 576 fallback calls and launches instead of
// 10 (bench/train_profile.py). A plugin with multi-tensor kernels of its own
// registers them for PrivateUse1 in the same way.
//
// The set is taken from the dispatcher when cudadev loads, not written down:
// every aten::_foreach_* operator with a CUDA kernel of torch's and no
// PrivateUse1 kernel gets the fallback's CUDA path (fallback.cpp). Their out=
// forms have no CUDA kernel and keep the composite loop, as on torch.cuda.
//
// Host cost (bench/multi_tensor_host.py, H200, commit 64e9a84): 1-3 us per
// call and 0.3-0.55 us per tensor argument more than torch.cuda's own call,
// by the host's load; what the fallback did per tensor was make and release a
// CUDA alias (cuda_alias.h), and look the tensor up among those it had
// aliased, a linear search. So these operators take their aliases from a
// cache kept across calls (alias_cache.h; the same lists come back on every
// optimizer step), and their scopes index what they aliased
// (pointer_index.h). Boxing is not what costs: unboxed kernels for these
// operators, tried at commit 8ddd1b4, gave _foreach_lerp_.Scalar a gap to
// torch.cuda within 0.1 us per call and 0.06 us per tensor of the gap that
// _foreach_lerp_.ScalarList, left on the fallback, had in the same run; they
// were taken out again.

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>
#include <string>

#include "fallback.h"

namespace cudadev {
namespace {

bool wants_cuda_multi_tensor_kernel(const c10::OperatorName& name) {
  if (name.name.rfind("aten::_foreach_", 0) != 0) {
    return false;
  }
  const std::optional<c10::OperatorHandle> op = c10::Dispatcher::singleton().findOp(name);
  return op && op->hasKernelForDispatchKey(c10::DispatchKey::CUDA) &&
         !op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1);
}

std::unique_ptr<torch::Library> register_multi_tensor_operators() {
  auto library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                                  c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (!wants_cuda_multi_tensor_kernel(name)) {
      continue;
    }
    const std::string qualified =
        name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
    library->impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&run_cuda_multi_tensor_kernel>());
  }
  return library;
}

// Registered while torch_cudadev's library loads; libtorch_cuda, which
// defines the CUDA kernels, is loaded (and registered) before it.
const std::unique_ptr<torch::Library> multi_tensor_operators = register_multi_tensor_operators();

}  // namespace
}  // namespace cudadev
