// Convolutions on cudadev: convolution_overrideable and
// convolution_backward_overrideable, the two operators ATen's device-generic
// convolution (at::convolution, at::convolution_backward) hands a device it
// has no backend of its own for. Without them a convolution on cudadev stops
// with "convolution_overrideable not implemented": their device-generic
// kernels only raise that, and a device-generic kernel takes precedence over
// the boxed fallback (fallback.cpp), which never sees them.
//
// Both run torch.cuda's whole convolution path (cuDNN and its algorithm
// choice, depthwise and 3d kernels, benchmark/deterministic/TF32 flags) by
// calling at::convolution / at::convolution_backward on CUDA aliases, with
// the current CUDA stream set to the current cudadev stream. Results come
// from torch's CUDA caching allocator on that stream and are adopted through
// an AliasScope, as in the fallback: their shapes and memory formats are
// cuDNN's choice, which cudadev does not recompute. A convolution costs far
// more GPU time than these few microseconds of host time.

#include <ATen/core/Tensor.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <tuple>

#include "argument_devices.h"
#include "cuda_alias.h"

namespace cudadev {
namespace {

// torch.autocast for CUDA (or for cudadev) has already cast the arguments of
// this call where it applies; the inner CUDA calls must not be cast again.
// Without this, torch.autocast('cuda') around cudadev work would switch the
// dtype of the convolution inside cudadev's kernel.
using NoAutocast = c10::impl::ExcludeDispatchKeyGuard;

// The memory format of cudadev's convolution results: cuDNN's rule (ATen's
// cudnn_conv_suggest_memory_format), channels-last when the input or the
// weight is, for 2-d and 3-d convolutions, except in float64, which cudadev
// declares to torch.compile (devbridge.inductor.cudnn_convolution_format);
// without the declaration torch predicts contiguous results for every
// PrivateUse1 convolution. Compiled graphs assert the strides they traced, so
// a result in another format (ATen's depthwise and 3-d kernels answer
// contiguous) is copied into the declared one. A 1-d convolution is judged
// as FakeTensor judges it: as a 2-d one over the contiguous input and the
// weight with a unit height.
at::MemoryFormat declared_format(const at::Tensor& input, const at::Tensor& weight) {
  if (input.scalar_type() == at::kDouble || weight.scalar_type() == at::kDouble) return at::MemoryFormat::Contiguous;
  if (weight.dim() == 3) return weight.unsqueeze(2).suggest_memory_format();
  const at::MemoryFormat wanted = weight.dim() == 4   ? at::MemoryFormat::ChannelsLast
                                  : weight.dim() == 5 ? at::MemoryFormat::ChannelsLast3d
                                                      : at::MemoryFormat::Contiguous;
  if (input.suggest_memory_format() == wanted || weight.suggest_memory_format() == wanted) return wanted;
  return at::MemoryFormat::Contiguous;
}

at::Tensor in_declared_format(const at::Tensor& result, const at::Tensor& input, const at::Tensor& weight) {
  if (!result.defined()) return result;
  const at::MemoryFormat format = declared_format(input, weight);
  if (result.dim() == 3 && format == at::MemoryFormat::ChannelsLast) {
    // A 1-d result in the layout of a channels-last 2-d one of unit height.
    const at::Tensor as_2d = result.unsqueeze(2);
    return as_2d.is_contiguous(format) ? result : as_2d.contiguous(format).squeeze(2);
  }
  return result.is_contiguous(format) ? result : result.contiguous(format);
}

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                    c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                    bool transposed, c10::IntArrayRef output_padding,
                                    int64_t groups) {
  const bool has_bias = bias.has_value() && bias->defined();
  const c10::DeviceIndex idx = common_cudadev_device(
      "aten::convolution_overrideable",
      {{"input", &input}, {"weight", &weight}, {"bias", has_bias ? &*bias : nullptr}});
  c10::cuda::CUDAStreamGuard on_cudadev_stream(current_stream_as_cuda(idx));
  NoAutocast no_autocast(c10::autocast_dispatch_keyset);
  AliasScope scope(idx);
  std::optional<at::Tensor> bias_alias;
  if (has_bias) {
    bias_alias = scope.to_cuda(*bias);
  }
  at::Tensor output = at::convolution(scope.to_cuda(input), scope.to_cuda(weight), bias_alias, stride,
                                      padding, dilation, transposed, output_padding, groups);
  output = in_declared_format(output, input, weight);
  scope.write_back();
  return scope.to_cudadev(output);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  const c10::DeviceIndex idx = common_cudadev_device(
      "aten::convolution_backward_overrideable",
      {{"grad_output", &grad_output}, {"input", &input}, {"weight", &weight}});
  c10::cuda::CUDAStreamGuard on_cudadev_stream(current_stream_as_cuda(idx));
  NoAutocast no_autocast(c10::autocast_dispatch_keyset);

  // convolution_backward takes the bias's shape, which this operator does not
  // get: CUDA's path reads it only to build a zero grad_bias (empty inputs,
  // which ATen never sends here) and to pick MIOpen (ROCm). A convolution's
  // bias has one value per output channel; given whenever grad_bias is asked
  // for, so no path can dereference a missing one.
  std::array<int64_t, 1> bias_sizes{};
  at::OptionalIntArrayRef bias_sizes_opt;
  if (output_mask[2] && weight.dim() >= 2) {
    bias_sizes[0] = transposed ? weight.sizes()[1] * groups : weight.sizes()[0];
    bias_sizes_opt = c10::IntArrayRef(bias_sizes);
  }

  AliasScope scope(idx);
  auto [grad_input, grad_weight, grad_bias] = at::convolution_backward(
      scope.to_cuda(grad_output), scope.to_cuda(input), scope.to_cuda(weight), bias_sizes_opt,
      stride, padding, dilation, transposed, output_padding, groups, output_mask);
  grad_input = in_declared_format(grad_input, input, weight);
  grad_weight = in_declared_format(grad_weight, input, weight);
  scope.write_back();
  return {scope.to_cudadev(grad_input), scope.to_cudadev(grad_weight),
          scope.to_cudadev(grad_bias)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_overrideable));
}

}  // namespace cudadev
