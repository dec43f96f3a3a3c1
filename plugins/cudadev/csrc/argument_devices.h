#pragma once
// The device check of the operators cudadev implements directly (matmul.cpp,
// convolution.cpp).
//
// The dispatcher picks cudadev's kernel whenever any tensor argument is a
// cudadev tensor (PrivateUse1 outranks CPU and CUDA), and a kernel registered
// directly gets no device check from torch. Unchecked, the CUDA kernel it runs
// would reject a CPU tensor with a message about CUDA wrappers, and would use
// a torch.cuda tensor on the cudadev stream without ordering it against
// torch.cuda's stream. This check names the operator, the argument and the fix.

#include <initializer_list>

#include <ATen/core/Tensor.h>

namespace cudadev {

struct TensorArgument {
  const char* name;
  // Null or undefined for an absent optional tensor (e.g. a convolution
  // without bias), which any device accepts.
  const at::Tensor* tensor;
};

// The cudadev device of the operator's tensors. Raises when a defined tensor
// is on another device (the CPU, torch.cuda, another cudadev device), naming
// it and the cudadev device of the first cudadev tensor.
c10::DeviceIndex common_cudadev_device(const char* op, std::initializer_list<TensorArgument> arguments);

}  // namespace cudadev
