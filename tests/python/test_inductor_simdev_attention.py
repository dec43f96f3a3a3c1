"""torch.compile of scaled_dot_product_attention on a plugin with a fused
kernel of its own (simdev's, plugins/simdev/csrc/ops/Attention.cpp): the
compiled graph calls the plugin's _scaled_dot_product_fused_attention_overrideable
and its backward (Inductor keeps them as fallback kernels under its
sdpa_constraint), not the math decomposition; results and gradients equal
eager's; reduce-overhead captures and replays forward and backward (the
fused ops are tagged random for their dropout alone: with dropout_p=0 they
draw nothing), and a graph with attention dropout is refused capture, saying
why."""

from __future__ import annotations

import logging

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")

from devbridge.inductor import graph_capture_counts  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402

import compile_cases as cases  # noqa: E402
from inductor_support import private_inductor, reset_dynamo_around_test  # noqa: E402
from launch_support import skip_without_simdev  # noqa: E402

pytestmark = skip_without_simdev
FUSED = "aten._scaled_dot_product_fused_attention_overrideable.default("
FUSED_BACKWARD = "aten._scaled_dot_product_fused_attention_overrideable_backward.default("


@pytest.fixture(scope="module", autouse=True)
def inductor_for_simdev(tmp_path_factory):
    with private_inductor(tmp_path_factory.mktemp("inductor-cache")):
        yield


fresh_dynamo = pytest.fixture(autouse=True)(reset_dynamo_around_test)


def host(*shape, seed, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def test_compiled_attention_calls_the_plugins_fused_kernel_forward_and_backward():
    torch.manual_seed(0)
    block = cases.AttentionBlock()
    reference = cases.AttentionBlock()
    reference.load_state_dict(block.state_dict())
    block.to("simdev")
    x = host(2, 16, 32, seed=1)

    compiled = torch.compile(block, fullgraph=True)
    out, code = run_and_get_code(lambda t: compiled(t).sum().backward() or compiled(t), x.to("simdev"))
    code = "\n".join(code)
    assert FUSED in code and FUSED_BACKWARD in code, code[:3000]
    assert "extern_kernels.bmm" not in code, "the math decomposition's bmm in a graph with a fused kernel"

    expected = reference(x)
    expected.sum().backward()
    torch.testing.assert_close(out.detach().cpu(), expected.detach(), rtol=1e-4, atol=1e-4)
    for (name, param), ref in zip(block.named_parameters(), reference.parameters()):
        # the lambda ran backward once, before the second forward
        torch.testing.assert_close(param.grad.cpu(), ref.grad, rtol=1e-4, atol=1e-4, msg=name)


def test_compiled_bfloat16_attention_with_a_mask_matches_eager():
    q, k, v = (host(2, 4, 16, 8, seed=s, dtype=torch.bfloat16).to("simdev").requires_grad_(True) for s in (1, 2, 3))
    mask = (host(16, 16, seed=4) > -0.5).to("simdev")

    def attend(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.25) * 2.0

    out, code = run_and_get_code(torch.compile(attend, fullgraph=True), q, k, v, mask)
    assert FUSED in "\n".join(code)
    torch.testing.assert_close(out.cpu(), attend(q, k, v, mask).cpu(), rtol=2e-2, atol=2e-2)


def test_reduce_overhead_captures_and_replays_a_training_step_with_attention():
    start = graph_capture_counts()
    torch.manual_seed(0)
    block = cases.AttentionBlock().to("simdev")
    reference = cases.AttentionBlock().to("simdev")
    reference.load_state_dict(block.state_dict())
    compiled = torch.compile(block, mode="reduce-overhead")
    for seed in range(2, 6):
        x = host(2, 16, 32, seed=seed).to("simdev")
        loss = compiled(x).square().mean()
        loss.backward()
        expected = reference(x).square().mean()
        expected.backward()
        torch.testing.assert_close(loss.detach().cpu(), expected.detach().cpu(), rtol=1e-5, atol=1e-5)
    for param, ref in zip(block.parameters(), reference.parameters()):
        torch.testing.assert_close(param.grad.cpu(), ref.grad.cpu(), rtol=1e-4, atol=1e-4)
    counts = graph_capture_counts()
    # forward and backward: each warmed up once, captured once, then replayed
    assert counts["captures"] - start["captures"] == 2, counts
    assert counts["replays"] - start["replays"] >= 4, counts
    assert counts["not_captured"] == start["not_captured"], counts


def test_attention_dropout_is_not_captured_and_says_so(caplog):
    q = host(2, 2, 8, 16, seed=1).to("simdev")

    def attend(q):
        return F.scaled_dot_product_attention(q, q, q, dropout_p=0.5) * 2.0

    with caplog.at_level(logging.WARNING):
        compiled = torch.compile(attend, mode="reduce-overhead")
        for _ in range(3):
            compiled(q)
    assert "runs this graph without graph capture: it draws random numbers" in caplog.text, caplog.text


def test_dynamic_shapes_keep_the_fused_kernel():
    """With symbolic sizes (dynamic=True) the plugin's choice still answers
    (it compares SymInts), and one graph serves several lengths."""

    def attend(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True) * 2.0

    compiled = torch.compile(attend, dynamic=True, fullgraph=True)
    for length in (8, 12, 16):
        q, k, v = (host(1, 2, length, 8, seed=s).to("simdev") for s in (1, 2, 3))
        out, code = run_and_get_code(compiled, q, k, v)
        if code:
            assert FUSED in "\n".join(code)
        torch.testing.assert_close(out.cpu(), attend(q, k, v).cpu(), rtol=1e-5, atol=1e-5)
