// Every aten operator without a hostplug kernel of its own (Ops.cpp) runs
// here, on CPU aliases of its hostplug operands (Ops.h):
//
// - asynchronously, when its results are tensors: ATen's meta kernel settles
//   the results' sizes, strides and dtypes on the calling thread (a bad call
//   raises right there), the results are allocated on the device, and ONE
//   task on the current stream runs the CPU kernel and copies its results in;
// - synchronously otherwise (a result that is not a tensor, such as item(), or
//   no meta kernel, such as nonzero's data-dependent shape): the current stream
//   is waited for and the CPU kernel runs on the calling thread.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "Ops.h"
#include "Runtime.h"

namespace hostplug {
namespace {

using Stack = torch::jit::Stack;

// The stack's tensors (also inside lists) and devices mapped by `tensor` and `device`.
template <typename TensorFn>
c10::IValue mapped(const c10::IValue& value, const TensorFn& tensor, c10::DeviceType device) {
  if (value.isTensor()) return tensor(value.toTensor());
  if (value.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : value.toTensorList()) out.push_back(tensor(t));
    return out;
  }
  if (value.isList()) {  // Tensor?[] (index's indices)
    c10::impl::GenericList out(value.toList().elementType());
    for (const c10::IValue& element : value.toList()) {
      out.push_back(element.isTensor() ? c10::IValue(tensor(element.toTensor())) : element);
    }
    return out;
  }
  if (value.isDevice() && value.toDevice().type() == c10::DeviceType::PrivateUse1) return c10::Device(device);
  return value;
}

template <typename TensorFn>
Stack mappedArguments(const Stack& arguments, const TensorFn& tensor, c10::DeviceType device) {
  Stack out;
  out.reserve(arguments.size());
  for (const c10::IValue& value : arguments) out.push_back(mapped(value, tensor, device));
  return out;
}

at::Tensor toMeta(const at::Tensor& t) {
  if (!t.defined() || (t.is_cpu() && t.dim() == 0)) return t;  // meta kernels take CPU scalars, as CUDA's do
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
}

// The hostplug device of the call: that of its hostplug tensors (all on one
// device: the task runs on that device's stream alone), else a hostplug
// Device argument's.
c10::DeviceIndex deviceOf(const c10::FunctionSchema& schema, const Stack& arguments) {
  std::optional<c10::DeviceIndex> found;
  const auto look = [&](const at::Tensor& t) {
    if (!isDevice(t)) return t;
    if (!found) found = t.device().index();
    TORCH_CHECK(*found == t.device().index(), schema.name(), ": expected all tensors on one device, got hostplug:",
                static_cast<int>(*found), " and ", t.device(), "; move them to one device with .to() first");
    return t;
  };
  for (const c10::IValue& value : arguments) mapped(value, look, c10::DeviceType::CPU);
  if (found) return *found;
  for (const c10::IValue& value : arguments) {
    if (value.isDevice() && value.toDevice().type() == c10::DeviceType::PrivateUse1 && value.toDevice().has_index()) {
      return value.toDevice().index();
    }
  }
  return currentDevice();
}

bool holdsTensor(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::OptionalType) return holdsTensor(type->castRaw<c10::OptionalType>()->getElementType());
  return type->kind() == c10::TypeKind::TensorType;
}

// The argument a result aliases (an in-place or out= op's written tensor, or a view's base).
std::optional<size_t> aliasedArgument(const c10::FunctionSchema& schema, size_t result) {
  const c10::AliasInfo* alias = schema.returns()[result].alias_info();
  if (alias == nullptr) return std::nullopt;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const c10::AliasInfo* argument = schema.arguments()[i].alias_info();
    if (argument != nullptr && argument->beforeSets() == alias->beforeSets()) return i;
  }
  TORCH_CHECK(false, "hostplug: ", schema.name(), "'s result ", result, " aliases no argument");
}

using CopyBack = std::vector<std::pair<at::Tensor, at::Tensor>>;  // (alias of an out= argument, CPU result)

// The CPU stack of a call: aliases of its tensors (Ops.h), except that an
// out= argument gets a CPU tensor of its own, copied into it after the call
// (`copy_back`): some CPU kernels use `out` as scratch space of another shape
// first (mse_loss.out), and an alias of device memory cannot be resized.
Stack cpuArguments(const c10::FunctionSchema& schema, const Stack& arguments, CopyBack& copy_back) {
  Stack cpu = mappedArguments(arguments, hostAlias, c10::DeviceType::CPU);
  for (size_t i = 0; i < arguments.size(); ++i) {
    const c10::Argument& argument = schema.arguments()[i];
    if (!argument.kwarg_only() || argument.alias_info() == nullptr || !argument.alias_info()->isWrite() ||
        !arguments[i].isTensor() || !isDevice(arguments[i].toTensor())) {
      continue;
    }
    const at::Tensor& out = arguments[i].toTensor();
    at::Tensor result = at::empty_strided(out.sizes(), out.strides(), out.options().device(at::kCPU));
    copy_back.emplace_back(hostAlias(out), result);
    cpu[i] = result;
  }
  return cpu;
}

// The results' layouts from the meta kernel, or nullopt where none can tell.
std::optional<Stack> metaResults(const c10::OperatorHandle& op, const Stack& arguments) {
  const c10::FunctionSchema& schema = op.schema();
  for (const c10::Argument& result : schema.returns()) {
    const bool list = result.type()->kind() == c10::TypeKind::ListType;
    if (!(list ? holdsTensor(result.type()->castRaw<c10::ListType>()->getElementType()) : holdsTensor(result.type()))) {
      return std::nullopt;
    }
    if (list && result.alias_info() != nullptr) return std::nullopt;  // views as lists: not here
  }
  Stack stack = mappedArguments(arguments, toMeta, c10::DeviceType::Meta);
  try {
    op.callBoxed(stack);
  } catch (const std::exception&) {  // c10 errors, and Python ones from Python meta kernels
    return std::nullopt;  // no meta kernel (or the call is wrong: the CPU kernel says why, synchronously)
  }
  return stack;
}

void runAsync(const c10::OperatorHandle& op, Stack* stack, size_t first, c10::DeviceIndex device,
              const Stack& arguments, Stack metas) {
  const c10::FunctionSchema& schema = op.schema();
  const c10::Device where(c10::DeviceType::PrivateUse1, device);
  Stack results;
  for (size_t i = 0; i < metas.size(); ++i) {
    if (metas[i].isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& meta : metas[i].toTensorList()) {
        list.push_back(at::empty_strided(meta.sizes(), meta.strides(), meta.options().device(where)));
      }
      results.emplace_back(list);
      continue;
    }
    const at::Tensor meta = metas[i].isNone() ? at::Tensor() : metas[i].toTensor();
    if (!meta.defined()) {
      results.emplace_back(metas[i]);
    } else if (auto argument = aliasedArgument(schema, i)) {
      const at::Tensor& base = arguments[*argument].toTensor();
      if (schema.returns()[i].alias_info()->isWrite()) {  // in place, out=: written where it is (resized like the meta)
        if (base.sizes() != meta.sizes() || base.strides() != meta.strides()) {
          setSizesAndStrides(base, meta.sizes(), meta.strides());
        }
        results.emplace_back(base);
      } else {  // a view: the meta input started at offset 0
        results.emplace_back(base.as_strided(meta.sizes(), meta.strides(), base.storage_offset() + meta.storage_offset()));
      }
    } else {
      results.emplace_back(at::empty_strided(meta.sizes(), meta.strides(), meta.options().device(where)));
    }
  }
  // What the task needs, made now: aliases of the inputs and of the fresh results.
  CopyBack copy_back;
  Stack cpu_arguments = cpuArguments(schema, arguments, copy_back);
  Stack outputs;
  for (size_t i = 0; i < results.size(); ++i) {
    const bool written = schema.returns()[i].alias_info() != nullptr;
    outputs.push_back(written ? c10::IValue() : mapped(results[i], hostAlias, c10::DeviceType::CPU));
  }
  enqueueOperator(device, [op, cpu_arguments = std::move(cpu_arguments), outputs = std::move(outputs),
                            copy_back = std::move(copy_back)]() mutable {
    at::AutoDispatchBelowADInplaceOrView below_autograd;  // plain CPU tensors, no autograd history
    op.callBoxed(cpu_arguments);
    for (auto& [alias, result] : copy_back) alias.copy_(result);
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].isTensor() && outputs[i].toTensor().defined()) {
        outputs[i].toTensor().copy_(cpu_arguments[i].toTensor());
      } else if (outputs[i].isTensorList()) {
        const c10::List<at::Tensor> computed = cpu_arguments[i].toTensorList();
        const c10::List<at::Tensor> into = outputs[i].toTensorList();
        for (size_t j = 0; j < into.size(); ++j) into.get(j).copy_(computed.get(j));
      }
    }
  });
  torch::jit::drop(*stack, stack->size() - first);
  for (c10::IValue& result : results) stack->push_back(std::move(result));
}

void runSync(const c10::OperatorHandle& op, Stack* stack, size_t first, c10::DeviceIndex device,
             const Stack& arguments) {
  const c10::FunctionSchema& schema = op.schema();
  currentStream(device).synchronize();
  CopyBack copy_back;
  Stack cpu = cpuArguments(schema, arguments, copy_back);
  op.callBoxed(cpu);
  for (auto& [alias, result] : copy_back) alias.copy_(result);
  const c10::Device where(c10::DeviceType::PrivateUse1, device);
  // Nothing is queued on a fresh tensor, so it is filled right here.
  const auto toDevice = [&](const at::Tensor& t) {
    if (!t.defined() || !t.is_cpu()) return t;
    at::Tensor out = at::empty_strided(t.sizes(), t.strides(), t.options().device(where));
    hostAlias(out).copy_(t);
    return out;
  };
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (auto argument = aliasedArgument(schema, i)) {
      TORCH_CHECK(schema.returns()[i].alias_info()->isWrite(), "hostplug: ", schema.name(),
                  " returns a view and has no meta kernel to lay it out; hostplug cannot run it");
      cpu[i] = arguments[*argument];
    } else {
      cpu[i] = mapped(cpu[i], toDevice, c10::DeviceType::CPU);
    }
  }
  torch::jit::drop(*stack, stack->size() - first);
  for (c10::IValue& result : cpu) stack->push_back(std::move(result));
}

void fallback(const c10::OperatorHandle& op, Stack* stack) {
  // set_ changes which memory a tensor uses: on an alias it would change the alias alone.
  TORCH_CHECK(op.schema().name() != "aten::set_", "hostplug does not implement ", op.schema());
  const size_t first = stack->size() - op.schema().arguments().size();
  const Stack arguments(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
  const c10::DeviceIndex device = deviceOf(op.schema(), arguments);
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  if (std::optional<Stack> metas = metaResults(op, arguments)) {
    runAsync(op, stack, first, device, arguments, std::move(*metas));
  } else {
    runSync(op, stack, first, device, arguments);
  }
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
}

}  // namespace hostplug
