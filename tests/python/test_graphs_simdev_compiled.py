"""What torch.compile(mode="reduce-overhead") will build on (issue 21): a
function compiled by Inductor for simdev (Triton kernels through devbridge's
launcher, on the current stream) captured after warm-up with static inputs,
replayed with new inputs, equal to eager every time."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")

from devbridge import graphs  # noqa: E402

from inductor_support import private_inductor, reset_dynamo_around_test  # noqa: E402
from launch_support import skip_without_simdev  # noqa: E402

pytestmark = skip_without_simdev


@pytest.fixture(scope="module", autouse=True)
def inductor_for_simdev(tmp_path_factory):
    with private_inductor(tmp_path_factory.mktemp("inductor-cache")):
        yield


fresh_dynamo = pytest.fixture(autouse=True)(reset_dynamo_around_test)


def mlp_step(x, w1, w2):
    hidden = torch.relu(x * w1 + 1.0)
    return (hidden * w2).exp() * 0.5 + x


def test_a_compiled_function_captured_after_warm_up_replays_like_eager():
    compiled = torch.compile(mlp_step)
    generator = torch.Generator().manual_seed(0)
    static_x = torch.randn(512, generator=generator).to("simdev")
    w1, w2 = (torch.randn(512, generator=generator).to("simdev") * 0.1 for _ in range(2))
    compiled(static_x, w1, w2)  # warm-up: compile and autotune outside the capture
    g = graphs.Graph()
    with graphs.graph(g):
        static_out = compiled(static_x, w1, w2)
    for seed in (1, 2, 3):
        x = torch.randn(512, generator=torch.Generator().manual_seed(seed))
        static_x.copy_(x)
        g.replay()
        torch.testing.assert_close(static_out.cpu(), mlp_step(x.to("simdev"), w1, w2).cpu())
    g.reset()
