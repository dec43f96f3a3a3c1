#include "ops/OpRunner.h"

#include <ATen/TensorIterator.h>

#include "ops/HostWork.h"

namespace torch_simdev {
namespace {

c10::DeviceIndex deviceOf(const char* op, const at::Tensor* out, const std::vector<at::Tensor>& inputs) {
  // commonDevice takes a fixed list; ops have at most a handful of tensors.
  TORCH_CHECK(inputs.size() <= 3, op, ": at most 3 inputs supported by runInto/runFunctional");
  static const at::Tensor undefined;
  const at::Tensor* t[4] = {out != nullptr ? out : &undefined, &undefined, &undefined, &undefined};
  for (size_t i = 0; i < inputs.size(); ++i) t[i + 1] = &inputs[i];
  return commonDevice(op, {t[0], t[1], t[2], t[3]});
}

Operands operandsOf(const at::Tensor& out, const std::vector<at::Tensor>& inputs) {
  Operands operands;
  operands.reserve(inputs.size() + 1);
  operands.push_back(Operand::output(out));
  for (const at::Tensor& input : inputs) operands.push_back(Operand::of(input));
  return operands;
}

// TensorIterator configured as ATen's binary_op / binary_float_op / unary_op.
at::TensorIteratorConfig elementwiseConfig(Promotion promotion) {
  at::TensorIteratorConfig config;
  config.set_check_mem_overlap(false)  // meta tensors share no memory
      .allow_cpu_scalars(true);
  if (promotion == Promotion::kSameDtype) {
    config.check_all_same_dtype(true);
  } else {
    config.promote_inputs_to_common_dtype(true)
        .cast_common_dtype_to_outputs(true)
        .enforce_safe_casting_to_output(true)
        .promote_integer_inputs_to_float(promotion == Promotion::kIntegerToFloat);
  }
  return config;
}

}  // namespace

at::Tensor runFunctional(const char* op, std::vector<at::Tensor> inputs,
                         const std::function<at::Tensor(std::vector<at::Tensor>&)>& meta_op,
                         OpKernel kernel) {
  const c10::DeviceIndex device = deviceOf(op, nullptr, inputs);
  std::vector<at::Tensor> metas;
  metas.reserve(inputs.size());
  for (const at::Tensor& input : inputs) metas.push_back(toMeta(input));
  at::Tensor out = emptyLike(meta_op(metas), device);
  if (out.numel() != 0) launchOnDevice(op, device, operandsOf(out, inputs), std::move(kernel));
  return out;
}

const at::Tensor& runInto(const char* op, const at::Tensor& out, std::vector<at::Tensor> inputs,
                          OpKernel kernel, OpCheck check) {
  TORCH_CHECK(out.device().type() == c10::DeviceType::PrivateUse1, op,
              ": the output must be a simdev tensor like the inputs, got a ", out.device(),
              " tensor; move it with .to() or write into a new simdev tensor");
  const c10::DeviceIndex device = deviceOf(op, &out, inputs);
  std::vector<at::Tensor> metas;
  metas.reserve(inputs.size() + 1);
  metas.push_back(toMeta(out));
  for (const at::Tensor& input : inputs) metas.push_back(toMeta(input));
  if (check) {
    check(metas);
  } else {
    kernel(metas);  // raises here for bad shapes/dtypes; may resize metas[0]
  }
  matchLayout(out, metas[0]);
  if (out.numel() != 0) launchOnDevice(op, device, operandsOf(out, inputs), std::move(kernel));
  return out;
}

at::Tensor& runInto(const char* op, at::Tensor& out, std::vector<at::Tensor> inputs, OpKernel kernel,
                    OpCheck check) {
  runInto(op, static_cast<const at::Tensor&>(out), std::move(inputs), std::move(kernel), std::move(check));
  return out;
}

at::Tensor elementwiseResult(std::vector<at::Tensor>& metas, Promotion promotion) {
  at::TensorIteratorConfig config = elementwiseConfig(promotion);
  config.add_owned_output(at::Tensor());
  for (const at::Tensor& meta : metas) config.add_const_input(meta);
  at::TensorIterator iter = config.build();
  return iter.output();
}

OpCheck elementwiseCheck(Promotion promotion, bool inplace) {
  return [promotion, inplace](std::vector<at::Tensor>& metas) {
    at::TensorIteratorConfig config = elementwiseConfig(promotion);
    config.resize_outputs(!inplace).add_output(metas[0]);
    if (inplace) config.add_const_input(metas[0]);
    for (size_t i = 1; i < metas.size(); ++i) config.add_const_input(metas[i]);
    config.build();
  };
}

}  // namespace torch_simdev
