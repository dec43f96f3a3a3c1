#pragma once
// The boxed fallback's CUDA path (fallback.cpp), for operators that must be
// registered to it by name because another kernel would otherwise win over
// the fallback (foreach.cpp).

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace cudadev {

// Runs the operator's CUDA kernel on cudadev's memory and current stream: the
// boxed fallback of every operator cudadev does not implement itself.
void run_cuda_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                     torch::jit::Stack* stack);

// The same for torch's multi-tensor operators, whose CUDA kernels neither keep
// nor resize their arguments: their aliases come from, and stay in, the
// calling thread's AliasCache (alias_cache.h), as the same lists come back on
// every optimizer step.
void run_cuda_multi_tensor_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                                  torch::jit::Stack* stack);

}  // namespace cudadev
