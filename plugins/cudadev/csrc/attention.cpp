// Fused scaled-dot-product attention on cudadev through the route PyTorch
// gives a plugin (pytorch #126392): at::scaled_dot_product_attention asks the
// device's _fused_sdp_choice_stub, cudadev answers OVERRIDEABLE wherever
// torch.cuda would run a fused kernel for the same inputs, and
// _scaled_dot_product_fused_attention_overrideable and its backward run that
// kernel: flash, cuDNN or memory-efficient attention, torch's own CUDA
// kernels, on CUDA aliases of the cudadev tensors, on the current cudadev
// stream. Where torch.cuda would run the math decomposition, so does cudadev.
//
// Which kernel: CUDA's own choice (its kernel, which reads metadata only),
// asked about CUDA stand-ins of the inputs (sizes, strides, dtype and
// requires_grad; no memory). The same answer at trace time (FakeTensors) and
// at run time, and the same one torch.cuda gives, under the same
// torch.nn.attention.sdpa_kernel flags; SDPBackend.OVERRIDEABLE turns the
// whole route off or on.
//
// One op for three kernels: the outputs follow the overrideable op's meta
// function (torch/_meta_registrations.py), which compiled graphs assert: the
// output laid out like the query, logsumexp a contiguous float [B, H, L]
// (flash's as it is, cuDNN's [B, H, L, 1] viewed, memory-efficient's padded
// rows cut), the philox seed and offset 0-dim int64 tensors. The three
// logsumexps are one quantity (the log of each query row's softmax
// denominator, scale and mask applied), so without dropout the backward may
// use whichever kernel CUDA's choice gives for the backward's inputs. With
// dropout the backward must replay the forward's random mask with the
// forward's kernel: the forward records its kernel in its logsumexp's
// storage (spare elements past the [B, H, L] values, read back from the
// storage's size: host metadata, no device read).

#include <ATen/Context.h>
#include <ATen/ExpandUtils.h>
#include <ATen/SDPBackend.h>
#include <ATen/TensorUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_cuda_dispatch.h>
#include <ATen/ops/_scaled_dot_product_cudnn_attention.h>
#include <ATen/ops/_scaled_dot_product_cudnn_attention_backward.h>
#include <ATen/ops/_scaled_dot_product_efficient_attention.h>
#include <ATen/ops/_scaled_dot_product_efficient_attention_backward.h>
#include <ATen/ops/_scaled_dot_product_flash_attention.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_backward.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "argument_devices.h"
#include "cuda_alias.h"

namespace cudadev {
namespace {

using at::SDPBackend;
// torch.autocast has already cast this call's arguments where it applies; the
// inner CUDA calls must not be cast again (as in convolution.cpp).
using NoAutocast = c10::impl::ExcludeDispatchKeyGuard;

// ---------------------------------------------------------------- the choice

int64_t concrete(const c10::SymInt& size) {
  // A symbolic size (dynamic shapes) is specialised: the kernel choice
  // depends on it, as CUDA's own choice does.
  return size.guard_int(__FILE__, __LINE__);
}

// A CUDA tensor with `t`'s sizes, strides, dtype and requires_grad over no
// memory (a dangling, 256-byte-aligned address nothing reads): what CUDA's
// choice inspects, for a cudadev tensor or a FakeTensor alike.
at::Tensor cuda_stand_in(const at::Tensor& t, c10::DeviceIndex device, bool requires_grad) {
  std::vector<int64_t> sizes, strides;
  for (const auto& s : t.sym_sizes()) sizes.push_back(concrete(s));
  for (const auto& s : t.sym_strides()) strides.push_back(concrete(s));
  at::Tensor stand_in = at::for_blob(reinterpret_cast<void*>(0x100000), sizes)
                            .strides(strides)
                            .options(at::TensorOptions().dtype(t.scalar_type()).device(at::kCUDA, device))
                            .target_device(c10::Device(at::kCUDA, device))
                            .make_tensor();
  if (requires_grad) stand_in.set_requires_grad(true);
  return stand_in;
}

// The kernel torch.cuda runs for these inputs (flash, efficient, cuDNN or
// math). `for_training`: as if the inputs required gradients (the backward,
// and a forward with dropout, whose backward must be able to replay it).
SDPBackend cuda_backend(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                        const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                        std::optional<double> scale, bool enable_gqa, bool for_training) {
  const c10::DeviceIndex device = query.device().index() < 0 ? 0 : query.device().index();
  c10::cuda::CUDAGuard on_device(device);  // CUDA's choice reads the current device's properties
  // CUDA's choice counts an input as requiring a gradient only while grad
  // mode is on (sdp_utils_cpp.h, input_requires_grad), and it is off where
  // these kernels run for training: in autograd's backward and in the
  // forward of a compiled train step. Flash, for one, declines training
  // with head sizes in (192, 224], or over 224 with dropout, on sm86 and
  // sm89 (sdp_utils.cpp), so a choice made with grad mode off could pick a
  // kernel whose backward cannot run these inputs.
  const c10::AutoGradMode grad_mode(for_training || c10::GradMode::is_enabled());
  const auto stand_in = [&](const at::Tensor& t) {
    return cuda_stand_in(t, device, for_training || t.requires_grad());
  };
  std::optional<at::Tensor> mask;
  if (attn_mask.has_value() && attn_mask->defined()) mask = cuda_stand_in(*attn_mask, device, attn_mask->requires_grad());
  // CUDA's kernel of the op, called directly (not through the dispatcher,
  // where a FakeTensorMode of the trace would take the call).
  return static_cast<SDPBackend>(at::cuda::_fused_sdp_choice(stand_in(query), stand_in(key), stand_in(value), mask,
                                                             dropout_p, is_causal, scale, enable_gqa));
}

bool mask_requires_grad(const std::optional<at::Tensor>& attn_mask) {
  return attn_mask.has_value() && attn_mask->defined() && attn_mask->requires_grad();
}

// cudadev's answer to at::scaled_dot_product_attention: OVERRIDEABLE where
// torch.cuda would run a fused kernel, MATH where it would run the math
// decomposition. A mask that needs a gradient stays with the math
// decomposition: only one of the three kernels gives a mask gradient.
int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  const auto& context = at::globalContext();
  if (context.userEnabledOverrideableSDP() && query.dim() == 4 && key.dim() == 4 && value.dim() == 4 &&
      !query.is_nested() && !mask_requires_grad(attn_mask)) {
    const SDPBackend backend =
        cuda_backend(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, dropout_p > 0.0);
    if (backend != SDPBackend::math && backend != SDPBackend::error) {
      return static_cast<int64_t>(SDPBackend::overrideable);
    }
  }
  TORCH_CHECK(context.userEnabledMathSDP(),
              "scaled_dot_product_attention on cudadev: no enabled backend takes these inputs (SDPBackend.MATH is "
              "disabled, and SDPBackend.OVERRIDEABLE, cudadev's route to torch.cuda's fused kernels, is disabled "
              "or no fused kernel takes them); enable SDPBackend.MATH in torch.nn.attention.sdpa_kernel");
  return static_cast<int64_t>(SDPBackend::math);
}

// ---------------------------------------------------------------- layouts

// Strides of a tensor of `sizes` whose dimensions are ordered in memory as
// `like`'s are (the meta function's alloc_with_matching_layout).
std::vector<int64_t> strides_ordered_like(const at::Tensor& like, c10::IntArrayRef sizes) {
  std::vector<int64_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return like.stride(a) > like.stride(b); });
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = stride;
    stride *= sizes[*it];
  }
  return strides;
}

// The strides at::empty_like(t) gives (a strided t, the preserve format):
// t's own where t is non-overlapping and dense, else dense strides in t's
// dimension order (TensorFactories.cpp, empty_like). Computed, not allocated:
// they run on every call, four per layer of a train step, and an
// empty_like costs a caching-allocator round trip (empty_like calls in 10
// GPT-2-style train steps: 550 on cudadev, 250 on cuda,
// bench/results/train_profile_gpt2_h200.md).
std::vector<int64_t> empty_like_strides(const at::Tensor& t) {
  if (t.is_non_overlapping_and_dense()) return t.strides().vec();
  return at::infer_dense_strides(t.sizes(), t.strides());
}

// `result` in the layout `wanted` describes, copied only when it is not.
at::Tensor in_layout(const at::Tensor& result, c10::IntArrayRef wanted_strides) {
  if (!result.defined() || result.strides() == wanted_strides) return result;
  at::Tensor out = at::empty_strided(result.sizes(), wanted_strides, result.options());
  out.copy_(result);
  return out;
}

// The output as the meta function lays it out: empty_like(query) when the
// shapes agree, else the query's dimension order.
at::Tensor output_like_query(const at::Tensor& result, const at::Tensor& query) {
  if (result.sizes() == query.sizes()) {
    return in_layout(result, empty_like_strides(query));
  }
  return in_layout(result, strides_ordered_like(query, result.sizes()));
}

// A gradient as the backward's meta function lays it out: empty_like(input).
at::Tensor gradient_like(const at::Tensor& grad, const at::Tensor& input) {
  if (!grad.defined()) return grad;
  return in_layout(grad, empty_like_strides(input));
}

// Flash attention takes head sizes that are multiples of 8; torch's
// scaled_dot_product_attention pads the others with zeros and cuts the
// result (and keeps the scale of the unpadded size).
at::Tensor pad_head(const at::Tensor& t) {
  const int64_t rest = t.size(-1) % 8;
  return rest == 0 ? t : at::constant_pad_nd(t, {0, 8 - rest}, 0);
}

// Memory-efficient attention reads a mask whose last dimension is a multiple
// of 16 in memory, expanded to [B, H, L, S] (torch's preprocess_mask).
at::Tensor efficient_mask(const at::Tensor& mask, const at::Tensor& query, const at::Tensor& key) {
  at::Tensor padded = mask;
  const int64_t length = mask.size(-1), rest = length % 16;
  if (rest != 0) padded = at::constant_pad_nd(mask, {0, 16 - rest}, 0).narrow(-1, 0, length);
  return padded.expand({query.size(0), query.size(1), query.size(2), key.size(2)});
}

// A bool mask as the kernels take masks: additive, 0 where attended and -inf
// where not (at::scaled_dot_product_attention converts before calling the
// op; a direct call may pass a bool mask).
at::Tensor additive_mask(const at::Tensor& mask, c10::ScalarType dtype) {
  if (mask.scalar_type() != at::kBool) return mask;
  return at::zeros_like(mask, mask.options().dtype(dtype))
      .masked_fill_(mask.logical_not(), -std::numeric_limits<double>::infinity());
}

// ---------------------------------------------------------------- the kernel's record (dropout)

int64_t kernel_code(SDPBackend backend) { return static_cast<int64_t>(backend); }

// logsumexp in a storage with kernel_code + 1 spare floats past its values.
at::Tensor recorded_logsumexp(const at::Tensor& logsumexp, SDPBackend backend) {
  const int64_t n = logsumexp.numel();
  at::Tensor storage = at::empty({n + kernel_code(backend) + 1}, logsumexp.options());
  at::Tensor recorded = storage.narrow(0, 0, n).view(logsumexp.sizes());
  recorded.copy_(logsumexp);
  return recorded;
}

// The kernel a forward recorded, if its logsumexp still has its storage.
std::optional<SDPBackend> recorded_backend(const at::Tensor& logsumexp) {
  const int64_t spare = static_cast<int64_t>(logsumexp.storage().nbytes() / sizeof(float)) - logsumexp.numel() -
                        logsumexp.storage_offset();
  if (logsumexp.storage_offset() != 0 || spare <= 0) return std::nullopt;
  const int64_t code = spare - 1;
  if (code != kernel_code(SDPBackend::flash_attention) && code != kernel_code(SDPBackend::efficient_attention) &&
      code != kernel_code(SDPBackend::cudnn_attention)) {
    return std::nullopt;
  }
  return static_cast<SDPBackend>(code);
}

// ---------------------------------------------------------------- forward

// A one-element tensor as a 0-dim view of it (the op returns its philox seed
// and offset 0-dim); others as they are.
at::Tensor one_element_as_scalar(const at::Tensor& t) {
  return t.defined() && t.dim() == 1 && t.size(0) == 1 ? t.squeeze(0) : t;
}

using ForwardResult = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt,
                                 at::Tensor, at::Tensor, at::Tensor>;

ForwardResult fused_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                              const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                              bool return_debug_mask, std::optional<double> scale) {
  constexpr const char* op = "aten::_scaled_dot_product_fused_attention_overrideable";
  const bool has_mask = attn_bias.has_value() && attn_bias->defined();
  const c10::DeviceIndex idx = common_cudadev_device(
      op, {{"query", &query}, {"key", &key}, {"value", &value}, {"attn_bias", has_mask ? &*attn_bias : nullptr}});
  TORCH_CHECK(query.dim() == 4 && key.dim() == 4 && value.dim() == 4, op,
              " on cudadev takes 4-d [B, H, L, E] query, key and value; call "
              "torch.nn.functional.scaled_dot_product_attention, which picks the math backend for others");
  TORCH_CHECK(!return_debug_mask, op, " on cudadev: return_debug_mask is not supported; pass False");
  const bool gqa = key.size(1) != query.size(1);
  const SDPBackend backend =
      cuda_backend(query, key, value, attn_bias, dropout_p, is_causal, scale, gqa, dropout_p > 0.0);
  TORCH_CHECK(backend == SDPBackend::flash_attention || backend == SDPBackend::efficient_attention ||
                  backend == SDPBackend::cudnn_attention,
              op, " on cudadev: no fused CUDA kernel takes these inputs (torch.cuda would run the math "
              "decomposition); call torch.nn.functional.scaled_dot_product_attention, which does that");

  c10::cuda::CUDAStreamGuard on_cudadev_stream(current_stream_as_cuda(idx));
  NoAutocast no_autocast(c10::autocast_dispatch_keyset);
  AliasScope scope(idx);
  const at::Tensor q = scope.to_cuda(query), k = scope.to_cuda(key), v = scope.to_cuda(value);
  std::optional<at::Tensor> mask;
  if (has_mask) mask = additive_mask(scope.to_cuda(*attn_bias), query.scalar_type());
  const int64_t batch = query.size(0), heads = query.size(1), length = query.size(2);

  at::Tensor out, logsumexp, seed, offset;
  if (backend == SDPBackend::flash_attention) {
    const int64_t head = q.size(-1);
    const double flash_scale = scale.value_or(1.0 / std::sqrt(static_cast<double>(head)));
    auto result = at::_scaled_dot_product_flash_attention(pad_head(q), pad_head(k), pad_head(v), dropout_p,
                                                          is_causal, false, flash_scale);
    out = std::get<0>(result).narrow(-1, 0, value.size(-1));
    logsumexp = std::get<1>(result);
    // Flash's philox state is one [2] uint64 tensor (seed, offset): the op's
    // two 0-dim int64 outputs are views of it, so the backward finds it whole.
    const at::Tensor& rng_state = std::get<6>(result);
    if (rng_state.numel() == 2) {
      const at::Tensor as_long = rng_state.view(at::kLong);
      seed = as_long.select(0, 0);
      offset = as_long.select(0, 1);
    } else {
      seed = rng_state;
      offset = std::get<7>(result);
    }
  } else if (backend == SDPBackend::efficient_attention) {
    std::optional<at::Tensor> padded_mask;
    if (mask.has_value()) padded_mask = efficient_mask(*mask, q, k);
    auto result = at::_scaled_dot_product_efficient_attention(q, k, v, padded_mask, /*compute_log_sumexp=*/true,
                                                              dropout_p, is_causal, scale);
    out = std::get<0>(result);
    logsumexp = std::get<1>(result).narrow(-1, 0, length);  // rows padded to a multiple of 32
    seed = std::get<2>(result);
    offset = std::get<3>(result);
  } else {
    auto result = at::_scaled_dot_product_cudnn_attention(q, k, v, mask, /*compute_log_sumexp=*/true, dropout_p,
                                                          is_causal, false, scale);
    out = std::get<0>(result);
    logsumexp = std::get<1>(result).reshape({batch, heads, length});  // [B, H, L, 1]
    // cuDNN's philox seed and offset are [1] tensors, filled on the stream
    // when there is dropout: 0-dim views keep their values for the backward.
    seed = one_element_as_scalar(std::get<6>(result));
    offset = one_element_as_scalar(std::get<7>(result));
  }
  out = output_like_query(out, q);
  logsumexp = logsumexp.is_contiguous() ? logsumexp : logsumexp.contiguous();
  if (dropout_p > 0.0) logsumexp = recorded_logsumexp(logsumexp, backend);
  const auto long_scalar = at::TensorOptions().dtype(at::kLong).device(at::kCUDA, idx);
  if (!seed.defined() || seed.dim() != 0) seed = at::empty({}, long_scalar);
  if (!offset.defined() || offset.dim() != 0) offset = at::empty({}, long_scalar);

  scope.write_back();
  return {scope.to_cudadev(out), scope.to_cudadev(logsumexp), at::Tensor(), at::Tensor(), c10::SymInt(length),
          c10::SymInt(key.size(2)), scope.to_cudadev(seed), scope.to_cudadev(offset), at::Tensor()};
}

// ---------------------------------------------------------------- backward

// Flash's [2] uint64 philox state, from the seed view the forward returned.
at::Tensor flash_rng_state(const at::Tensor& seed) {
  if (seed.storage().nbytes() < 2 * sizeof(int64_t) || seed.storage_offset() != 0) return seed;
  return at::empty({0}, seed.options().dtype(at::kUInt64)).set_(seed.storage(), 0, {2}, {1});
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k, int64_t max_q,
    int64_t max_k, double dropout_p, bool is_causal, const at::Tensor& philox_seed, const at::Tensor& philox_offset,
    std::optional<double> scale) {
  constexpr const char* op = "aten::_scaled_dot_product_fused_attention_overrideable_backward";
  const c10::DeviceIndex idx = common_cudadev_device(
      op, {{"grad_out", &grad_out}, {"query", &query}, {"key", &key}, {"value", &value},
           {"attn_bias", attn_bias.defined() ? &attn_bias : nullptr}, {"out", &out}, {"logsumexp", &logsumexp}});
  TORCH_CHECK(!grad_input_mask[3], op, " on cudadev: no gradient for attn_bias (cudadev's choice runs the math "
              "decomposition for a mask that requires one)");
  const bool gqa = key.size(1) != query.size(1);
  std::optional<at::Tensor> bias_opt;
  if (attn_bias.defined()) bias_opt = attn_bias;
  SDPBackend backend;
  if (dropout_p > 0.0) {
    const auto recorded = recorded_backend(logsumexp);
    TORCH_CHECK(recorded.has_value(), op, " on cudadev with dropout needs the logsumexp its forward returned (it "
                "records which kernel drew the dropout mask); this one is a copy of it");
    backend = *recorded;
  } else {
    backend = cuda_backend(query, key, value, bias_opt, dropout_p, is_causal, scale, gqa, /*for_training=*/true);
    TORCH_CHECK(backend == SDPBackend::flash_attention || backend == SDPBackend::efficient_attention ||
                    backend == SDPBackend::cudnn_attention,
                op, " on cudadev: no fused CUDA kernel takes these inputs for a backward");
  }

  c10::cuda::CUDAStreamGuard on_cudadev_stream(current_stream_as_cuda(idx));
  NoAutocast no_autocast(c10::autocast_dispatch_keyset);
  AliasScope scope(idx);
  const at::Tensor g = scope.to_cuda(grad_out), q = scope.to_cuda(query), k = scope.to_cuda(key),
                   v = scope.to_cuda(value), o = scope.to_cuda(out), lse = scope.to_cuda(logsumexp);
  // The philox tensors may be CPU tensors (memory-efficient attention's,
  // outside graph capture): those are passed as they are.
  const auto on_cuda = [&](const at::Tensor& t) {
    return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1 ? scope.to_cuda(t) : t;
  };
  const at::Tensor seed = on_cuda(philox_seed), offset = on_cuda(philox_offset);
  at::Tensor mask;
  if (attn_bias.defined()) mask = additive_mask(scope.to_cuda(attn_bias), query.scalar_type());

  at::Tensor dq, dk, dv;
  if (backend == SDPBackend::flash_attention) {
    const int64_t head = q.size(-1), value_head = v.size(-1);
    const double flash_scale = scale.value_or(1.0 / std::sqrt(static_cast<double>(head)));
    std::tie(dq, dk, dv) = at::_scaled_dot_product_flash_attention_backward(
        pad_head(g), pad_head(q), pad_head(k), pad_head(v), pad_head(o), lse, cum_seq_q, cum_seq_k, max_q, max_k,
        dropout_p, is_causal, flash_rng_state(seed), offset, flash_scale);
    dq = dq.narrow(-1, 0, head);
    dk = dk.narrow(-1, 0, head);
    dv = dv.narrow(-1, 0, value_head);
  } else if (backend == SDPBackend::efficient_attention) {
    // Its backward reads out and grad_out in [B, L, H, E] memory (Inductor
    // enforces that for the CUDA op: pytorch #138772), and logsumexp rows
    // padded to a multiple of 32.
    const auto blhe = [](const at::Tensor& t) { return t.transpose(1, 2).contiguous().transpose(1, 2); };
    const int64_t length = q.size(2), padded = (length + 31) / 32 * 32;
    at::Tensor lse_padded = lse;
    if (padded != length) {
      lse_padded = at::zeros({lse.size(0), lse.size(1), padded}, lse.options());
      lse_padded.narrow(-1, 0, length).copy_(lse);
    }
    at::Tensor padded_mask = mask.defined() ? efficient_mask(mask, q, k) : at::Tensor();
    std::tie(dq, dk, dv, std::ignore) = at::_scaled_dot_product_efficient_attention_backward(
        blhe(g), q, k, v, padded_mask, blhe(o), lse_padded, seed, offset, dropout_p,
        {grad_input_mask[0], grad_input_mask[1], grad_input_mask[2], false}, is_causal, scale);
  } else {
    // cuDNN's seed and offset as its forward made them, [1] (the forward
    // returned 0-dim views of them).
    const auto as_cudnn = [](const at::Tensor& t) { return t.defined() && t.dim() == 0 ? t.unsqueeze(0) : t; };
    std::tie(dq, dk, dv) = at::_scaled_dot_product_cudnn_attention_backward(
        g, q, k, v, o, lse.unsqueeze(-1), as_cudnn(seed), as_cudnn(offset), mask, cum_seq_q, cum_seq_k, max_q,
        max_k, dropout_p, is_causal, scale);
  }
  dq = gradient_like(dq, q);
  dk = gradient_like(dk, k);
  dv = gradient_like(dv, v);
  at::Tensor grad_bias = attn_bias.defined() ? at::empty_like(scope.to_cuda(attn_bias)) : at::Tensor();
  scope.write_back();
  return {scope.to_cudadev(dq), scope.to_cudadev(dk), scope.to_cudadev(dv), scope.to_cudadev(grad_bias)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", TORCH_FN(fused_sdp_choice));
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(fused_attention));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", TORCH_FN(fused_attention_backward));
}

}  // namespace cudadev

// at::scaled_dot_product_attention calls the stub directly, on the calling
// thread (also with FakeTensors under torch.compile), not through the op.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &cudadev::fused_sdp_choice)
}
