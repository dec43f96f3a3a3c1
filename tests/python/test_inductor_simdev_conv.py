"""torch.compile trains a small conv net on simdev. Inductor keeps convolution
as an extern kernel (aten.convolution forward, aten.convolution_backward in
the backward graph), so the compiled graphs call simdev's convolution ops
(plugins/simdev/csrc/ops/Convolution.cpp) between its Triton kernels
(batch norm, ReLU, pooling: run by Triton's interpreter, hence tiny shapes).
The losses, parameters and batch-norm statistics of a few SGD steps are
compared with the same steps in eager mode on the CPU and on simdev."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")

from torch._inductor.utils import run_and_get_code  # noqa: E402

import compile_cases as cases  # noqa: E402
from inductor_support import private_inductor, reset_dynamo_around_test  # noqa: E402
from launch_support import skip_without_simdev  # noqa: E402

pytestmark = skip_without_simdev
DEVICE = "simdev"
STEPS = 3


@pytest.fixture(scope="module", autouse=True)
def inductor_for_simdev(tmp_path_factory):
    with private_inductor(tmp_path_factory.mktemp("inductor-cache")):
        yield


fresh_dynamo = pytest.fixture(autouse=True)(reset_dynamo_around_test)


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(4)
        self.conv2 = torch.nn.Conv2d(4, 6, 3, stride=2, bias=False)
        self.head = torch.nn.Linear(6, 5)

    def forward(self, x):
        x = F.relu(self.norm(self.conv1(x)))
        x = F.adaptive_avg_pool2d(self.conv2(x), 1)
        return self.head(x.flatten(1))


def make_model(device):
    torch.manual_seed(0)
    return ConvNet().to(device)


def train(model, step, x, target):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(step(x), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses).cpu()


def assert_same_state(model, reference, keys=None, atol=1e-4, rtol=1e-4):
    state, expected = model.state_dict(), reference.state_dict()
    assert state.keys() == expected.keys()
    for key in keys or expected:
        assert state[key].device.type == DEVICE, key
        torch.testing.assert_close(state[key].cpu(), expected[key].cpu(), atol=atol, rtol=rtol, msg=key)


def test_compiled_conv_net_trains_like_eager_on_a_side_stream_in_order():
    """Trained on a non-default stream with every queued operation delayed: a
    convolution (or a kernel) that ran off the caller's stream, or out of
    order, would read stale activations or gradients and change the numbers."""
    x = cases._randn(2, 3, 8, 8, seed=1)
    target = torch.tensor([1, 4])

    cpu_model = make_model("cpu")
    expected_losses = train(cpu_model, cpu_model, x, target)

    eager_model = make_model(DEVICE)
    eager_losses = train(eager_model, eager_model, x.to(DEVICE), target.to(DEVICE))

    model = make_model(DEVICE)
    compiled = torch.compile(model, fullgraph=True)
    stream = torch.Stream(device=f"{DEVICE}:0")
    with stream, torch.simdev.op_delay(500):
        losses, code = run_and_get_code(train, model, compiled, x.to(DEVICE), target.to(DEVICE))
    code = "\n".join(code)

    # Both graphs were compiled and call the convolutions as extern kernels
    # (so simdev's ops run inside them), beside Triton kernels for simdev.
    assert "extern_kernels.convolution(" in code, code[:3000]
    assert "aten.convolution_backward" in code, code[:3000]
    assert "@triton.jit" in code and "devbridge_worker.prepare('simdev'" in code
    assert "cpp_fused" not in code, "a CPU kernel in a simdev graph"

    torch.testing.assert_close(losses, expected_losses, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(eager_losses, expected_losses, atol=1e-5, rtol=1e-5)
    assert losses[-1] < losses[0], losses  # it learns
    assert_same_state(model, cpu_model)  # parameters and batch-norm statistics
    # Eager batch norm on simdev leaves the running statistics as they were:
    # aten.native_batch_norm reaches simdev through the CPU fallback, and its
    # schema does not mark running_mean/running_var as written, so the
    # fallback does not copy them back. Compare the parameters only.
    assert_same_state(model, eager_model, keys=[name for name, _ in model.named_parameters()])


def test_channels_last_layout_optimization_keeps_convolutions_channels_last():
    """Inductor's layout optimization (channels-last activations around every
    convolution, as it does on GPUs) traces simdev's convolutions with the
    layout they really return (devbridge.inductor.declare_convolution_format):
    a graph asserts their results channels-last and needs no copy into a
    contiguous layout between a convolution and the next kernel."""
    from torch._inductor import config

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(4, 8, 3, padding=1, bias=False)
            self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)

        def forward(self, x):
            return self.conv2(F.relu(self.conv1(x))) + 1

    torch.manual_seed(0)
    block = Block().eval()
    x = cases._randn(2, 4, 6, 6, seed=2)
    expected = block(x)
    block = block.to(DEVICE)
    with torch.no_grad(), config.patch(force_layout_optimization=True):
        out, code = run_and_get_code(torch.compile(block, fullgraph=True), x.to(DEVICE))
    code = "\n".join(code)
    torch.testing.assert_close(out.cpu(), expected, atol=1e-5, rtol=1e-5)
    # The first convolution's result, (2, 8, 6, 6), asserted in channels-last strides.
    assert "(2, 8, 6, 6), (288, 1, 48, 8)" in code, code[:4000]
