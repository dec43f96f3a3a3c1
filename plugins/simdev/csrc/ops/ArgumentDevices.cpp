#include "ops/ArgumentDevices.h"

#include <c10/util/SmallVector.h>

#include <string>

namespace torch_simdev {
namespace {

constexpr auto kSimdev = c10::DeviceType::PrivateUse1;

// One tensor the check looks at; `index` is its place in a Tensor[] argument
// (-1 for a plain tensor argument).
struct Checked {
  const at::Tensor* tensor;
  const char* name;
  int64_t index;
  bool written;
};

using CheckedList = c10::SmallVector<Checked, 8>;

std::string deviceName(const c10::Device& device) {
  if (device.type() == kSimdev) return "simdev:" + std::to_string(static_cast<int>(device.index()));
  return device.str();
}

std::string argumentName(const Checked& argument) {
  if (argument.index < 0) return argument.name;
  return std::string(argument.name) + "[" + std::to_string(argument.index) + "]";
}

// Out of line: the check runs on every call, the message almost never.
[[noreturn]] C10_NOINLINE void raiseMixedDevices(const std::string& op, const Checked& reference,
                                                 const Checked& other) {
  const std::string target = deviceName(reference.tensor->device());
  const std::string name = argumentName(other);
  // A written argument (out=, in place) must be replaced, not just copied:
  // the op writes the very tensor it is given.
  const std::string fix =
      other.written
          ? name + " is written by the operation: make it a tensor on " + target + " first (" + name + " = " + name +
                ".to('" + target + "'))"
          : "move " + name + " there with .to('" + target + "') (a module's parameters with module.to('" + target +
                "'))";
  TORCH_CHECK(false, op, ": expected all tensors on the same device, but ", name, " is on ",
              deviceName(other.tensor->device()), " and ", argumentName(reference), " on ", target, "; ", fix);
}

bool defined(const Checked& argument) { return argument.tensor != nullptr && argument.tensor->defined(); }

// The check itself; `op` is called for the operator's name only on failure.
template <typename OpName>
std::optional<c10::DeviceIndex> check(const CheckedList& arguments, CpuScalars cpu_scalars, OpName&& op) {
  const Checked* reference = nullptr;
  for (const Checked& argument : arguments) {
    if (defined(argument) && argument.tensor->device().type() == kSimdev) {
      reference = &argument;
      break;
    }
  }
  if (reference == nullptr) return std::nullopt;
  const c10::Device device = reference->tensor->device();
  for (const Checked& argument : arguments) {
    if (!defined(argument) || argument.tensor->device() == device) continue;
    const at::Tensor& t = *argument.tensor;
    // TensorIterator's allow_cpu_scalars (TensorIteratorBase::compute_types).
    if (cpu_scalars == CpuScalars::kAccepted && !argument.written && t.is_cpu() && t.dim() == 0) continue;
    raiseMixedDevices(op(), *reference, argument);
  }
  return device.index();
}

}  // namespace

c10::DeviceIndex commonSimdevDevice(const char* op, c10::ArrayRef<TensorArgument> arguments,
                                    CpuScalars cpu_scalars) {
  CheckedList checked;
  for (const TensorArgument& argument : arguments) {
    checked.push_back({argument.tensor, argument.name, -1, argument.written});
  }
  const std::optional<c10::DeviceIndex> device = check(checked, cpu_scalars, [op] { return std::string(op); });
  // Unreachable through the dispatcher, which routes here only with a simdev tensor.
  TORCH_CHECK(device.has_value(), op, ": expected a simdev tensor argument");
  return *device;
}

std::optional<c10::DeviceIndex> checkBoxedCallDevices(const c10::OperatorHandle& op,
                                                      const torch::jit::Stack& stack) {
  const std::vector<c10::Argument>& schema = op.schema().arguments();
  TORCH_INTERNAL_ASSERT(stack.size() >= schema.size());
  const size_t first = stack.size() - schema.size();
  CheckedList checked;
  for (size_t i = 0; i < schema.size(); ++i) {
    const c10::IValue& value = stack[first + i];
    const c10::AliasInfo* alias = schema[i].alias_info();
    const bool written = alias != nullptr && alias->isWrite();
    const char* name = schema[i].name().c_str();
    if (value.isTensor()) {
      checked.push_back({&value.toTensor(), name, -1, written});
    } else if (value.isTensorList() || value.isOptionalTensorList()) {
      const bool indices = value.isOptionalTensorList();
      const c10::ArrayRef<c10::IValue> elements = value.toListRef();
      for (size_t j = 0; j < elements.size(); ++j) {
        if (!elements[j].isTensor()) continue;  // an absent index
        const at::Tensor& t = elements[j].toTensor();
        if (indices && t.defined() && t.is_cpu()) continue;  // moved to the device by ATen (see the header)
        checked.push_back({&t, name, static_cast<int64_t>(j), written});
      }
    }
  }
  return check(checked, CpuScalars::kAccepted, [&op] { return c10::toString(op.operator_name()); });
}

void checkStorageDevice(const char* op, const at::Tensor& self, const c10::Storage& source) {
  if (source.device() == self.device()) return;
  const std::string target = deviceName(self.device());
  TORCH_CHECK(false, op, ": expected a storage on the same device, but source is on ", deviceName(source.device()),
              " and self on ", target, "; move the data there with .to('", target, "') first");
}

}  // namespace torch_simdev
