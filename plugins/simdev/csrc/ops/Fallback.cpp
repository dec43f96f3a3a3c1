// Every aten operator simdev does not implement runs through PyTorch's boxed
// CPU fallback: inputs are copied to the CPU (a blocking device-to-host copy,
// which waits for their pending work), the CPU kernel runs on the calling
// thread, and results are copied back to the device. Correct and complete,
// but synchronous: only the operators registered in ops/*.cpp are
// asynchronous, stream-ordered host work. To make another operator async,
// register it the way Elementwise.cpp does.
//
// The fallback itself takes tensors of any device (it copies them all to the
// CPU), so the call's devices are checked first, as CUDA's kernels check
// theirs (ArgumentDevices.h).
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <optional>

#include "ops/ArgumentDevices.h"

namespace torch_simdev {
namespace {

// cpu_fallback puts the results on the device of the first tensor argument
// (or of a Device argument). When that tensor is a CPU scalar operand
// (`torch.where(torch.tensor(True), torch.tensor(1.), x)`), the results
// belong on the call's simdev device, as on CUDA.
bool resultsWouldStayOnCpu(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const std::vector<c10::Argument>& schema = op.schema().arguments();
  const size_t first = stack.size() - schema.size();
  for (size_t i = first; i < stack.size(); ++i) {
    if (stack[i].isDevice()) return false;
  }
  for (size_t i = first; i < stack.size(); ++i) {
    if (stack[i].isTensor()) return stack[i].toTensor().defined() && stack[i].toTensor().is_cpu();
  }
  return false;
}

void moveResultsTo(c10::DeviceIndex device, const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::Device target(c10::DeviceType::PrivateUse1, device);
  const std::vector<c10::Argument>& returns = op.schema().returns();
  const size_t first = stack->size() - returns.size();
  for (size_t i = 0; i < returns.size(); ++i) {
    c10::IValue& result = (*stack)[first + i];
    const c10::AliasInfo* alias = returns[i].alias_info();
    if (alias != nullptr && alias->isWrite()) continue;  // an input itself, already in place
    if (result.isTensor() && result.toTensor().defined() && result.toTensor().is_cpu()) {
      result = result.toTensor().to(target);
    }
  }
}

void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::optional<c10::DeviceIndex> device = checkBoxedCallDevices(op, *stack);
  const bool fix_results = device.has_value() && resultsWouldStayOnCpu(op, *stack);
  at::native::cpu_fallback(op, stack);
  if (fix_results) moveResultsTo(*device, op, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpuFallback>());
}

// The fallback serves an operator only where no kernel serves the backend:
// a structured operator's CompositeExplicitAutogradNonFunctional kernel does,
// and runs the out= operator (here: the fallback) into a result it sized.
// For mse_loss and smooth_l1_loss with a reduction, that result is 0-dim, and
// the out= kernel's meta first sizes it as the elementwise loss and then
// shrinks it (aten/src/ATen/native/Loss.cpp), so every call warned "An output
// with one or more elements was resized". The functional operators run the
// CPU's functional kernels instead, as on a backend with kernels of its own.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mse_loss", torch::CppFunction::makeFromBoxedFunction<&cpuFallback>());
  m.impl("smooth_l1_loss", torch::CppFunction::makeFromBoxedFunction<&cpuFallback>());
}

}  // namespace torch_simdev
