// Every aten operator simdev does not implement runs through PyTorch's boxed
// CPU fallback: inputs are copied to the CPU (a blocking device-to-host copy,
// which waits for their pending work), the CPU kernel runs on the calling
// thread, and results are copied back to the device. Correct and complete,
// but synchronous: only the operators registered in ops/*.cpp are
// asynchronous, stream-ordered host work. To make another operator async,
// register it the way elementwise.cpp does.
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

namespace torch_simdev {
namespace {

void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  at::native::cpu_fallback(op, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpuFallback>());
}

}  // namespace torch_simdev
