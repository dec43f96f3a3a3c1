// Fused scaled-dot-product attention through the route PyTorch gives a plugin
// (pytorch #126392): at::scaled_dot_product_attention asks the device's
// _fused_sdp_choice_stub which backend to run; simdev answers "overrideable"
// when its kernel takes the inputs, and implements
// _scaled_dot_product_fused_attention_overrideable and its backward. Eager
// and compiled SDPA then reach these two ops (torch.compile keeps them as
// fallback kernels, Inductor's sdpa_constraint), forward and backward.
//
// The kernels are ATen's CPU flash attention run as stream-ordered host work
// (HostWork.h) on aliases of the device memory: one pass over the keys with
// an online softmax, no [L, S] score matrix, as a device's fused kernel.
// Whatever that kernel cannot do (dropout, a value head size other than the
// query's, a mask that needs a gradient, inputs that are not 4-d) is answered
// "math", as CUDA's choice declines what its kernels cannot do.
//
// The outputs follow the op's meta function (torch/_meta_registrations.py),
// which compiled graphs assert: the output laid out like the query,
// logsumexp a contiguous float [B, H, L], the philox seed and offset 0-dim
// int64 tensors (unused: no dropout here), the sequence offsets undefined.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>
#include <array>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ops/ArgumentDevices.h"
#include "ops/HostWork.h"

namespace torch_simdev {
namespace {

using Tensors = std::vector<at::Tensor>;

// Every attention argument is on one simdev device, as CUDA's are.
constexpr CpuScalars kAttentionScalars = CpuScalars::kRefused;

// Why simdev's fused kernel does not take these inputs; empty when it does.
std::string whyNotFused(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                        const std::optional<at::Tensor>& attn_mask, double dropout_p) {
  if (query.is_nested() || key.is_nested() || value.is_nested()) return "nested tensors";
  if (query.dim() != 4 || key.dim() != 4 || value.dim() != 4) return "inputs that are not 4-d";
  const auto dtype = query.scalar_type();
  if (key.scalar_type() != dtype || value.scalar_type() != dtype) return "mixed dtypes";
  if (dtype != at::kFloat && dtype != at::kDouble && dtype != at::kBFloat16 && dtype != at::kHalf) {
    return "a dtype other than float32, float64, bfloat16 or float16";
  }
  if (dropout_p > 0.0) return "dropout";
  // Symbolic sizes under torch.compile(dynamic=True): SymInt comparisons.
  if (key.sym_size(-1) != query.sym_size(-1) || value.sym_size(-1) != query.sym_size(-1)) {
    return "head sizes that differ";
  }
  if (query.sym_numel() == 0 || key.sym_numel() == 0 || value.sym_numel() == 0) return "empty inputs";
  if (attn_mask.has_value() && attn_mask->defined() && attn_mask->requires_grad()) {
    return "a mask that requires a gradient";
  }
  return {};
}

// Runs on the calling thread, also on FakeTensors while torch.compile traces:
// metadata only. Honours torch.nn.attention.sdpa_kernel's choices, in which
// a plugin's fused kernel is SDPBackend.OVERRIDEABLE.
int64_t fusedSdpChoice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                       const std::optional<at::Tensor>& attn_mask, double dropout_p, bool /*is_causal*/,
                       std::optional<double> /*scale*/, bool /*enable_gqa*/) {
  const auto& context = at::globalContext();
  const std::string why_not = whyNotFused(query, key, value, attn_mask, dropout_p);
  if (context.userEnabledOverrideableSDP() && why_not.empty()) {
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  }
  if (context.userEnabledMathSDP()) return static_cast<int64_t>(at::SDPBackend::math);
  TORCH_CHECK(false, "scaled_dot_product_attention on simdev: no enabled backend takes these inputs: ",
              context.userEnabledOverrideableSDP()
                  ? "simdev's fused kernel (SDPBackend.OVERRIDEABLE) does not take " + why_not
                  : std::string("SDPBackend.OVERRIDEABLE (simdev's fused kernel) is disabled"),
              ", and SDPBackend.MATH is disabled; enable one of them in torch.nn.attention.sdpa_kernel");
}

// A simdev tensor of `sizes` whose dimensions are ordered in memory as the
// query's are (the meta function's alloc_with_matching_layout), so a query
// that is a transposed view of [B, L, H, E] gives an output in that layout.
at::Tensor emptyLikeQuery(const at::Tensor& query, std::vector<int64_t> sizes) {
  const auto options = query.options();
  if (query.sizes().vec() == sizes) return at::empty_like(query);
  std::vector<int64_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return query.stride(a) > query.stride(b); });
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = stride;
    stride *= sizes[*it];
  }
  return at::empty_strided(sizes, strides, options);
}

// A bool mask as the CPU kernel takes masks: additive, 0 where attended and
// -inf where not (at::scaled_dot_product_attention converts before calling
// the op; a direct call of the op may pass a bool mask).
at::Tensor additiveMask(const at::Tensor& mask, c10::ScalarType dtype) {
  if (mask.scalar_type() != at::kBool) return mask;
  return at::zeros_like(mask, mask.options().dtype(dtype))
      .masked_fill_(mask.logical_not(), -std::numeric_limits<double>::infinity());
}

// ---------------------------------------------------------------- forward

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor,
           at::Tensor>
fusedAttention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
               const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
               bool return_debug_mask, std::optional<double> scale) {
  constexpr const char* op = "_scaled_dot_product_fused_attention_overrideable";
  const at::Tensor mask = attn_bias.value_or(at::Tensor());
  const c10::DeviceIndex device = commonSimdevDevice(
      op, {{"query", &query}, {"key", &key}, {"value", &value}, {"attn_bias", &mask}}, kAttentionScalars);
  const std::string why_not = whyNotFused(query, key, value, attn_bias, dropout_p);
  TORCH_CHECK(why_not.empty(), op, " on simdev: its fused kernel does not take ", why_not,
              "; call torch.nn.functional.scaled_dot_product_attention, which picks the math backend for it");
  TORCH_CHECK(!return_debug_mask, op, " on simdev: return_debug_mask is not supported (it is a debugging aid of "
              "CUDA's flash kernel); pass return_debug_mask=False");
  TORCH_CHECK(!(is_causal && mask.defined()), op, ": is_causal=True and an attn_bias together are ambiguous; "
              "pass one of them");

  const int64_t batch = query.size(0), heads = query.size(1), length = query.size(2);
  at::Tensor out = emptyLikeQuery(query, query.sizes().vec());
  at::Tensor logsumexp = at::empty({batch, heads, length}, query.options().dtype(at::kFloat));
  at::Tensor philox_seed = at::empty({}, query.options().dtype(at::kLong));
  at::Tensor philox_offset = at::empty({}, query.options().dtype(at::kLong));

  Operands operands{Operand::output(out), Operand::output(logsumexp), Operand::of(query), Operand::of(key),
                    Operand::of(value)};
  if (mask.defined()) operands.push_back(Operand::of(mask));
  launchOnDevice(op, device, std::move(operands), [is_causal, scale](Tensors& t) {
    std::optional<at::Tensor> mask;
    if (t.size() > 5) mask = additiveMask(t[5], t[2].scalar_type());
    auto [result, lse] =
        at::_scaled_dot_product_flash_attention_for_cpu(t[2], t[3], t[4], 0.0, is_causal, mask, scale);
    t[0].copy_(result);
    t[1].copy_(lse);
  });
  return {out, logsumexp, at::Tensor(), at::Tensor(), c10::SymInt(length), c10::SymInt(key.size(2)),
          philox_seed, philox_offset, at::Tensor()};
}

// ---------------------------------------------------------------- backward

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fusedAttentionBackward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k,
    int64_t /*max_q*/, int64_t /*max_k*/, double dropout_p, bool is_causal, const at::Tensor& philox_seed,
    const at::Tensor& philox_offset, std::optional<double> scale) {
  constexpr const char* op = "_scaled_dot_product_fused_attention_overrideable_backward";
  const c10::DeviceIndex device = commonSimdevDevice(
      op,
      {{"grad_out", &grad_out}, {"query", &query}, {"key", &key}, {"value", &value}, {"attn_bias", &attn_bias},
       {"out", &out}, {"logsumexp", &logsumexp}, {"cum_seq_q", &cum_seq_q}, {"cum_seq_k", &cum_seq_k},
       {"philox_seed", &philox_seed}, {"philox_offset", &philox_offset}},
      kAttentionScalars);
  TORCH_CHECK(dropout_p == 0.0, op, " on simdev: dropout is not supported (the forward never ran with it)");
  TORCH_CHECK(!grad_input_mask[3], op, " on simdev: no gradient for attn_bias (the forward is not fused for a "
              "mask that requires one; scaled_dot_product_attention picks the math backend then)");
  TORCH_CHECK(logsumexp.dim() == 3 && logsumexp.scalar_type() == at::kFloat, op,
              ": expected the float [B, H, L] logsumexp of the forward, got ", logsumexp.sizes(), " ",
              logsumexp.scalar_type());

  // The gradients as the meta function lays them out (empty_like), and an
  // undefined attn_bias gradient: the forward never took one that needs it.
  at::Tensor grad_query = at::empty_like(query);
  at::Tensor grad_key = at::empty_like(key);
  at::Tensor grad_value = at::empty_like(value);
  at::Tensor grad_bias = attn_bias.defined() ? at::empty_like(attn_bias) : at::Tensor();
  if (grad_query.numel() == 0) return {grad_query, grad_key, grad_value, grad_bias};

  Operands operands{Operand::output(grad_query), Operand::output(grad_key), Operand::output(grad_value),
                    Operand::of(grad_out),       Operand::of(query),         Operand::of(key),
                    Operand::of(value),          Operand::of(out),           Operand::of(logsumexp)};
  if (attn_bias.defined()) operands.push_back(Operand::of(attn_bias));
  launchOnDevice(op, device, std::move(operands), [is_causal, scale](Tensors& t) {
    std::optional<at::Tensor> mask;
    if (t.size() > 9) mask = additiveMask(t[9], t[4].scalar_type());
    auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(t[3], t[4], t[5], t[6], t[7],
                                                                                  t[8], 0.0, is_causal, mask, scale);
    t[0].copy_(dq);
    t[1].copy_(dk);
    t[2].copy_(dv);
  });
  return {grad_query, grad_key, grad_value, grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", TORCH_FN(fusedSdpChoice));
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(fusedAttention));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", TORCH_FN(fusedAttentionBackward));
}

}  // namespace torch_simdev

// at::scaled_dot_product_attention calls the stub directly, on the calling
// thread (also with FakeTensors under torch.compile), not through the op.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_simdev::fusedSdpChoice)
}
