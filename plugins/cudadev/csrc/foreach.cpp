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
// The operators torch.optim and clip_grad_norm_ call (kUnboxedOperators) get
// an unboxed kernel instead, which runs the same CUDA kernel on the same
// aliases without boxing: through the boxed fallback, each call boxed its
// tensor lists into IValue lists, copied them into lists of aliases and
// unboxed those again for the CUDA kernel, which made an AdamW step's host
// time on cudadev about 17% longer than on torch.cuda (644 us against 550 us
// for the GPT block's 12 parameters, bench/train_profile.py). A call the
// unboxed kernel does not take (a tensor that is not a strided cudadev tensor
// with storage, or tensors of two cudadev devices) runs the boxed fallback
// itself, with its checks and error messages.

#include <ATen/core/Tensor.h>
#include <ATen/core/boxing/KernelFunction.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <ATen/ops/_foreach_abs_ops.h>
#include <ATen/ops/_foreach_add_ops.h>
#include <ATen/ops/_foreach_addcdiv_ops.h>
#include <ATen/ops/_foreach_addcmul_ops.h>
#include <ATen/ops/_foreach_clamp_max_ops.h>
#include <ATen/ops/_foreach_clamp_min_ops.h>
#include <ATen/ops/_foreach_copy_ops.h>
#include <ATen/ops/_foreach_div_ops.h>
#include <ATen/ops/_foreach_lerp_ops.h>
#include <ATen/ops/_foreach_maximum_ops.h>
#include <ATen/ops/_foreach_mul_ops.h>
#include <ATen/ops/_foreach_neg_ops.h>
#include <ATen/ops/_foreach_norm_ops.h>
#include <ATen/ops/_foreach_pow_ops.h>
#include <ATen/ops/_foreach_reciprocal_ops.h>
#include <ATen/ops/_foreach_rsqrt_ops.h>
#include <ATen/ops/_foreach_sign_ops.h>
#include <ATen/ops/_foreach_sqrt_ops.h>
#include <ATen/ops/_foreach_sub_ops.h>
#include <ATen/ops/_foreach_zero_ops.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "cuda_alias.h"
#include "fallback.h"

namespace cudadev {
namespace {

constexpr auto kCudadev = c10::DeviceType::PrivateUse1;

// Whether a call can take the unboxed path, and on which device: every
// tensor a strided cudadev tensor with storage (what an alias needs), all on
// one cudadev device. Anything else is the boxed fallback's to run or refuse.
class UnboxedCall {
 public:
  void see(const at::Tensor& tensor) {
    ++num_tensors_;
    if (C10_UNLIKELY(!tensor.defined() || tensor.device().type() != kCudadev ||
                     tensor.layout() != c10::kStrided || !tensor.has_storage())) {
      takes_it_ = false;
      return;
    }
    const c10::DeviceIndex idx = tensor.device().index();
    if (device_ < 0) {
      device_ = idx;
    } else if (C10_UNLIKELY(idx != device_)) {
      takes_it_ = false;
    }
  }
  bool takes_it() const { return takes_it_ && device_ >= 0; }
  c10::DeviceIndex device() const { return device_; }
  size_t num_tensors() const { return num_tensors_; }

 private:
  bool takes_it_ = true;
  c10::DeviceIndex device_ = -1;
  size_t num_tensors_ = 0;
};

// One argument of the CUDA kernel's call: a non-tensor argument as it came...
template <class T>
struct CudaArgument {
  static_assert(!std::is_same_v<std::decay_t<T>, at::Tensor> &&
                    !std::is_same_v<std::decay_t<T>, std::optional<at::Tensor>> &&
                    !std::is_same_v<std::decay_t<T>, c10::List<std::optional<at::Tensor>>>,
                "a tensor argument type without a CudaArgument specialization");
  static void see(UnboxedCall&, const T&) {}
  CudaArgument(AliasScope&, T argument) : value(argument) {}
  T get() const { return value; }
  T value;
};

// ... a Tensor[] as the list of its tensors' CUDA aliases ...
template <>
struct CudaArgument<at::TensorList> {
  static void see(UnboxedCall& call, at::TensorList list) {
    for (const at::Tensor& tensor : list) {
      call.see(tensor);
    }
  }
  CudaArgument(AliasScope& scope, at::TensorList list) {
    aliases.reserve(list.size());
    for (const at::Tensor& tensor : list) {
      aliases.push_back(scope.to_cuda(tensor));
    }
  }
  at::TensorList get() const { return aliases; }
  std::vector<at::Tensor> aliases;
};

// ... and a Tensor as its CUDA alias.
template <>
struct CudaArgument<const at::Tensor&> {
  static void see(UnboxedCall& call, const at::Tensor& tensor) { call.see(tensor); }
  CudaArgument(AliasScope& scope, const at::Tensor& tensor) : alias(scope.to_cuda(tensor)) {}
  const at::Tensor& get() const { return alias; }
  at::Tensor alias;
};

// The unboxed kernel of the operator Op (an at::_ops struct): the steps of
// the boxed fallback's CUDA path (fallback.cpp) on typed arguments.
template <class Op, class Schema = typename Op::schema>
struct UnboxedMultiTensorKernel;

template <class Op, class Return, class... Args>
struct UnboxedMultiTensorKernel<Op, Return(Args...)> {
  static_assert(std::is_void_v<Return> || std::is_same_v<Return, std::vector<at::Tensor>>,
                "multi-tensor operators return nothing (in place) or a Tensor[]");

  static Return call(Args... args) {
    UnboxedCall call;
    (CudaArgument<Args>::see(call, args), ...);
    if (C10_UNLIKELY(!call.takes_it())) {
      return boxed_fallback().template call<Return, Args...>(
          handle(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), args...);
    }
    const c10::DeviceIndex idx = call.device();
    c10::cuda::CUDAStreamGuard on_cudadev_stream(current_stream_as_cuda(idx));
    AliasScope scope(idx);
    scope.reserve(call.num_tensors());
    if constexpr (std::is_void_v<Return>) {
      run_cuda_kernel_on_aliases(scope, args...);
      scope.write_back();
    } else {
      std::vector<at::Tensor> results = run_cuda_kernel_on_aliases(scope, args...);
      scope.write_back();
      for (at::Tensor& result : results) {
        result = scope.to_cudadev(result);
      }
      return results;
    }
  }

 private:
  static Return run_cuda_kernel_on_aliases(AliasScope& scope, Args... args) {
    // Braces: the aliases are made in argument order.
    const std::tuple<CudaArgument<Args>...> cuda_arguments{CudaArgument<Args>(scope, args)...};
    return std::apply(
        [](const CudaArgument<Args>&... argument) {
          return Op::redispatch(c10::DispatchKeySet(c10::DispatchKey::CUDA), argument.get()...);
        },
        cuda_arguments);
  }

  static const c10::OperatorHandle& handle() {
    static const c10::OperatorHandle op =
        c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
    return op;
  }

  static const c10::KernelFunction& boxed_fallback() {
    static const c10::KernelFunction kernel = c10::KernelFunction::makeFromBoxedFunction<&run_cuda_kernel>();
    return kernel;
  }
};

// The multi-tensor operators torch.optim's foreach implementations and
// clip_grad_norm_ call, every overload but out= (as at::_ops struct, operator
// name). torch.optim calls _foreach_lerp_ with a Scalar or Tensor[] weight;
// its ScalarList overloads keep the boxed path.
#define CUDADEV_UNBOXED_MULTI_TENSOR_OPERATORS(X) \
  X(_foreach_abs, "_foreach_abs") \
  X(_foreach_abs_, "_foreach_abs_") \
  X(_foreach_add_Scalar, "_foreach_add.Scalar") \
  X(_foreach_add__Scalar, "_foreach_add_.Scalar") \
  X(_foreach_add_List, "_foreach_add.List") \
  X(_foreach_add__List, "_foreach_add_.List") \
  X(_foreach_add_ScalarList, "_foreach_add.ScalarList") \
  X(_foreach_add__ScalarList, "_foreach_add_.ScalarList") \
  X(_foreach_add_Tensor, "_foreach_add.Tensor") \
  X(_foreach_add__Tensor, "_foreach_add_.Tensor") \
  X(_foreach_addcdiv_Scalar, "_foreach_addcdiv.Scalar") \
  X(_foreach_addcdiv_ScalarList, "_foreach_addcdiv.ScalarList") \
  X(_foreach_addcdiv_Tensor, "_foreach_addcdiv.Tensor") \
  X(_foreach_addcdiv__Scalar, "_foreach_addcdiv_.Scalar") \
  X(_foreach_addcdiv__ScalarList, "_foreach_addcdiv_.ScalarList") \
  X(_foreach_addcdiv__Tensor, "_foreach_addcdiv_.Tensor") \
  X(_foreach_addcmul_Scalar, "_foreach_addcmul.Scalar") \
  X(_foreach_addcmul_ScalarList, "_foreach_addcmul.ScalarList") \
  X(_foreach_addcmul_Tensor, "_foreach_addcmul.Tensor") \
  X(_foreach_addcmul__Scalar, "_foreach_addcmul_.Scalar") \
  X(_foreach_addcmul__ScalarList, "_foreach_addcmul_.ScalarList") \
  X(_foreach_addcmul__Tensor, "_foreach_addcmul_.Tensor") \
  X(_foreach_clamp_max_Scalar, "_foreach_clamp_max.Scalar") \
  X(_foreach_clamp_max__Scalar, "_foreach_clamp_max_.Scalar") \
  X(_foreach_clamp_max_List, "_foreach_clamp_max.List") \
  X(_foreach_clamp_max__List, "_foreach_clamp_max_.List") \
  X(_foreach_clamp_max_ScalarList, "_foreach_clamp_max.ScalarList") \
  X(_foreach_clamp_max__ScalarList, "_foreach_clamp_max_.ScalarList") \
  X(_foreach_clamp_min_Scalar, "_foreach_clamp_min.Scalar") \
  X(_foreach_clamp_min__Scalar, "_foreach_clamp_min_.Scalar") \
  X(_foreach_clamp_min_List, "_foreach_clamp_min.List") \
  X(_foreach_clamp_min__List, "_foreach_clamp_min_.List") \
  X(_foreach_clamp_min_ScalarList, "_foreach_clamp_min.ScalarList") \
  X(_foreach_clamp_min__ScalarList, "_foreach_clamp_min_.ScalarList") \
  X(_foreach_copy_, "_foreach_copy_") \
  X(_foreach_copy, "_foreach_copy") \
  X(_foreach_div_Scalar, "_foreach_div.Scalar") \
  X(_foreach_div__Scalar, "_foreach_div_.Scalar") \
  X(_foreach_div_List, "_foreach_div.List") \
  X(_foreach_div__List, "_foreach_div_.List") \
  X(_foreach_div_ScalarList, "_foreach_div.ScalarList") \
  X(_foreach_div__ScalarList, "_foreach_div_.ScalarList") \
  X(_foreach_div_Tensor, "_foreach_div.Tensor") \
  X(_foreach_div__Tensor, "_foreach_div_.Tensor") \
  X(_foreach_lerp_List, "_foreach_lerp.List") \
  X(_foreach_lerp__List, "_foreach_lerp_.List") \
  X(_foreach_lerp_Scalar, "_foreach_lerp.Scalar") \
  X(_foreach_lerp__Scalar, "_foreach_lerp_.Scalar") \
  X(_foreach_maximum_Scalar, "_foreach_maximum.Scalar") \
  X(_foreach_maximum__Scalar, "_foreach_maximum_.Scalar") \
  X(_foreach_maximum_List, "_foreach_maximum.List") \
  X(_foreach_maximum__List, "_foreach_maximum_.List") \
  X(_foreach_maximum_ScalarList, "_foreach_maximum.ScalarList") \
  X(_foreach_maximum__ScalarList, "_foreach_maximum_.ScalarList") \
  X(_foreach_mul_Scalar, "_foreach_mul.Scalar") \
  X(_foreach_mul__Scalar, "_foreach_mul_.Scalar") \
  X(_foreach_mul_List, "_foreach_mul.List") \
  X(_foreach_mul__List, "_foreach_mul_.List") \
  X(_foreach_mul_ScalarList, "_foreach_mul.ScalarList") \
  X(_foreach_mul__ScalarList, "_foreach_mul_.ScalarList") \
  X(_foreach_mul_Tensor, "_foreach_mul.Tensor") \
  X(_foreach_mul__Tensor, "_foreach_mul_.Tensor") \
  X(_foreach_neg, "_foreach_neg") \
  X(_foreach_neg_, "_foreach_neg_") \
  X(_foreach_norm_Scalar, "_foreach_norm.Scalar") \
  X(_foreach_pow_List, "_foreach_pow.List") \
  X(_foreach_pow_Scalar, "_foreach_pow.Scalar") \
  X(_foreach_pow_ScalarList, "_foreach_pow.ScalarList") \
  X(_foreach_pow_ScalarAndTensor, "_foreach_pow.ScalarAndTensor") \
  X(_foreach_pow__List, "_foreach_pow_.List") \
  X(_foreach_pow__Scalar, "_foreach_pow_.Scalar") \
  X(_foreach_pow__ScalarList, "_foreach_pow_.ScalarList") \
  X(_foreach_reciprocal, "_foreach_reciprocal") \
  X(_foreach_reciprocal_, "_foreach_reciprocal_") \
  X(_foreach_rsqrt, "_foreach_rsqrt") \
  X(_foreach_rsqrt_, "_foreach_rsqrt_") \
  X(_foreach_sign, "_foreach_sign") \
  X(_foreach_sign_, "_foreach_sign_") \
  X(_foreach_sqrt, "_foreach_sqrt") \
  X(_foreach_sqrt_, "_foreach_sqrt_") \
  X(_foreach_sub_Scalar, "_foreach_sub.Scalar") \
  X(_foreach_sub__Scalar, "_foreach_sub_.Scalar") \
  X(_foreach_sub_List, "_foreach_sub.List") \
  X(_foreach_sub__List, "_foreach_sub_.List") \
  X(_foreach_sub_ScalarList, "_foreach_sub.ScalarList") \
  X(_foreach_sub__ScalarList, "_foreach_sub_.ScalarList") \
  X(_foreach_zero_, "_foreach_zero_") \
  X(_foreach_zero, "_foreach_zero")

struct UnboxedOperator {
  const char* name;  // with its overload, as in the schema: "_foreach_add_.Scalar"
  torch::CppFunction (*kernel)();
};

#define CUDADEV_UNBOXED_OPERATOR(op, name) \
  UnboxedOperator{name, [] { return torch::CppFunction(TORCH_FN(UnboxedMultiTensorKernel<at::_ops::op>::call)); }},
const UnboxedOperator kUnboxedOperators[] = {CUDADEV_UNBOXED_MULTI_TENSOR_OPERATORS(CUDADEV_UNBOXED_OPERATOR)};
#undef CUDADEV_UNBOXED_OPERATOR

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
    const std::string unqualified = name.name.substr(std::string("aten::").size());
    const std::string overload =
        name.overload_name.empty() ? unqualified : unqualified + "." + name.overload_name;
    const UnboxedOperator* unboxed = nullptr;
    for (const UnboxedOperator& candidate : kUnboxedOperators) {
      if (overload == candidate.name) {
        unboxed = &candidate;
        break;
      }
    }
    if (unboxed != nullptr) {
      library->impl(overload.c_str(), unboxed->kernel());
    } else {
      library->impl(overload.c_str(), torch::CppFunction::makeFromBoxedFunction<&run_cuda_kernel>());
    }
  }
  return library;
}

// Registered while torch_cudadev's library loads; libtorch_cuda, which
// defines the CUDA kernels, is loaded (and registered) before it.
const std::unique_ptr<torch::Library> multi_tensor_operators = register_multi_tensor_operators();

}  // namespace
}  // namespace cudadev
