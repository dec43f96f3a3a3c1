// Convolution, forward and backward, as stream-ordered host work (HostWork.h).
//
// For an input on a PrivateUse1 device, at::convolution and
// at::convolution_backward select ATen's "Overrideable" backend and call
// convolution_overrideable / convolution_backward_overrideable, whose default
// kernels only raise. simdev implements those two like its other operators:
// devices, dtypes and shapes are settled and the outputs allocated on the
// calling thread; on the stream's worker, ATen's CPU convolution runs on
// aliases of the device memory. (The boxed CPU fallback of Fallback.cpp
// never gets these two: their raising CompositeExplicitAutograd kernels take
// precedence over a backend fallback.)
//
// Every tensor must be on the same simdev device; _convolution and
// convolution_backward are registered too, only to refuse a mix of devices
// that ATen would otherwise route to its CPU kernels (see the end of the file).
//
// ATen has no out= convolution: the CPU kernel returns a host temporary, which
// the work copies into the device output. One extra copy per call, which a
// simulator can afford.
#include <ATen/ATen.h>
#include <ATen/native/ConvUtils.h>
#include <ATen/ops/_convolution_native.h>
#include <ATen/ops/convolution_backward_native.h>
#include <torch/library.h>

#include <array>
#include <initializer_list>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ops/ArgumentDevices.h"
#include "ops/HostWork.h"

namespace torch_simdev {
namespace {

using Tensors = std::vector<at::Tensor>;

// Every tensor of a convolution must be on one simdev device, as CUDA requires
// of its convolutions (ArgumentDevices.h); no convolution argument is a scalar.
constexpr CpuScalars kNoScalars = CpuScalars::kRefused;

// A tensor argument and its name in the op's schema, for error messages.
struct Argument {
  const char* name;
  const at::Tensor* tensor;
};

// ATen's CPU kernels reject mixed dtypes too, but on the worker that would
// only fail the stream later; raise here, at the call.
void sameDtype(const char* op, std::initializer_list<Argument> arguments) {
  const Argument& reference = *arguments.begin();
  for (const Argument& argument : arguments) {
    const at::Tensor& t = *argument.tensor;
    if (!t.defined() || t.scalar_type() == reference.tensor->scalar_type()) continue;
    TORCH_CHECK(false, op, ": expected all tensors of the same dtype, but ", argument.name, " is ",
                t.scalar_type(), " and ", reference.name, " is ", reference.tensor->scalar_type(),
                "; convert one with .to(dtype)");
  }
}

// The memory format of simdev's convolution results: cuDNN's rule (ATen's
// cudnn_conv_suggest_memory_format), channels-last when the input or the
// weight is, for 2-d and 3-d convolutions, except in float64. simdev declares
// the same rule to torch.compile (devbridge.inductor.cudnn_convolution_format),
// whose FakeTensor otherwise predicts contiguous results for every
// PrivateUse1 convolution; compiled graphs assert the strides they traced.
// A 1-d convolution is judged as FakeTensor judges it: as a 2-d one over the
// contiguous input and the weight with a unit height.
at::MemoryFormat outputFormat(const at::Tensor& input, const at::Tensor& weight) {
  if (input.scalar_type() == at::kDouble || weight.scalar_type() == at::kDouble) return at::MemoryFormat::Contiguous;
  if (weight.dim() == 3) return weight.unsqueeze(2).suggest_memory_format();
  const at::MemoryFormat wanted = weight.dim() == 4   ? at::MemoryFormat::ChannelsLast
                                  : weight.dim() == 5 ? at::MemoryFormat::ChannelsLast3d
                                                      : at::MemoryFormat::Contiguous;
  if (input.suggest_memory_format() == wanted || weight.suggest_memory_format() == wanted) return wanted;
  return at::MemoryFormat::Contiguous;
}

at::Tensor emptyOnDevice(at::IntArrayRef sizes, c10::ScalarType dtype, c10::DeviceIndex device,
                         at::MemoryFormat format) {
  const auto options = at::TensorOptions().dtype(dtype).device(c10::Device(c10::DeviceType::PrivateUse1, device));
  if (sizes.size() == 3 && format == at::MemoryFormat::ChannelsLast) {
    // A 1-d result in the layout of a channels-last 2-d one of unit height,
    // as FakeTensor lays it out.
    return at::empty({sizes[0], sizes[1], 1, sizes[2]}, options.memory_format(format)).squeeze(2);
  }
  return at::empty(sizes, options.memory_format(format));
}

// The convolution's parameters, owned: the op's IntArrayRefs view the
// caller's arguments, and the work runs after the call has returned.
struct ConvParams {
  std::vector<int64_t> stride;
  std::vector<int64_t> padding;
  std::vector<int64_t> dilation;
  bool transposed;
  std::vector<int64_t> output_padding;
  int64_t groups;
};

// ---------------------------------------------------------------- forward

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias_opt, at::IntArrayRef stride,
                                    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                                    at::IntArrayRef output_padding, int64_t groups) {
  constexpr const char* op = "convolution";
  const at::Tensor bias = bias_opt.value_or(at::Tensor());
  const c10::DeviceIndex device =
      commonSimdevDevice(op, {{"input", &input}, {"weight", &weight}, {"bias", &bias}}, kNoScalars);
  sameDtype(op, {{"input", &input}, {"weight", &weight}, {"bias", &bias}});
  // The output's shape, and the shape errors, from the meta kernel FakeTensor
  // uses too: a bad call raises here, and compiled graphs agree on the shape.
  const at::Tensor meta = at::convolution(toMeta(input), toMeta(weight), toMeta(bias), stride, padding, dilation,
                                          transposed, output_padding, groups);
  at::Tensor out = emptyOnDevice(meta.sizes(), meta.scalar_type(), device, outputFormat(input, weight));
  if (out.numel() == 0) return out;

  Operands operands{Operand::output(out), Operand::of(input), Operand::of(weight)};
  if (bias.defined()) operands.push_back(Operand::of(bias));
  const ConvParams params{stride.vec(), padding.vec(), dilation.vec(), transposed, output_padding.vec(), groups};
  launchOnDevice(op, device, std::move(operands), [params](Tensors& t) {
    const at::Tensor bias = t.size() > 3 ? t[3] : at::Tensor();
    t[0].copy_(at::convolution(t[1], t[2], bias, params.stride, params.padding, params.dilation,
                               params.transposed, params.output_padding, params.groups));
  });
  return out;
}

// ---------------------------------------------------------------- backward

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  constexpr const char* op = "convolution_backward";
  const c10::DeviceIndex device =
      commonSimdevDevice(op, {{"grad_output", &grad_output}, {"input", &input}, {"weight", &weight}}, kNoScalars);
  sameDtype(op, {{"grad_output", &grad_output}, {"input", &input}, {"weight", &weight}});
  TORCH_CHECK(grad_output.dim() >= 2, op, ": expected grad_output with a batch and a channel dimension, got ",
              grad_output.dim(), " dimension(s)");
  // The bias gradient has one value per output channel (grad_output's dim 1);
  // this op's schema carries no bias, the CPU kernel needs its size.
  std::optional<std::vector<int64_t>> bias_sizes;
  if (output_mask[2]) bias_sizes = std::vector<int64_t>{grad_output.size(1)};
  const auto bias_sizes_ref = [](const std::optional<std::vector<int64_t>>& sizes) {
    return sizes.has_value() ? at::OptionalIntArrayRef(*sizes) : at::OptionalIntArrayRef();
  };

  // Shapes and argument errors on the calling thread, as for the forward.
  const auto metas = at::convolution_backward(toMeta(grad_output), toMeta(input), toMeta(weight),
                                              bias_sizes_ref(bias_sizes), stride, padding, dilation, transposed,
                                              output_padding, groups, output_mask);
  const std::array<at::Tensor, 3> meta{std::get<0>(metas), std::get<1>(metas), std::get<2>(metas)};
  const at::MemoryFormat format = outputFormat(input, weight);
  std::array<at::Tensor, 3> grads;  // grad_input, grad_weight, grad_bias; undefined where not asked for
  Operands operands{Operand::of(grad_output), Operand::of(input), Operand::of(weight)};
  bool work = false;
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!output_mask[i]) continue;
    // grad_bias is 1-d: a memory format does not apply to it.
    grads[i] = emptyOnDevice(meta[i].sizes(), meta[i].scalar_type(), device,
                             i == 2 ? at::MemoryFormat::Contiguous : format);
    operands.push_back(Operand::output(grads[i]));
    work = work || grads[i].numel() != 0;
  }
  if (!work) return {grads[0], grads[1], grads[2]};

  const ConvParams params{stride.vec(), padding.vec(), dilation.vec(), transposed, output_padding.vec(), groups};
  launchOnDevice(op, device, std::move(operands),
                 [params, output_mask, bias_sizes, bias_sizes_ref](Tensors& t) {
                   const auto results = at::convolution_backward(
                       t[0], t[1], t[2], bias_sizes_ref(bias_sizes), params.stride, params.padding,
                       params.dilation, params.transposed, params.output_padding, params.groups, output_mask);
                   const std::array<at::Tensor, 3> computed{std::get<0>(results), std::get<1>(results),
                                                            std::get<2>(results)};
                   size_t next = 3;  // the outputs follow grad_output, input and weight
                   for (size_t i = 0; i < computed.size(); ++i) {
                     if (output_mask[i]) t[next++].copy_(computed[i]);
                   }
                 });
  return {grads[0], grads[1], grads[2]};
}

// ---------------------------------------------------------------- the entry points' device check

// ATen picks a convolution's backend from the input's device alone: with a CPU
// input and a simdev weight it picks a CPU backend, whose kernels then reach
// simdev through the boxed CPU fallback, which copies every argument to the
// CPU; the call would quietly compute on the CPU (on CUDA it raises). Every
// convolution passes through _convolution (forward) and convolution_backward,
// and the dispatcher routes them here when any argument is a simdev tensor:
// checking there refuses every mix. The rest is ATen's own implementation.

at::Tensor _convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias_opt,
                        at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                        at::IntArrayRef output_padding, int64_t groups, bool benchmark, bool deterministic,
                        bool cudnn_enabled, bool allow_tf32) {
  const at::Tensor bias = bias_opt.value_or(at::Tensor());
  commonSimdevDevice("convolution", {{"input", &input}, {"weight", &weight}, {"bias", &bias}}, kNoScalars);
  return at::native::_convolution(input, weight, bias_opt, stride, padding, dilation, transposed, output_padding,
                                  groups, benchmark, deterministic, cudnn_enabled, allow_tf32);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    at::OptionalIntArrayRef bias_sizes, at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
    bool transposed, at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  commonSimdevDevice("convolution_backward", {{"grad_output", &grad_output}, {"input", &input}, {"weight", &weight}},
                     kNoScalars);
  return at::native::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
                                          transposed, output_padding, groups, output_mask);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_overrideable));
  m.impl("_convolution", TORCH_FN(_convolution));
  m.impl("convolution_backward", TORCH_FN(convolution_backward));
}

}  // namespace torch_simdev
