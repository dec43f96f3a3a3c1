"""Fused attention on a plugin device through Inductor's flex-attention Triton
templates, on simdev (whose Triton target interprets them):

- torch.nn.attention.flex_attention compiled on the plugin device, forward
  and backward, and its decoding kernel (short queries);
- devbridge.inductor.sdpa_flex_attention: scaled_dot_product_attention
  lowered to the same templates instead of the math decomposition, for the
  inputs flex attention computes (causal, boolean and additive masks, scale,
  grouped-query heads, float32 / bfloat16 / float16), forward and backward;
  "fallback" only where the plugin's own fused kernel does not take the
  inputs; dropout and "off" keep torch's lowering.

Every result and gradient is compared with the math on the CPU, and the
generated code is checked for the template kernel (or its absence)."""

from __future__ import annotations

import inspect
import re

import pytest
import torch
import torch.nn.functional as F

triton = pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")

import devbridge.inductor  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.nn.attention.flex_attention import create_block_mask, flex_attention  # noqa: E402

from compile_cases import _randn  # noqa: E402
from inductor_support import private_inductor, reset_dynamo_around_test  # noqa: E402
from launch_support import skip_without_simdev  # noqa: E402

pytestmark = skip_without_simdev
DEVICE = "simdev"
# The templates' kernels (Inductor names a kernel after the ops fused into it).
FLEX_KERNEL = re.compile(r"def triton_tem_fused_\w*flex_attention(?!_backward)")
FLEX_BACKWARD_KERNEL = re.compile(r"def triton_tem_fused_\w*flex_attention_backward")
# The plugin has no fused kernel: every backend but simdev's own (OVERRIDEABLE) allowed.
WITHOUT_PLUGIN_KERNEL = [b for b in SDPBackend.__members__.values() if b not in (SDPBackend.OVERRIDEABLE,
                                                                                 SDPBackend.ERROR)]


@pytest.fixture(scope="module", autouse=True)
def inductor_for_simdev(tmp_path_factory):
    with private_inductor(tmp_path_factory.mktemp("inductor-cache")):
        yield


fresh_dynamo = pytest.fixture(autouse=True)(reset_dynamo_around_test)


@pytest.fixture
def sdpa_mode():
    """Sets devbridge.inductor.sdpa_flex_attention for the test, "off" again after."""
    modes = []

    def set_mode(when):
        modes.append(devbridge.inductor.sdpa_flex_attention(when))

    yield set_mode
    devbridge.inductor.sdpa_flex_attention("off")


def qkv(batch=1, heads=2, kv_heads=None, q_len=32, kv_len=32, dim=16, dtype=torch.float32):
    """CPU query, key, value from fixed seeds, in `dtype`."""
    kv_heads = heads if kv_heads is None else kv_heads
    return (_randn(batch, heads, q_len, dim, seed=1).to(dtype), _randn(batch, kv_heads, kv_len, dim, seed=2).to(dtype),
            _randn(batch, kv_heads, kv_len, dim, seed=3).to(dtype))


def leaves(tensors, device):
    return [t.detach().to(device).requires_grad_() for t in tensors]


def run_forward_backward(fn, tensors, *extra):
    """fn on simdev leaves, compiled, then the backward of out * weights;
    returns (out, grads, every generated module's code)."""
    inputs = leaves(tensors, DEVICE)
    compiled = torch.compile(fn, fullgraph=True)
    q, _, v = tensors
    weights = _randn(*q.shape[:-1], v.shape[-1], seed=9).to(q.dtype)  # the output's shape

    def step():
        out = compiled(*inputs, *extra)
        (out * weights.to(DEVICE)).sum().backward()
        return out

    out, code = run_and_get_code(step)
    return out, [t.grad for t in inputs], "\n".join(code), weights


def reference_forward_backward(fn, tensors, weights, *extra):
    """fn on CPU float32 leaves (the math), the same backward."""
    inputs = leaves([t.float() for t in tensors], "cpu")
    out = fn(*inputs, *extra)
    (out * weights.float()).sum().backward()
    return out, [t.grad for t in inputs]


def assert_matches(actual, expected, tolerance):
    out, grads = actual
    expected_out, expected_grads = expected
    torch.testing.assert_close(out.cpu().float(), expected_out, atol=tolerance, rtol=tolerance)
    for grad, expected_grad in zip(grads, expected_grads):
        assert grad is not None and grad.device.type == DEVICE
        torch.testing.assert_close(grad.cpu().float(), expected_grad, atol=tolerance, rtol=tolerance)


def assert_flex_templates(code: str):
    assert FLEX_KERNEL.search(code) and FLEX_BACKWARD_KERNEL.search(code), code[-3000:]
    assert "devbridge_worker.prepare('simdev'" in code
    assert "aten.bmm" not in code and "extern_kernels.bmm" not in code, "the math decomposition's bmm"
    assert "cpp_fused" not in code and "device='cpu'" not in code, "a CPU kernel in a simdev graph"


# ---------------------------------------------------------------- flex_attention itself

def test_compiled_flex_attention_runs_its_templates_forward_and_backward():
    q, k, v = qkv()
    bias = _randn(32, 32, seed=4)

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def attention(q, k, v, bias):
        block_mask = create_block_mask(causal, None, None, q.size(-2), k.size(-2), device=q.device)
        return flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s + bias[i, j], block_mask=block_mask)

    def math(q, k, v, bias):
        keep = torch.ones(32, 32, dtype=torch.bool).tril()
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias.masked_fill(~keep, float("-inf")))

    out, grads, code, weights = run_forward_backward(attention, (q, k, v), bias.to(DEVICE))
    assert_flex_templates(code)
    assert_matches((out, grads), reference_forward_backward(math, (q, k, v), weights, bias), 1e-4)


def test_compiled_flex_attention_decodes_short_queries_with_the_plugins_multiprocessors():
    # Under 128 query rows Inductor takes its flex-decoding template, which
    # splits the keys over the device's multiprocessors (2 splits per
    # multiprocessor for one batch and head), counted with torch.cuda unless
    # devbridge answers for the plugin: a CPU-only torch would raise.
    q, k, v = qkv(heads=1, q_len=8, kv_len=64)
    interface = torch._dynamo.device_interface.get_interface_for_device(DEVICE)
    splits = 2 * interface.get_device_properties(0).multi_processor_count
    out, code = run_and_get_code(torch.compile(flex_attention, fullgraph=True), *(t.to(DEVICE) for t in (q, k, v)))
    code = "\n".join(code)
    assert f"'SPLIT_KV': {splits}," in code and "triton_tem_fused" in code, code[-3000:]
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=1e-5)


def test_a_device_compiling_for_cuda_takes_cudas_flex_configs_for_its_capability():
    """Inductor sizes the flex templates' blocks with the config heuristics of
    the device type, even without max-autotune: a type it does not know gets
    generic ones (a 16x16x16x16 one-stage backward, several times slower on an
    H200 than cuda's sm90 choice). A device whose compiler targets cuda gets
    cuda's, for the capability its hardware declares, with torch.cuda unasked
    (a CPU build of torch has none)."""
    from torch._inductor.choices import InductorChoices
    from torch._inductor.template_heuristics.triton import FlexBwDConfig, FlexConfig

    from devbridge.inductor import _torch_api

    choices = InductorChoices()
    generic = choices.get_flex_attention_bwd_configs(64, torch.bfloat16, "gemmdev")
    assert generic == [FlexBwDConfig(16, 16, 16, 16, 1, 4)]
    shared = _torch_api.share_config_heuristics("gemmdev", "cuda", lambda: (9, 0))
    if shared == "absent":
        pytest.skip(f"torch {torch.__version__} has no InductorChoices.get_config_heuristics")
    assert shared in ("replaced", "already")
    assert _torch_api.share_config_heuristics("gemmdev8", "cuda", lambda: (8, 0)) == "already"
    peers = InductorChoices.get_config_heuristics._devbridge_peers
    try:
        assert choices.get_flex_attention_bwd_configs(64, torch.bfloat16, "gemmdev") == [
            FlexBwDConfig(64, 128, 128, 64, 3, 8)]  # cuda's sm90 row
        # 2.14 added the sequence length to the forward's arguments
        forward = {"head_dim": 64, "dtype": torch.bfloat16, "device_type": "gemmdev"}
        if "seq_len" in inspect.signature(choices.get_flex_attention_fwd_configs).parameters:
            forward["seq_len"] = 512
        assert choices.get_flex_attention_fwd_configs(**forward) == [FlexConfig(128, 128, 3, 4)]  # sm90, bf16, 64
        assert choices.get_flex_attention_bwd_configs(64, torch.bfloat16, "gemmdev8") == [
            FlexBwDConfig(64, 64, 64, 64, 2, 4)]  # sm8x's
        assert choices.get_flex_attention_bwd_configs(64, torch.bfloat16, "otherdev") == generic
    finally:
        peers.pop("gemmdev"), peers.pop("gemmdev8")
    # outside those heuristics torch.cuda answers as it did
    unwrapped = torch.cuda.get_device_capability.__wrapped__
    if torch.cuda.is_available():
        assert torch.cuda.get_device_capability() == unwrapped()
    else:
        with pytest.raises(Exception) as raised:
            torch.cuda.get_device_capability()
        with pytest.raises(type(raised.value), match=re.escape(str(raised.value))):
            unwrapped()


def test_cudas_flex_configs_compile_and_run_on_the_plugin_device():
    """End to end with cuda's sm90 configs lent to simdev (its compiler is its
    own, so register() lends none): the backward template is generated with
    them, runs and computes the math's gradients."""
    from devbridge.inductor import _torch_api

    if _torch_api.share_config_heuristics(DEVICE, "cuda", lambda: (9, 0)) == "absent":
        pytest.skip(f"torch {torch.__version__} has no InductorChoices.get_config_heuristics")
    peers = torch._inductor.choices.InductorChoices.get_config_heuristics._devbridge_peers
    try:
        q, k, v = qkv(dtype=torch.bfloat16, q_len=128, kv_len=128, dim=64)

        def attention(q, k, v):
            block_mask = create_block_mask(lambda b, h, i, j: i >= j, None, None, 128, 128, device=q.device)
            return flex_attention(q, k, v, block_mask=block_mask)

        out, grads, code, weights = run_forward_backward(attention, (q, k, v))
    finally:
        peers.pop(DEVICE)
    assert_flex_templates(code)
    backward = code[FLEX_BACKWARD_KERNEL.search(code).start():]
    for name, value in (("BLOCK_M1", 64), ("BLOCK_N1", 128), ("BLOCK_M2", 128), ("BLOCK_N2", 64)):
        assert re.search(rf"\b{name} : tl.constexpr = {value}\b", backward), (name, backward[:3000])
    assert_matches((out, grads), reference_forward_backward(causal_sdpa, (q, k, v), weights), 3e-2)


# ---------------------------------------------------------------- SDPA through flex attention

def causal_sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def masked_sdpa(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def scaled_gqa_sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3, enable_gqa=True)


SDPA_CASES = {
    "causal-float32": (causal_sdpa, {}, None, 1e-4),
    "bool-mask": (masked_sdpa, {}, "bool", 1e-4),
    "additive-mask": (masked_sdpa, {}, "float", 1e-4),
    "gqa-scale": (scaled_gqa_sdpa, {"heads": 4, "kv_heads": 2}, None, 1e-4),
    "causal-bfloat16": (causal_sdpa, {"dtype": torch.bfloat16, "q_len": 128, "kv_len": 128}, None, 3e-2),
    # two blocks each way, both ragged: the arithmetic mask's padded blocks
    "causal-ragged": (causal_sdpa, {"q_len": 160, "kv_len": 200}, None, 1e-4),
}


def mask_for(kind, dtype):
    if kind is None:
        return ()
    generator = torch.Generator().manual_seed(5)
    if kind == "bool":  # one row per batch and head, broadcast over both; every row keeps a key
        keep = torch.rand(32, 32, generator=generator) > 0.4
        return (keep | torch.eye(32, dtype=torch.bool),)
    return (torch.randn(1, 2, 32, 32, generator=generator).to(dtype),)


@pytest.mark.parametrize("case", SDPA_CASES, ids=str)
def test_sdpa_runs_the_flex_templates_forward_and_backward(case, sdpa_mode):
    fn, shape, mask_kind, tolerance = SDPA_CASES[case]
    sdpa_mode("always")
    q, k, v = qkv(**shape)
    mask = mask_for(mask_kind, q.dtype)
    out, grads, code, weights = run_forward_backward(fn, (q, k, v), *(m.to(DEVICE) for m in mask))
    assert_flex_templates(code)
    expected = reference_forward_backward(fn, (q, k, v), weights, *(m.float() if m.is_floating_point() else m
                                                                     for m in mask))
    assert_matches((out, grads), expected, tolerance)


@pytest.mark.parametrize("q_len, kv_len", [(128, 128), (512, 512), (256, 1024), (1024, 384), (384, 128),
                                           # ragged: blocks holding padding are partial, never full
                                           (300, 300), (300, 500), (500, 300), (129, 128), (1, 200), (1000, 1000),
                                           (256, 300), (77, 640)])
def test_the_causal_block_mask_in_arithmetic_equals_create_block_mask(q_len, kv_len):
    from devbridge.inductor import causal_mask
    from devbridge.inductor.attention import _causal

    assert causal_mask.takes(q_len, kv_len)
    expected = create_block_mask(_causal, None, None, q_len, kv_len, device=DEVICE)
    actual = causal_mask.causal_block_mask(q_len, kv_len, DEVICE, _causal)
    assert actual.seq_lengths == expected.seq_lengths and actual.BLOCK_SIZE == expected.BLOCK_SIZE
    fields = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks", "q_indices",
              "full_q_num_blocks", "full_q_indices")
    for field in fields:
        got, want = getattr(actual, field), getattr(expected, field)
        assert got.device == want.device and got.dtype == want.dtype, field
        assert torch.equal(got.cpu(), want.cpu()), (field, got, want)
    assert not causal_mask.takes(128, torch.SymInt) and not causal_mask.takes(0, 128) and not causal_mask.takes(128, True)


def test_the_block_mask_of_no_mask_equals_flex_attentions_own():
    from torch.nn.attention.flex_attention import _create_empty_block_mask

    from devbridge.inductor import _torch_api

    q, k = (t.to(DEVICE) for t in qkv(q_len=64, kv_len=96)[:2])
    expected, actual = _create_empty_block_mask(q, k), _torch_api.empty_block_mask(q, k)
    for field in _torch_api._BLOCK_MASK_FIELDS:
        got, want = getattr(actual, field), getattr(expected, field)
        if isinstance(want, torch.Tensor):
            assert got.device == want.device and got.dtype == want.dtype and torch.equal(got.cpu(), want.cpu()), field
        else:
            assert got == want, field


@pytest.mark.parametrize("causal, q_len, kv_len, most_launches", [(True, 128, 128, 6), (False, 128, 128, 6),
                                                                  (True, 160, 200, 11)],
                         ids=["causal", "no-mask", "causal-ragged"])
def test_sdpa_builds_its_block_mask_without_sorting(causal, q_len, kv_len, most_launches, sdpa_mode):
    """create_block_mask sorts the block rows and columns at every call (four
    sorts and about a dozen kernels in the compiled forward), and
    BlockMask.from_kv_blocks, behind flex attention's mask-less default,
    one; devbridge's masks are a few fused elementwise kernels (more where
    a length is not a whole number of blocks: the padded blocks' terms).
    Gradients as the math's."""
    sdpa_mode("always")
    q, k, v = qkv(heads=4, kv_heads=2, q_len=q_len, kv_len=kv_len, dtype=torch.bfloat16)

    def attention(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=0.3, enable_gqa=True)

    out, grads, code, weights = run_forward_backward(attention, (q, k, v))
    assert_flex_templates(code)
    calls = re.sub(r"#.*", "", code)  # the kernels' names, without the comments naming their source ops
    assert not re.search(r"\baten\.sort\b", calls), "create_block_mask's sorts in the graph"
    launches = re.findall(r"^\s+(triton_\w+)\.run\(", calls, flags=re.M)
    assert len(launches) <= most_launches, launches  # forward: the mask's kernels and the template; backward: two
    assert_matches((out, grads), reference_forward_backward(attention, (q, k, v), weights), 3e-2)


def test_fallback_lowers_sdpa_to_flex_where_the_plugin_has_no_fused_kernel(sdpa_mode):
    sdpa_mode("fallback")
    q, k, v = qkv(dtype=torch.float16)
    with sdpa_kernel(WITHOUT_PLUGIN_KERNEL):  # its _fused_sdp_choice answers math
        assert torch._fused_sdp_choice(*(t.to(DEVICE) for t in (q, k, v))) == int(SDPBackend.MATH)
        out, grads, code, weights = run_forward_backward(causal_sdpa, (q, k, v))
    assert_flex_templates(code)
    assert_matches((out, grads), reference_forward_backward(causal_sdpa, (q, k, v), weights), 3e-3)


def test_fallback_keeps_the_plugins_own_fused_kernel(sdpa_mode):
    sdpa_mode("fallback")
    q, k, v = qkv()
    choice = torch._fused_sdp_choice(*(t.to(DEVICE) for t in (q, k, v)), is_causal=True)
    out, code = run_and_get_code(torch.compile(causal_sdpa, fullgraph=True), *(t.to(DEVICE) for t in (q, k, v)))
    code = "\n".join(code)
    if choice == int(SDPBackend.MATH):  # simdev without a fused kernel: flex attention
        assert FLEX_KERNEL.search(code)
    else:  # simdev's kernel (SDPBackend.OVERRIDEABLE) runs it
        assert choice == int(SDPBackend.OVERRIDEABLE) and not FLEX_KERNEL.search(code)
        assert "_scaled_dot_product_fused_attention_overrideable" in code, code
    torch.testing.assert_close(out.cpu(), causal_sdpa(q, k, v), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["off", "always"])
def test_math_decomposition_when_off_or_with_dropout(mode, sdpa_mode):
    # "off": torch's own choice. Dropout: flex attention has none, so even
    # "always" keeps the math decomposition (with dropout 1.0 every weight
    # is dropped: the result is zero on every device).
    sdpa_mode(mode)
    q, k, v = qkv()
    dropout = 1.0 if mode == "always" else 0.0

    def attention(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True)

    with sdpa_kernel(WITHOUT_PLUGIN_KERNEL):
        out, code = run_and_get_code(torch.compile(attention, fullgraph=True), *(t.to(DEVICE) for t in (q, k, v)))
    code = "\n".join(code)
    assert "flex_attention" not in code and "bmm" in code, code[-3000:]
    expected = torch.zeros_like(q) if dropout else causal_sdpa(q, k, v)
    torch.testing.assert_close(out.cpu(), expected, atol=1e-5, rtol=1e-5)


def test_the_switch_chains_and_restores_a_users_pre_grad_pass():
    seen = []

    def users_pass(graph):
        seen.append(len(graph.nodes))

    with torch._inductor.config.patch(pre_grad_custom_pass=users_pass):
        assert devbridge.inductor.sdpa_flex_attention("always") == "off"
        try:
            installed = torch._inductor.config.pre_grad_custom_pass
            assert installed is not users_pass and installed.chained is users_pass
            assert installed.uuid() is None  # the user's pass has none: Inductor runs the chain uncached
            compiled = torch.compile(lambda x: x * 2 + 1, fullgraph=True)
            torch.testing.assert_close(compiled(torch.ones(4, device=DEVICE)).cpu(), torch.full((4,), 3.0))
            assert seen, "the user's pre-grad pass did not run"
        finally:
            assert devbridge.inductor.sdpa_flex_attention("off") == "always"
        assert torch._inductor.config.pre_grad_custom_pass is users_pass


def test_an_unknown_mode_names_the_modes():
    with pytest.raises(ValueError, match="one of off, fallback, always"):
        devbridge.inductor.sdpa_flex_attention("sometimes")
    assert devbridge.inductor.sdpa_flex_attention("off") == "off"

