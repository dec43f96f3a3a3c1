// The one boxed fallback for PrivateUse1: every operator cudadev does not
// implement itself (everything except tensor_ops.cpp, copy.cpp, matmul.cpp
// and convolution.cpp) runs torch's CUDA kernel for it, on cudadev's memory
// and cudadev's current stream.
//
// For one call:
//  1. find the cudadev device from the tensor and device arguments; reject
//     tensors of two cudadev devices, and cudadev mixed with torch.cuda (the
//     two live on different streams, so a silent mix would race);
//  2. make the current CUDA stream of that device the current cudadev stream
//     (an external CUDA stream) with a CUDA stream guard, which also makes it
//     the current device; torch.cuda's own current stream is restored after;
//  3. replace cudadev tensors (also inside Tensor[] and Tensor?[]) by CUDA
//     aliases and cudadev device arguments by the CUDA device (see
//     cuda_alias.h);
//  4. redispatch to exactly the operator's CUDA kernel;
//  5. apply in-place effects to the cudadev tensors and map the results back.
// Fresh results come from torch's CUDA caching allocator, allocated on the
// cudadev stream (step 2), so they are stream-ordered on that stream.

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <optional>
#include <string>

#include "alias_cache.h"
#include "cuda_alias.h"
#include "device.h"
#include "fallback.h"

namespace cudadev {
namespace {

constexpr auto kCudadev = c10::DeviceType::PrivateUse1;

bool is_cudadev(const at::Tensor& tensor) {
  return tensor.defined() && tensor.device().type() == kCudadev;
}

bool is_cuda(const at::Tensor& tensor) {
  return tensor.defined() && tensor.device().type() == c10::DeviceType::CUDA;
}

// Calls f for each tensor in an argument or result: a Tensor, or the tensors
// of a Tensor[] / Tensor?[] list.
template <typename F>
void for_each_tensor(const c10::IValue& value, F&& f) {
  if (value.isTensor()) {
    f(value.toTensor());
  } else if (value.isList()) {
    for (const c10::IValue& element : value.toListRef()) {
      if (element.isTensor()) {
        f(element.toTensor());
      }
    }
  }
}

// The value with each tensor for which `pick` holds replaced by map(tensor).
// A list is copied (with its element type, so it unboxes as before), never
// modified: the caller may still hold it.
template <typename Pick, typename Map>
c10::IValue map_tensors(const c10::IValue& value, Pick&& pick, Map&& map) {
  if (value.isTensor()) {
    return pick(value.toTensor()) ? c10::IValue(map(value.toTensor())) : value;
  }
  if (value.isList()) {
    bool any = false;
    for_each_tensor(value, [&](const at::Tensor& t) { any = any || pick(t); });
    if (!any) {
      return value;
    }
    c10::impl::GenericList mapped(value.toList().elementType());
    mapped.reserve(value.toListRef().size());
    for (const c10::IValue& element : value.toListRef()) {
      if (element.isTensor() && pick(element.toTensor())) {
        mapped.push_back(map(element.toTensor()));
      } else {
        mapped.push_back(element);
      }
    }
    return c10::IValue(std::move(mapped));
  }
  return value;
}

// Finds the cudadev device of one operator call and rejects device mixes,
// with messages that name the operator, the arguments and the fix. CPU
// tensors are left to the CUDA kernel: its own checks refuse them, or accept
// them (a 0-dim CPU operand of an elementwise op, CPU indices), exactly as on
// torch.cuda.
class DeviceOfCall {
 public:
  explicit DeviceOfCall(const c10::OperatorHandle& op) : op_(op) {}

  // One argument, `name` as in the schema (it must outlive this object).
  void see(const c10::IValue& value, const std::string& name) {
    if (value.isTensor()) {
      see_tensor(value.toTensor(), {&name, -1});
    } else if (value.isList()) {
      const c10::ArrayRef<c10::IValue> elements = value.toListRef();
      for (size_t i = 0; i < elements.size(); ++i) {
        if (elements[i].isTensor()) {
          see_tensor(elements[i].toTensor(), {&name, static_cast<int64_t>(i)});
        }
      }
    }
    if (value.isDevice() && value.toDevice().type() == kCudadev && value.toDevice().has_index()) {
      see_cudadev(value.toDevice().index(), {&name, -1});
    }
    TORCH_CHECK(!value.isStream(), "cudadev: ", op_.operator_name(),
                " takes a stream argument, which cudadev cannot pass to a CUDA kernel; it needs "
                "a cudadev kernel of its own.");
  }

  c10::DeviceIndex device() const {
    const c10::DeviceIndex idx = resolve_device_index(device_ ? *device_ : c10::DeviceIndex{-1});
    TORCH_CHECK(!cuda_, "cudadev: ", op_.operator_name(), " got a cudadev tensor (cudadev:",
                static_cast<int>(idx), ") and a torch.cuda tensor (", *cuda_, "): ", cuda_from_.str(),
                " is on ", *cuda_,
                device_ ? " and " + device_from_.str() + " on cudadev:" + std::to_string(idx) : "",
                ". cudadev tensors live on cudadev's own streams, so mixing them with torch.cuda "
                "tensors in one operator would race. Move one side explicitly first: "
                "t.to('cudadev:", static_cast<int>(idx), "') or t.to('", *cuda_, "').");
    return idx;
  }

 private:
  // Where a tensor came from: an argument, or an element of a list argument.
  // Only the error messages spell it out.
  struct Origin {
    const std::string* name = nullptr;
    int64_t element = -1;
    std::string str() const {
      if (name == nullptr) return "?";
      return element < 0 ? *name : *name + "[" + std::to_string(element) + "]";
    }
  };

  void see_tensor(const at::Tensor& tensor, Origin from) {
    if (is_cudadev(tensor)) {
      see_cudadev(tensor.device().index(), from);
    } else if (is_cuda(tensor) && !cuda_) {
      cuda_ = tensor.device();
      cuda_from_ = from;
    }
  }

  void see_cudadev(c10::DeviceIndex idx, Origin from) {
    if (!device_) {
      device_ = idx;
      device_from_ = from;
      return;
    }
    if (C10_LIKELY(*device_ == idx)) {
      return;
    }
    const std::string name = from.str();
    TORCH_CHECK(false, "cudadev: ", op_.operator_name(), " got tensors on cudadev:",
                static_cast<int>(*device_), " and cudadev:", static_cast<int>(idx), ": ", name,
                " is on cudadev:", static_cast<int>(idx), " and ", device_from_.str(), " on cudadev:",
                static_cast<int>(*device_), "; an operator runs on one device. Move it there first: ",
                name, ".to('cudadev:", static_cast<int>(*device_), "').");
  }

  const c10::OperatorHandle& op_;
  std::optional<c10::DeviceIndex> device_;
  Origin device_from_;  // the argument device_ came from
  std::optional<c10::Device> cuda_;
  Origin cuda_from_;
};

// The CUDA path of one call (the steps above); `cache` as in AliasScope.
void run_on_cuda(const c10::OperatorHandle& op, torch::jit::Stack* stack, AliasCache* cache) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t num_arguments = schema.arguments().size();
  TORCH_INTERNAL_ASSERT(stack->size() >= num_arguments);
  const size_t first_argument = stack->size() - num_arguments;

  DeviceOfCall device_of_call(op);
  for (size_t i = first_argument; i < stack->size(); ++i) {
    device_of_call.see((*stack)[i], schema.arguments()[i - first_argument].name());
  }
  const c10::DeviceIndex idx = device_of_call.device();

  TORCH_CHECK_NOT_IMPLEMENTED(op.hasKernelForDispatchKey(c10::DispatchKey::CUDA), "cudadev: ",
                              op.operator_name(),
                              " has no CUDA kernel, and cudadev runs the operators it does not "
                              "implement itself through their CUDA kernels. Run it on the CPU "
                              "(t.cpu()), or give cudadev a kernel for it.");

  c10::cuda::CUDAStreamGuard on_cudadev_stream(current_stream_as_cuda(idx));
  AliasScope scope(idx, cache);
  size_t num_tensors = 0;
  for (size_t i = first_argument; i < stack->size(); ++i) {
    for_each_tensor((*stack)[i], [&num_tensors](const at::Tensor&) { ++num_tensors; });
  }
  scope.reserve(num_tensors);
  for (size_t i = first_argument; i < stack->size(); ++i) {
    c10::IValue& argument = (*stack)[i];
    if (argument.isDevice() && argument.toDevice().type() == kCudadev) {
      argument = c10::IValue(c10::Device(c10::DeviceType::CUDA, idx));
    } else {
      argument = map_tensors(argument, is_cudadev,
                             [&scope](const at::Tensor& t) { return scope.to_cuda(t); });
    }
  }

  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CUDA), stack);

  scope.write_back();
  const size_t num_returns = schema.returns().size();
  TORCH_INTERNAL_ASSERT(stack->size() >= num_returns);
  for (size_t i = stack->size() - num_returns; i < stack->size(); ++i) {
    (*stack)[i] = map_tensors((*stack)[i], is_cuda,
                              [&scope](const at::Tensor& t) { return scope.to_cudadev(t); });
  }
}

}  // namespace

void run_cuda_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet /*keys*/,
                     torch::jit::Stack* stack) {
  run_on_cuda(op, stack, /*cache=*/nullptr);
}

void run_cuda_multi_tensor_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet /*keys*/,
                                  torch::jit::Stack* stack) {
  run_on_cuda(op, stack, &AliasCache::of_this_thread());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&run_cuda_kernel>());
}

}  // namespace cudadev
