"""Fused attention on simdev (csrc/ops/Attention.cpp): the route PyTorch
gives a plugin. scaled_dot_product_attention asks simdev's _fused_sdp_choice,
which answers OVERRIDEABLE when simdev's fused kernel takes the inputs (then
_scaled_dot_product_fused_attention_overrideable and its backward run, as
stream-ordered host work) and MATH when it does not (dropout, a mask that
needs a gradient, ...), honouring torch.nn.attention.sdpa_kernel."""

import time

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

torch_simdev = pytest.importorskip(
    "torch_simdev", reason="torch_simdev is not installed; build it with: pip install --no-build-isolation plugins/simdev"
)

SIMDEV = torch.device("simdev:0")
FUSED_BACKWARD = "ScaledDotProductFusedAttentionOverrideableBackward0"


def _randn(*shape, seed, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _math_reference(q, k, v, **kwargs):
    """The CPU's math decomposition in float64: the definition, not a kernel."""
    leaves = [t.detach().double().requires_grad_(True) for t in (q, k, v)]
    mask = kwargs.pop("attn_mask", None)
    if mask is not None and mask.dtype != torch.bool:
        mask = mask.double()
    with sdpa_kernel([SDPBackend.MATH]):
        out = F.scaled_dot_product_attention(*leaves, attn_mask=mask, **kwargs)
    return out, leaves


# name, query/key/value heads, lengths (query, key), keyword arguments
CASES = [
    ("plain", (4, 4), (16, 16), {}),
    ("causal", (4, 4), (16, 16), dict(is_causal=True)),
    ("causal_longer_keys", (4, 4), (8, 24), dict(is_causal=True)),
    ("scale", (2, 2), (16, 12), dict(scale=0.3)),
    ("grouped_query", (8, 2), (16, 16), dict(enable_gqa=True, is_causal=True)),
    ("bool_mask", (4, 4), (16, 16), dict(attn_mask="bool")),
    ("float_mask_per_head", (4, 4), (16, 16), dict(attn_mask="float")),
]


def _case_inputs(heads, lengths, kwargs, dtype):
    (hq, hkv), (lq, lk) = heads, lengths
    q = _randn(2, hq, lq, 16, seed=1, dtype=dtype)
    k = _randn(2, hkv, lk, 16, seed=2, dtype=dtype)
    v = _randn(2, hkv, lk, 16, seed=3, dtype=dtype)
    kwargs = dict(kwargs)
    if kwargs.get("attn_mask") == "bool":
        kwargs["attn_mask"] = _randn(lq, lk, seed=4) > -0.5  # broadcast over batch and heads
    elif kwargs.get("attn_mask") == "float":
        kwargs["attn_mask"] = _randn(2, hq, lq, lk, seed=5, dtype=dtype)
    return q, k, v, kwargs


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("name, heads, lengths, kwargs", CASES, ids=[c[0] for c in CASES])
def test_the_fused_kernel_runs_forward_and_backward(name, heads, lengths, kwargs, dtype):
    q, k, v, kwargs = _case_inputs(heads, lengths, kwargs, dtype)
    leaves = [t.to(SIMDEV).requires_grad_(True) for t in (q, k, v)]
    device_kwargs = {key: (value.to(SIMDEV) if isinstance(value, torch.Tensor) else value)
                     for key, value in kwargs.items()}
    out = F.scaled_dot_product_attention(*leaves, **device_kwargs)
    assert type(out.grad_fn).__name__ == FUSED_BACKWARD, "simdev's fused kernel did not run"
    grad = _randn(*out.shape, seed=6, dtype=dtype)
    out.backward(grad.to(SIMDEV))

    expected, reference_leaves = _math_reference(q, k, v, **kwargs)
    expected.backward(grad.double())
    tolerance = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out.detach().cpu().double(), expected.detach(), **tolerance)
    for leaf, reference in zip(leaves, reference_leaves):
        assert leaf.grad.shape == leaf.shape
        torch.testing.assert_close(leaf.grad.cpu().double(), reference.grad, **tolerance)


def test_the_output_is_laid_out_like_the_query():
    """The op's meta function (which compiled graphs assert) lays the output
    out like the query: a query viewed from [B, L, H, E] gives an output in
    that layout, and logsumexp is a contiguous float [B, H, L]."""
    q = _randn(2, 16, 4, 8, seed=1).to(SIMDEV).transpose(1, 2)  # [B, H, L, E] over [B, L, H, E] memory
    k = _randn(2, 4, 12, 8, seed=2).to(SIMDEV)
    v = _randn(2, 4, 12, 8, seed=3).to(SIMDEV)
    out, logsumexp, *_ = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, k, v)
    assert out.shape == (2, 4, 16, 8) and out.stride() == q.stride()
    assert logsumexp.shape == (2, 4, 16) and logsumexp.is_contiguous() and logsumexp.dtype == torch.float32
    with sdpa_kernel([SDPBackend.MATH]):
        expected = F.scaled_dot_product_attention(q.cpu().double(), k.cpu().double(), v.cpu().double())
    torch.testing.assert_close(out.cpu().double(), expected, rtol=1e-5, atol=1e-5)
    scores = (q.cpu().double() @ k.cpu().double().transpose(-1, -2)) / 8 ** 0.5
    torch.testing.assert_close(logsumexp.cpu().double(), scores.logsumexp(-1), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------- what the choice declines

# Three layouts empty_like tells apart: packed [B, H, L, E]; a transpose of
# [B, L, H, E] memory (dense, not contiguous); every other row of a longer
# sequence (not dense: empty_like gives dense strides in its dimension order).
LAYOUTS = {
    "contiguous": lambda t: t.contiguous(),
    "transposed_blhe": lambda t: t.transpose(1, 2).contiguous().transpose(1, 2),
    "every_other_row": lambda t: t.repeat_interleave(2, dim=2)[:, :, ::2],
}


@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
def test_the_output_and_the_gradients_are_laid_out_as_empty_like_says(layout):
    """The backward's meta function lays each gradient out as
    torch.empty_like(its input) and the forward's the output as
    empty_like(query): what compiled graphs assert. Checked on the
    gradients the op itself returns (hooks on views of the leaves, which see
    them before autograd accumulates them into .grad)."""
    q, k, v = (LAYOUTS[layout](_randn(2, 4, 16, 8, seed=seed)) for seed in (1, 2, 3))
    leaves = [LAYOUTS[layout](t.to(SIMDEV)).detach().requires_grad_(True) for t in (q, k, v)]
    assert [leaf.stride() for leaf in leaves] == [t.stride() for t in (q, k, v)]
    views = [leaf.view_as(leaf) for leaf in leaves]
    returned = {}
    for i, view in enumerate(views):
        view.register_hook(lambda grad, i=i: returned.__setitem__(i, grad))
    out = F.scaled_dot_product_attention(*views, is_causal=True)
    assert type(out.grad_fn).__name__ == FUSED_BACKWARD, "simdev's fused kernel did not run"
    grad = _randn(*out.shape, seed=4)
    out.backward(grad.to(SIMDEV))
    assert out.stride() == torch.empty_like(leaves[0]).stride()
    assert [returned[i].stride() for i in range(3)] == [torch.empty_like(leaf).stride() for leaf in leaves]
    expected, reference_leaves = _math_reference(q, k, v, is_causal=True)
    expected.backward(grad.double())
    torch.testing.assert_close(out.detach().cpu().double(), expected.detach(), rtol=1e-4, atol=1e-4)
    for i, reference in enumerate(reference_leaves):
        torch.testing.assert_close(returned[i].cpu().double(), reference.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("why", ["dropout", "mask_requires_grad", "value_head_size", "sdpa_kernel_math"])
def test_inputs_the_fused_kernel_cannot_take_run_the_math_decomposition(why):
    q, k, v = (_randn(2, 2, 8, 16, seed=s).to(SIMDEV).requires_grad_(True) for s in (1, 2, 3))
    kwargs = {}
    context = sdpa_kernel([SDPBackend.OVERRIDEABLE, SDPBackend.MATH])
    if why == "dropout":
        kwargs["dropout_p"] = 0.5
    elif why == "mask_requires_grad":
        kwargs["attn_mask"] = _randn(8, 8, seed=4).to(SIMDEV).requires_grad_(True)
    elif why == "value_head_size":
        v = _randn(2, 2, 8, 24, seed=3).to(SIMDEV).requires_grad_(True)
    else:
        context = sdpa_kernel([SDPBackend.MATH])
    with context:
        out = F.scaled_dot_product_attention(q, k, v, **kwargs)
    assert type(out.grad_fn).__name__ != FUSED_BACKWARD
    out.sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad.cpu()).all()


def test_no_enabled_backend_is_a_clear_error():
    q = _randn(2, 2, 8, 16, seed=1).to(SIMDEV)
    with sdpa_kernel([SDPBackend.OVERRIDEABLE]), pytest.raises(
            RuntimeError, match=r"simdev's fused kernel \(SDPBackend.OVERRIDEABLE\) does not take dropout, and "
                                r"SDPBackend.MATH is disabled; enable one of them"):
        F.scaled_dot_product_attention(q, q, q, dropout_p=0.1)


def test_a_direct_call_the_kernel_cannot_take_names_the_fix():
    q = _randn(2, 2, 8, 16, seed=1).to(SIMDEV)
    with pytest.raises(RuntimeError, match=r"does not take dropout; call torch.nn.functional."
                                           r"scaled_dot_product_attention"):
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, q, q, dropout_p=0.2)


def test_a_cpu_key_is_refused_naming_it():
    q = _randn(2, 2, 8, 16, seed=1)
    with pytest.raises(RuntimeError, match=r"key is on cpu and query on simdev:0; move key there"):
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q.to(SIMDEV), q, q.to(SIMDEV))


# ------------------------------------------------------------- asynchrony and stream order

def test_forward_and_backward_run_in_order_on_the_current_stream():
    """With every queued operation held up by the delay knob, on a side
    stream: attention must read what fill_ wrote before it, and mul_ must see
    its result. A kernel run on the calling thread (or on another stream)
    would read the old values or race with mul_; one that waited for the
    stream would take the queue's time to return."""
    stream = torch.Stream(device=SIMDEV)
    with stream:
        q = torch.zeros(1, 2, 8, 16, device=SIMDEV, requires_grad=True)
        kv = _randn(1, 2, 8, 16, seed=2).to(SIMDEV).requires_grad_(True)
        torch.simdev.synchronize()
        with torch.simdev.op_delay(100_000):
            with torch.no_grad():
                q.fill_(1.0)
            began = time.perf_counter()
            out = F.scaled_dot_product_attention(q, kv, kv, is_causal=True)
            returned_after = time.perf_counter() - began
            scaled = out * 2.0
            assert not stream.query()
            assert torch.simdev.default_stream(0).query(), "attention work went to the default stream"
            scaled.sum().backward()
            result, grad = scaled.detach().cpu(), kv.grad.cpu()
    assert returned_after < 0.08, f"scaled_dot_product_attention waited {returned_after:.3f}s for queued work"

    expected, (_, key, value) = _math_reference(torch.ones(1, 2, 8, 16), kv.cpu(), kv.cpu(), is_causal=True)
    (expected * 2.0).sum().backward()
    torch.testing.assert_close(result.double(), expected.detach() * 2.0, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad.double(), key.grad + value.grad, rtol=1e-4, atol=1e-4)
