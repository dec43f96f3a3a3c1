"""Fused attention on cudadev (csrc/attention.cpp): scaled_dot_product_attention
runs torch.cuda's own fused kernel for the same inputs (flash, cuDNN or
memory-efficient, as CUDA's choice picks it), forward and backward, through
the overrideable op PyTorch gives plugins; where torch.cuda would run the
math decomposition, so does cudadev.

The forward is compared bit for bit with torch.cuda's (the same kernel on
the same inputs); gradients against the CPU's math decomposition in float64
(torch.cuda's backward beside a PrivateUse1 backend trips PyTorch's autograd
engine, see test_cudadev_ops.py)."""

import pathlib
import sys

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[4] / "tests" / "python"))
import compile_cases as cases  # noqa: E402

pytestmark = pytest.mark.gpu

FUSED_CUDA = {int(SDPBackend.FLASH_ATTENTION), int(SDPBackend.EFFICIENT_ATTENTION), int(SDPBackend.CUDNN_ATTENTION)}
OVERRIDEABLE = int(SDPBackend.OVERRIDEABLE)
FUSED_BACKWARD = "ScaledDotProductFusedAttentionOverrideableBackward0"


def host(*shape, seed, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


# name, (query heads, key/value heads), (query length, key length), head size, keyword arguments
CASES = [
    ("plain", (8, 8), (128, 128), 64, {}),
    ("causal", (8, 8), (256, 256), 64, dict(is_causal=True)),
    ("grouped_query_causal", (8, 2), (128, 128), 64, dict(is_causal=True, enable_gqa=True)),
    ("float_mask", (4, 4), (64, 96), 64, dict(attn_mask="float")),
    ("bool_mask", (4, 4), (64, 64), 64, dict(attn_mask="bool")),
    ("head_72_scale", (4, 4), (64, 64), 72, dict(scale=0.2)),
    ("decode_sized", (8, 2), (1, 16), 64, dict(enable_gqa=True)),
]


def case_inputs(heads, lengths, head, kwargs, dtype, seed=0):
    (hq, hkv), (lq, lk) = heads, lengths
    q = host(2, hq, lq, head, seed=seed + 1, dtype=dtype)
    k = host(2, hkv, lk, head, seed=seed + 2, dtype=dtype)
    v = host(2, hkv, lk, head, seed=seed + 3, dtype=dtype)
    kwargs = dict(kwargs)
    if kwargs.get("attn_mask") == "float":
        kwargs["attn_mask"] = host(2, 1, lq, lk, seed=seed + 4, dtype=dtype)
    elif kwargs.get("attn_mask") == "bool":
        kwargs["attn_mask"] = host(lq, lk, seed=seed + 4) > -1.0
    return q, k, v, kwargs


def on(device, tensors, kwargs, requires_grad=False):
    moved = [t.to(device).requires_grad_(requires_grad) for t in tensors]
    return moved, {key: value.to(device) if isinstance(value, torch.Tensor) else value
                   for key, value in kwargs.items()}


def choice(q, k, v, kwargs, dropout_p=0.0):
    return torch.ops.aten._fused_sdp_choice(q, k, v, kwargs.get("attn_mask"), dropout_p, kwargs.get("is_causal", False),
                                            scale=kwargs.get("scale"), enable_gqa=kwargs.get("enable_gqa", False))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("name, heads, lengths, head, kwargs", CASES, ids=[c[0] for c in CASES])
def test_the_forward_is_torch_cudas_fused_kernel_bit_for_bit(name, heads, lengths, head, kwargs, dtype):
    q, k, v, kwargs = case_inputs(heads, lengths, head, kwargs, dtype)
    (cq, ck, cv), ckw = on("cuda", (q, k, v), kwargs)
    (dq, dk, dv), dkw = on("cudadev", (q, k, v), kwargs)
    cuda_choice, cudadev_choice = choice(cq, ck, cv, ckw), choice(dq, dk, dv, dkw)
    assert (cuda_choice in FUSED_CUDA) == (cudadev_choice == OVERRIDEABLE), (cuda_choice, cudadev_choice)
    expected = F.scaled_dot_product_attention(cq, ck, cv, **ckw)
    actual = F.scaled_dot_product_attention(dq, dk, dv, **dkw)
    assert actual.shape == expected.shape
    assert torch.equal(actual.cpu(), expected.cpu()), "cudadev's attention is not torch.cuda's kernel"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("name, heads, lengths, head, kwargs", CASES, ids=[c[0] for c in CASES])
def test_the_backward_matches_the_math_definition(name, heads, lengths, head, kwargs, dtype):
    q, k, v, kwargs = case_inputs(heads, lengths, head, kwargs, dtype)
    (dq, dk, dv), dkw = on("cudadev", (q, k, v), kwargs, requires_grad=True)
    out = F.scaled_dot_product_attention(dq, dk, dv, **dkw)
    if choice(dq, dk, dv, dkw) == OVERRIDEABLE:
        assert type(out.grad_fn).__name__ == FUSED_BACKWARD
    grad = host(*out.shape, seed=9, dtype=dtype)
    out.backward(grad.to("cudadev"))

    leaves = [t.double().requires_grad_(True) for t in (q, k, v)]
    mask = kwargs.pop("attn_mask", None)
    mask = mask.double() if mask is not None and mask.dtype != torch.bool else mask
    with sdpa_kernel([SDPBackend.MATH]):
        expected = F.scaled_dot_product_attention(*leaves, attn_mask=mask, **kwargs)
    expected.backward(grad.double())
    tolerance = dict(rtol=3e-2, atol=3e-2) if dtype == torch.bfloat16 else dict(rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(out.detach().cpu().double(), expected.detach(), **tolerance)
    for leaf, reference in zip((dq, dk, dv), leaves):
        assert leaf.grad.shape == leaf.shape and leaf.grad.stride() == leaf.stride()
        torch.testing.assert_close(leaf.grad.cpu().double(), reference.grad, **tolerance)


def cuda_takes(backend, q, k, v, dropout_p=0.0):
    """Whether torch.cuda's own choice runs `backend`'s kernel for these
    tensors (requires_grad as given, causal), with that kernel alone enabled."""
    with sdpa_kernel([BACKENDS[backend]]):
        try:
            return choice(q, k, v, {"is_causal": True}, dropout_p) == int(BACKENDS[backend])
        except RuntimeError:  # no enabled kernel takes them
            return False


# Query, key and value of [2, 4, 64, 64] in memory laid out three ways: packed
# [B, H, L, E]; a transpose of [B, L, H, E] (dense, not contiguous: how
# attention modules split heads); every other row of a longer sequence (not
# dense: empty_like gives it dense strides of its own dimension order).
LAYOUTS = {
    "contiguous": lambda t: t.contiguous(),
    "transposed_blhe": lambda t: t.transpose(1, 2).contiguous().transpose(1, 2),
    "every_other_row": lambda t: t.repeat_interleave(2, dim=2)[:, :, ::2],
}
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION}


@pytest.mark.parametrize("backend", BACKENDS, ids=list(BACKENDS))
@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
def test_outputs_and_gradients_are_laid_out_as_empty_like_says(layout, backend):
    """The meta functions of the overrideable op and its backward lay the
    output and the gradients out as torch.empty_like(query) (and key,
    value); compiled graphs assert those strides. cudadev computes them
    without allocating (attention.cpp, empty_like_strides): here the
    kernel's own results, whatever layout it returned, in every layout
    empty_like distinguishes, against empty_like itself."""
    q, k, v = (LAYOUTS[layout](host(2, 4, 64, 64, seed=seed, dtype=torch.bfloat16)) for seed in (1, 2, 3))
    if not cuda_takes(backend, *(LAYOUTS[layout](t.cuda()).requires_grad_(True) for t in (q, k, v))):
        pytest.skip(f"torch.cuda's {backend} kernel does not take the {layout} layout for training here")
    with sdpa_kernel([BACKENDS[backend], SDPBackend.OVERRIDEABLE]):
        leaves = [LAYOUTS[layout](t.to("cudadev")).detach().requires_grad_(True) for t in (q, k, v)]
        assert [leaf.stride() for leaf in leaves] == [t.stride() for t in (q, k, v)]
        views = [leaf.view_as(leaf) for leaf in leaves]  # non-leaf: a hook sees the gradient the op returned
        returned = {}
        for i, view in enumerate(views):
            view.register_hook(lambda grad, i=i: returned.__setitem__(i, grad))
        out = F.scaled_dot_product_attention(*views, is_causal=True)
        assert type(out.grad_fn).__name__ == FUSED_BACKWARD
        out.backward(host(*out.shape, seed=4, dtype=torch.bfloat16).to("cudadev"))
    assert out.stride() == torch.empty_like(leaves[0]).stride()
    for i, leaf in enumerate(leaves):
        assert returned[i].stride() == torch.empty_like(leaf).stride(), (i, returned[i].stride())
    with sdpa_kernel([SDPBackend.MATH]):
        packed = [t.double().requires_grad_(True) for t in (q, k, v)]
        expected = F.scaled_dot_product_attention(*packed, is_causal=True)
        expected.backward(host(*out.shape, seed=4, dtype=torch.bfloat16).double())
    torch.testing.assert_close(out.detach().cpu().double(), expected.detach(), rtol=3e-2, atol=3e-2)
    for i, reference in enumerate(packed):
        torch.testing.assert_close(returned[i].cpu().double(), reference.grad, rtol=3e-2, atol=3e-2)


@pytest.mark.parametrize("backend", BACKENDS, ids=list(BACKENDS))
def test_dropout_is_torch_cudas_and_the_backward_replays_its_mask(backend):
    """Dropout on both devices from the same CUDA generator state gives the
    same output. With the values the identity (value = I, key length = head
    size), the output is the dropped-out attention matrix itself, so the
    value gradient of grad_out G must be output^T @ G: the backward replayed
    the forward's mask, with the philox seed and offset the forward returned
    (flash's as views of its state, cuDNN's as 0-dim views of its [1]
    tensors, memory-efficient's as they are). Each fused kernel in turn, where
    torch.cuda's own choice takes it for dropout (cuDNN declines dropout in
    some versions)."""
    length = head = 64
    q, k = host(2, 4, length, head, seed=1, dtype=torch.bfloat16), host(2, 4, length, head, seed=2,
                                                                         dtype=torch.bfloat16)
    v = torch.eye(head, dtype=torch.bfloat16).expand(2, 4, length, head).contiguous()
    if not cuda_takes(backend, *(t.cuda().requires_grad_(True) for t in (q, k, v)), dropout_p=0.3):
        pytest.skip(f"torch.cuda's {backend} kernel does not take dropout for training here")
    outputs = {}
    for device in ("cuda", "cudadev"):
        torch.cuda.manual_seed(1234)
        leaves = [t.to(device).requires_grad_(True) for t in (q, k, v)]
        with sdpa_kernel([BACKENDS[backend]] + ([SDPBackend.OVERRIDEABLE] if device == "cudadev" else [])):
            outputs[device] = (F.scaled_dot_product_attention(*leaves, dropout_p=0.3, is_causal=True), leaves)
    expected, actual = outputs["cuda"][0], outputs["cudadev"][0]
    assert type(actual.grad_fn).__name__ == FUSED_BACKWARD
    assert torch.equal(actual.detach().cpu(), expected.detach().cpu())
    assert (actual.detach().cpu() == 0).float().mean() > 0.2, "no dropout happened"
    grad = host(2, 4, length, head, seed=3, dtype=torch.bfloat16)
    actual.backward(grad.to("cudadev"))
    dv = outputs["cudadev"][1][2].grad.cpu().double()
    torch.testing.assert_close(dv, actual.detach().cpu().double().transpose(-1, -2) @ grad.double(),
                               rtol=3e-2, atol=3e-2)


def test_math_alone_and_a_mask_that_needs_a_gradient_run_the_math_decomposition():
    q = host(2, 4, 64, 64, seed=1, dtype=torch.bfloat16).to("cudadev").requires_grad_(True)
    with sdpa_kernel([SDPBackend.MATH]):
        out = F.scaled_dot_product_attention(q, q, q)
    assert type(out.grad_fn).__name__ != FUSED_BACKWARD
    mask = host(64, 64, seed=2, dtype=torch.bfloat16).to("cudadev").requires_grad_(True)
    out = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    assert type(out.grad_fn).__name__ != FUSED_BACKWARD
    out.sum().backward()
    assert mask.grad is not None and mask.grad.shape == mask.shape


def test_attention_runs_on_the_current_stream():
    """On a side stream held by a sleep, the query is written, then attended:
    a kernel on any other stream would run at once and read the zeros."""
    q, k, v, _ = case_inputs((8, 8), (256, 256), 64, {}, torch.bfloat16)
    expected = F.scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(), is_causal=True).cpu()
    query = torch.zeros(q.shape, dtype=q.dtype, device="cudadev")
    (source, dk, dv), _ = on("cudadev", (q, k, v), {})
    torch.cudadev.synchronize()
    stream = torch.Stream(device="cudadev")
    with stream:
        torch.cudadev._sleep_on_current_stream(200)
        query.copy_(source)
        out = F.scaled_dot_product_attention(query, dk, dv, is_causal=True)
        result = out.cpu()
    assert torch.equal(result, expected)


def llama_block():
    """A Llama-style attention block: grouped-query heads, causal, RMSNorm."""
    return cases.AttentionBlock(width=256, heads=8, kv_heads=2, norm=torch.nn.RMSNorm)


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_compiled_training_steps_call_the_fused_kernel(mode):
    from devbridge.inductor import graph_capture_counts
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    torch.manual_seed(0)
    block = llama_block().to(device="cudadev", dtype=torch.bfloat16)
    reference = llama_block().to(device="cudadev", dtype=torch.bfloat16)
    reference.load_state_dict(block.state_dict())
    compiled = torch.compile(block, mode=None if mode == "default" else mode)
    start = graph_capture_counts()
    x = host(4, 128, 256, seed=1, dtype=torch.bfloat16).to("cudadev")
    _, code = run_and_get_code(lambda: compiled(x).float().square().mean().backward())
    code = "\n".join(code)
    assert "_scaled_dot_product_fused_attention_overrideable.default(" in code
    assert "_scaled_dot_product_fused_attention_overrideable_backward.default(" in code
    for seed in range(2, 5):
        x = host(4, 128, 256, seed=seed, dtype=torch.bfloat16).to("cudadev")
        loss = compiled(x).float().square().mean()
        loss.backward()
        expected = reference(x).float().square().mean()
        expected.backward()
        torch.testing.assert_close(loss.detach().cpu(), expected.detach().cpu(), rtol=2e-2, atol=2e-2)
    for param, ref in zip(block.parameters(), reference.parameters()):
        torch.testing.assert_close(param.grad.float().cpu(), ref.grad.float().cpu(), rtol=5e-2, atol=5e-2)
    if mode == "reduce-overhead":
        counts = graph_capture_counts()
        assert counts["captures"] - start["captures"] == 2, counts
        assert counts["not_captured"] == start["not_captured"], counts


def test_with_its_kernel_switched_off_the_triton_fallback_runs_flex_templates():
    """cudadev standing in for a plugin without a fused kernel: with
    SDPBackend.OVERRIDEABLE (its route) disabled, devbridge's
    sdpa_flex_attention("fallback") lowers compiled SDPA to Inductor's
    flex-attention Triton templates, forward and backward, which devbridge's
    Triton backend compiles and launches for cudadev."""
    import re

    import devbridge.inductor
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    q, k, v, _ = case_inputs((8, 2), (256, 256), 64, {}, torch.bfloat16)
    leaves = [t.to("cudadev").requires_grad_(True) for t in (q, k, v)]
    grad = host(2, 8, 256, 64, seed=9, dtype=torch.bfloat16)

    def attend(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    def step():
        out = torch.compile(attend)(*leaves)
        out.backward(grad.to("cudadev"))
        return out

    previous = devbridge.inductor.sdpa_flex_attention("fallback")
    try:
        with sdpa_kernel([SDPBackend.MATH, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                          SDPBackend.CUDNN_ATTENTION]):
            out, code = run_and_get_code(step)
    finally:
        devbridge.inductor.sdpa_flex_attention(previous)
    code = "\n".join(code)
    assert re.search(r"def triton_tem_fused_\w*flex_attention(?!_backward)", code), code[-3000:]
    assert re.search(r"def triton_tem_fused_\w*flex_attention_backward", code), code[-3000:]
    assert "_scaled_dot_product_fused_attention_overrideable" not in code and "extern_kernels.bmm" not in code
    # with the block sizes torch.cuda's would take on this GPU (Inductor's generic ones are 16x16)
    backward_config = torch._inductor.choices.InductorChoices().get_flex_attention_bwd_configs(64, torch.bfloat16,
                                                                                               "cuda")[-1]
    backward = code[re.search(r"def triton_tem_fused_\w*flex_attention_backward", code).start():]
    for name in ("block_m1", "block_n1", "block_m2", "block_n2"):
        value = getattr(backward_config, name)
        assert re.search(rf"\b{name.upper()} : tl.constexpr = {value}\b", backward), (name, value)

    reference = [t.double().requires_grad_(True) for t in (q, k, v)]
    with sdpa_kernel([SDPBackend.MATH]):
        expected = F.scaled_dot_product_attention(*reference, is_causal=True, enable_gqa=True)
    expected.backward(grad.double())
    tolerance = dict(rtol=3e-2, atol=3e-2)
    torch.testing.assert_close(out.detach().cpu().double(), expected.detach(), **tolerance)
    for leaf, ref in zip(leaves, reference):
        torch.testing.assert_close(leaf.grad.cpu().double(), ref.grad, **tolerance)
