#include "argument_devices.h"

namespace cudadev {
namespace {

constexpr auto kCudadev = c10::DeviceType::PrivateUse1;

bool is_cudadev(const TensorArgument& argument) {
  return argument.tensor != nullptr && argument.tensor->defined() &&
         argument.tensor->device().type() == kCudadev;
}

// Out of line: the check runs on every call, the message almost never.
[[noreturn]] C10_NOINLINE void raise_mixed_devices(const char* op, const TensorArgument& cudadev_argument,
                                                   const TensorArgument& other) {
  const c10::Device cudadev = cudadev_argument.tensor->device();
  const c10::Device device = other.tensor->device();
  const char* why = "";
  if (device.type() == c10::DeviceType::CUDA) {
    why = " (a torch.cuda tensor is ordered on torch.cuda's streams, not on cudadev's, so using "
          "it in a cudadev operator would race)";
  } else if (device.type() == kCudadev) {
    why = " (an operator runs on one device)";
  }
  TORCH_CHECK(false, "cudadev: ", op, " got ", other.name, " on ", device, " and ",
              cudadev_argument.name, " on ", cudadev,
              "; all tensors of a cudadev operator must be on one cudadev device", why,
              ". Move it there first: ", other.name, ".to('", cudadev, "').");
}

}  // namespace

c10::DeviceIndex common_cudadev_device(const char* op, std::initializer_list<TensorArgument> arguments) {
  const TensorArgument* reference = nullptr;
  for (const TensorArgument& argument : arguments) {
    if (is_cudadev(argument)) {
      reference = &argument;
      break;
    }
  }
  TORCH_INTERNAL_ASSERT(reference != nullptr, "cudadev: ", op,
                        " reached cudadev's kernel without a cudadev tensor");
  const c10::Device device = reference->tensor->device();
  for (const TensorArgument& argument : arguments) {
    if (argument.tensor != nullptr && argument.tensor->defined() &&
        C10_UNLIKELY(argument.tensor->device() != device)) {
      raise_mixed_devices(op, *reference, argument);
    }
  }
  return device.index();
}

}  // namespace cudadev
