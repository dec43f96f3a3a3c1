#include "ops/OpRunner.h"

#include <ATen/TensorIterator.h>
#include <c10/util/SmallVector.h>

#include <cstring>

#include "ops/HostWork.h"

namespace torch_simdev {
namespace {

// The device check (ArgumentDevices.h) over the op's tensors in schema order
// (an in-place op's self first, an out= last), as the fallback checks them:
// the others are held to the device of the first simdev tensor among them.
c10::DeviceIndex deviceOf(const char* op, const at::Tensor* out, const char* out_name, const Inputs& inputs,
                          CpuScalars cpu_scalars) {
  const bool in_place = out != nullptr && std::strcmp(out_name, "self") == 0;
  c10::SmallVector<TensorArgument, 4> arguments;
  if (in_place) arguments.push_back({out_name, out, /*written=*/true});
  for (const Input& input : inputs) arguments.push_back({input.name, &input.tensor});
  if (out != nullptr && !in_place) arguments.push_back({out_name, out, /*written=*/true});
  return commonSimdevDevice(op, arguments, cpu_scalars);
}

Operands operandsOf(const at::Tensor& out, const Inputs& inputs) {
  Operands operands;
  operands.reserve(inputs.size() + 1);
  operands.push_back(Operand::output(out));
  for (const Input& input : inputs) operands.push_back(Operand::of(input.tensor));
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

at::Tensor runFunctional(const char* op, const Inputs& inputs, CpuScalars cpu_scalars,
                         const std::function<at::Tensor(std::vector<at::Tensor>&)>& meta_op,
                         OpKernel kernel) {
  const c10::DeviceIndex device = deviceOf(op, nullptr, nullptr, inputs, cpu_scalars);
  std::vector<at::Tensor> metas;
  metas.reserve(inputs.size());
  for (const Input& input : inputs) metas.push_back(toMeta(input.tensor));
  at::Tensor out = emptyLike(meta_op(metas), device);
  if (out.numel() != 0) launchOnDevice(op, device, operandsOf(out, inputs), std::move(kernel));
  return out;
}

const at::Tensor& runInto(const char* op, const at::Tensor& out, const char* out_name, const Inputs& inputs,
                          CpuScalars cpu_scalars, OpKernel kernel, OpCheck check) {
  // The output is checked like the inputs, never as a CPU scalar: a CPU `out`
  // (or CPU self of an in-place op) beside simdev inputs is refused.
  const c10::DeviceIndex device = deviceOf(op, &out, out_name, inputs, cpu_scalars);
  std::vector<at::Tensor> metas;
  metas.reserve(inputs.size() + 1);
  metas.push_back(toMeta(out));
  for (const Input& input : inputs) metas.push_back(toMeta(input.tensor));
  if (check) {
    check(metas);
  } else {
    kernel(metas);  // raises here for bad shapes/dtypes; may resize metas[0]
  }
  matchLayout(out, metas[0]);
  if (out.numel() != 0) launchOnDevice(op, device, operandsOf(out, inputs), std::move(kernel));
  return out;
}

at::Tensor& runInto(const char* op, at::Tensor& out, const char* out_name, const Inputs& inputs,
                    CpuScalars cpu_scalars, OpKernel kernel, OpCheck check) {
  runInto(op, static_cast<const at::Tensor&>(out), out_name, inputs, cpu_scalars, std::move(kernel),
          std::move(check));
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
