"""torch.compile(mode="reduce-overhead") on simdev (devbridge/inductor/
graph_capture.py): after one warm-up call each compiled graph is captured
with devbridge.graphs and later calls replay it. Every case compares with
eager across replays with new inputs, and the capture counts prove the
replays happened (a silently uncaptured graph would pass the value checks)."""

from __future__ import annotations

import gc
import logging
import weakref

import pytest
import torch

pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")

from devbridge.inductor import graph_capture_counts  # noqa: E402

from inductor_support import private_inductor, reset_dynamo_around_test  # noqa: E402
from launch_support import skip_without_simdev  # noqa: E402

pytestmark = skip_without_simdev


@pytest.fixture(scope="module", autouse=True)
def inductor_for_simdev(tmp_path_factory):
    with private_inductor(tmp_path_factory.mktemp("inductor-cache")):
        yield


fresh_dynamo = pytest.fixture(autouse=True)(reset_dynamo_around_test)


@pytest.fixture(autouse=True)
def no_delay_left():
    yield
    torch.simdev.set_op_delay_us(0)


def host(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def mlp(x, w1, w2):
    return torch.relu(x @ w1 + 1.0) @ w2


class Counted:
    """Capture counts of this process from here on."""

    def __init__(self):
        self.start = graph_capture_counts()

    def __getitem__(self, what):
        return graph_capture_counts()[what] - self.start[what]


def test_replays_match_eager_with_new_inputs():
    counted = Counted()
    w1, w2 = host(32, 64, seed=0).to("simdev"), host(64, 16, seed=1).to("simdev")
    compiled = torch.compile(mlp, mode="reduce-overhead")
    for seed in range(2, 7):
        x = host(8, 32, seed=seed).to("simdev")
        out = compiled(x, w1, w2)
        torch.testing.assert_close(out.cpu(), mlp(x, w1, w2).cpu())
    # call 1 warms up, call 2 captures and replays, calls 3-5 replay
    assert counted["captures"] == 1 and counted["replays"] == 4, graph_capture_counts()
    assert counted["not_captured"] == 0


def test_outputs_are_overwritten_by_the_next_replay_as_documented():
    w1, w2 = host(32, 64, seed=0).to("simdev"), host(64, 16, seed=1).to("simdev")
    compiled = torch.compile(mlp, mode="reduce-overhead")
    xs = [host(8, 32, seed=seed).to("simdev") for seed in (2, 3, 4)]
    compiled(xs[0], w1, w2)
    kept = compiled(xs[1], w1, w2).clone()  # a kept output is cloned
    overwritten = compiled(xs[1], w1, w2)
    compiled(xs[2], w1, w2)  # replays into the same buffer
    torch.testing.assert_close(kept.cpu(), mlp(xs[1], w1, w2).cpu())
    torch.testing.assert_close(overwritten.cpu(), mlp(xs[2], w1, w2).cpu())


def test_a_new_shape_gets_a_capture_of_its_own():
    counted = Counted()
    w = host(32, 16, seed=0).to("simdev")

    def f(x):
        return torch.tanh(x @ w) * 2.0

    compiled = torch.compile(f, mode="reduce-overhead", dynamic=True)
    for rows in (4, 4, 4, 6, 6, 6, 4):
        x = host(rows, 32, seed=rows).to("simdev")
        torch.testing.assert_close(compiled(x).cpu(), f(x).cpu())
    assert counted["captures"] == 2, graph_capture_counts()
    assert counted["replays"] == 5, graph_capture_counts()


def test_views_at_other_offsets_of_one_storage_replay_the_same_capture():
    # Inputs are copied into the capture's own buffers, so where a view
    # starts in its storage does not matter: one capture serves them all.
    counted = Counted()
    w1, w2 = host(32, 64, seed=0).to("simdev"), host(64, 16, seed=1).to("simdev")
    storage = host(12, 32, seed=2).to("simdev")
    compiled = torch.compile(mlp, mode="reduce-overhead")
    for start in range(5):
        x = storage[start:start + 8]
        torch.testing.assert_close(compiled(x, w1, w2).cpu(), mlp(x, w1, w2).cpu())
    assert counted["captures"] == 1 and counted["replays"] == 4, graph_capture_counts()


def test_expanded_inputs_are_copied_into_their_buffers_on_every_replay():
    # A stride-0 input: its static buffer is expanded too, and copy_ refuses
    # an expanded destination, so each replay copies index 0 of those dims.
    counted = Counted()
    w1, w2 = host(32, 64, seed=0).to("simdev"), host(64, 16, seed=1).to("simdev")
    compiled = torch.compile(mlp, mode="reduce-overhead")
    for seed in range(2, 6):
        x = host(1, 32, seed=seed).to("simdev").expand(8, 32)
        torch.testing.assert_close(compiled(x, w1, w2).cpu(), mlp(x, w1, w2).cpu())
    assert counted["captures"] == 1 and counted["replays"] == 3, graph_capture_counts()


def test_replays_follow_the_current_stream_under_the_delay():
    w1, w2 = host(32, 64, seed=0).to("simdev"), host(64, 16, seed=1).to("simdev")
    compiled = torch.compile(mlp, mode="reduce-overhead")
    x = host(8, 32, seed=2).to("simdev")
    compiled(x, w1, w2)
    compiled(x, w1, w2)  # captured
    side = torch.Stream(device="simdev:0")
    # The replays below share the graph's memory with the one just queued on
    # the default stream: the side stream must come after it, as on
    # torch.cuda (unordered, the two replays race on the graph's buffers).
    side.wait_stream(torch.accelerator.current_stream())
    torch.simdev.set_op_delay_us(2000)
    for seed in (5, 6):
        new = host(8, 32, seed=seed)
        with side:
            x.copy_(new.to("simdev"))  # queued behind the delay on the side stream
            out = compiled(x, w1, w2)  # the replay must wait for the copy on the same stream
            result = out.cpu()
        torch.testing.assert_close(result, mlp(new.to("simdev"), w1, w2).cpu())


def test_two_devices_each_capture_their_own_graph():
    counted = Counted()
    outputs = {}
    for index in (0, 1):
        device = f"simdev:{index}"
        w1, w2 = host(32, 64, seed=0).to(device), host(64, 16, seed=1).to(device)
        compiled = torch.compile(mlp, mode="reduce-overhead")
        for seed in (2, 3, 4):
            x = host(8, 32, seed=seed).to(device)
            outputs[index, seed] = compiled(x, w1, w2).cpu()
            torch.testing.assert_close(outputs[index, seed], mlp(x, w1, w2).cpu())
    assert counted["captures"] == 2 and counted["replays"] == 4, graph_capture_counts()


def test_a_training_step_replays_forward_and_backward_like_eager():
    counted = Counted()

    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to("simdev")

    eager_model, compiled_model = make(), make()
    compiled_forward = torch.compile(compiled_model, mode="reduce-overhead")
    eager_opt = torch.optim.SGD(eager_model.parameters(), lr=0.1)
    compiled_opt = torch.optim.SGD(compiled_model.parameters(), lr=0.1)
    for seed in range(5):
        x, target = host(8, 16, seed=seed).to("simdev"), host(8, 4, seed=seed + 100).to("simdev")
        for model, forward, opt in ((eager_model, eager_model, eager_opt),
                                    (compiled_model, compiled_forward, compiled_opt)):
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(forward(x), target)
            loss.backward()
            opt.step()
        for a, b in zip(eager_model.parameters(), compiled_model.parameters()):
            torch.testing.assert_close(a.cpu(), b.cpu(), rtol=1e-5, atol=1e-6)
    # forward and backward graphs: each captured once, then replayed
    assert counted["captures"] == 2, graph_capture_counts()
    assert counted["replays"] == 8, graph_capture_counts()  # 4 of each


def small_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).to("simdev")


def test_two_modules_of_one_class_each_replay_with_their_own_parameters():
    """Dynamo serves both modules with one compiled graph (parameters are its
    inputs); a capture reads the parameters where they were at the capture,
    so each module's parameters get a capture of their own."""
    counted = Counted()
    first, second = small_model(0), small_model(1)
    compiled = [torch.compile(model, mode="reduce-overhead") for model in (first, second)]
    with torch.no_grad():
        for seed in range(2, 6):
            x = host(4, 16, seed=seed).to("simdev")
            for model, forward in zip((first, second), compiled):
                torch.testing.assert_close(forward(x).cpu(), model(x).cpu())
    assert counted["captures"] == 2 and counted["not_captured"] == 0, graph_capture_counts()
    # the first call warms the graph up for both; the second module's first call captures at once
    assert counted["replays"] == 7, graph_capture_counts()


def test_a_parameter_replaced_by_another_tensor_is_captured_again_up_to_inductors_limit(caplog):
    from torch._inductor import config

    counted = Counted()
    model = small_model(0)
    compiled = torch.compile(model, mode="reduce-overhead")
    x = host(4, 16, seed=2).to("simdev")
    with torch.no_grad(), config.patch({"triton.cudagraph_unexpected_rerecord_limit": 2}), \
            caplog.at_level(logging.WARNING, logger="devbridge.inductor"):
        for replacement in range(4):
            for _ in range(2):
                torch.testing.assert_close(compiled(x).cpu(), model(x).cpu())
            model[0].weight = torch.nn.Parameter(host(32, 16, seed=10 + replacement).to("simdev"))
    assert counted["captures"] == 2, graph_capture_counts()
    assert "its parameters or other static inputs moved, or its earlier outputs were still in use, 2 times" in caplog.text, caplog.text
    assert counted["not_captured"] == 1, graph_capture_counts()


def test_a_capture_does_not_keep_a_replaced_parameter_alive():
    model = small_model(0)
    compiled = torch.compile(model, mode="reduce-overhead")
    x = host(4, 16, seed=2).to("simdev")
    with torch.no_grad():
        for _ in range(3):
            compiled(x)  # warm-up, capture, replay
        replaced = weakref.ref(model[0].weight)
        model[0].weight = torch.nn.Parameter(host(32, 16, seed=10).to("simdev"))
        torch.testing.assert_close(compiled(x).cpu(), model(x).cpu())  # a capture for the new one
    gc.collect()
    assert replaced() is None, gc.get_referrers(replaced())


def test_random_numbers_are_not_captured_and_say_so(caplog):
    counted = Counted()

    def f(x):
        return torch.nn.functional.dropout(x * 2.0, p=0.5, training=True)

    compiled = torch.compile(f, mode="reduce-overhead")
    x = torch.ones(256, device="simdev")
    with caplog.at_level(logging.WARNING, logger="devbridge.inductor"):
        masks = [compiled(x).cpu() for _ in range(3)]
    assert "runs this graph without graph capture: it draws random numbers" in caplog.text, caplog.text
    assert counted["captures"] == 0 and counted["not_captured"] >= 1
    assert not all(torch.equal(masks[0], m) for m in masks[1:]), "every call drew the same mask"


def test_an_operator_that_synchronises_is_refused_by_the_plugin_and_runs_as_compiled(caplog):
    counted = Counted()

    def f(x):
        return torch.linalg.inv(x @ x.T + torch.eye(4, device=x.device) * 4.0) * 2.0

    compiled = torch.compile(f, mode="reduce-overhead")
    with caplog.at_level(logging.WARNING, logger="devbridge.inductor"):
        for seed in (1, 2, 3):
            x = host(4, 4, seed=seed).to("simdev")
            torch.testing.assert_close(compiled(x).cpu(), f(x).cpu(), rtol=1e-4, atol=1e-5)
    assert "the plugin refused the capture" in caplog.text and "cannot be captured" in caplog.text, caplog.text
    assert counted["captures"] == 0 and counted["not_captured"] == 1


def test_gradients_kept_from_autograd_grad_survive_later_replays():
    w = host(32, 16, seed=0).to("simdev").requires_grad_()

    def loss_of(x):
        return torch.tanh(x @ w).square().sum()

    compiled = torch.compile(loss_of, mode="reduce-overhead")
    kept, expected = [], []
    for seed in range(1, 6):
        x = host(8, 32, seed=seed).to("simdev")
        (grad,) = torch.autograd.grad(compiled(x), [w])
        kept.append(grad)  # held while the backward graph replays again
        (eager,) = torch.autograd.grad(loss_of(x), [w])
        expected.append(eager.cpu())
    for grad, eager in zip(kept, expected):
        torch.testing.assert_close(grad.cpu(), eager, rtol=1e-5, atol=1e-6)


def test_gradients_go_into_grad_without_a_copy():
    # A backward replay hands out new tensors over the graph's memory and keeps
    # no reference to them, so autograd takes each gradient into .grad as it
    # is. Were the capture to keep a reference, AccumulateGrad would copy every
    # weight gradient into fresh memory at every step (1 MiB here).
    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                                   torch.nn.Linear(512, 256)).to("simdev")

    counted = Counted()
    eager_model, model = make(), make()
    compiled = torch.compile(model, mode="reduce-overhead")
    weight_bytes = sum(p.nbytes for p in model.parameters() if p.dim() == 2)
    for seed in range(5):
        x = host(8, 256, seed=seed).to("simdev")
        for m, forward in ((eager_model, eager_model), (model, compiled)):
            m.zero_grad(set_to_none=True)
            loss = forward(x).square().mean()
            before = torch.simdev.memory_allocated()
            loss.backward()
        if seed >= 2:  # replays
            grown = torch.simdev.memory_allocated() - before
            assert grown < weight_bytes // 4, (grown, weight_bytes)
        for a, b in zip(eager_model.parameters(), model.parameters()):
            torch.testing.assert_close(b.grad.cpu(), a.grad.cpu(), rtol=1e-5, atol=1e-6)
    assert counted["captures"] == 2, graph_capture_counts()


def test_gradients_kept_across_steps_survive_later_replays():
    # Each step's .grad, kept: the memory it took from the backward graph is
    # still in use when the graph replays again, so that call replays another
    # capture of the graph instead of overwriting it.
    eager_model, model = small_model(0), small_model(0)
    compiled = torch.compile(model, mode="reduce-overhead")
    kept, expected = [], []
    for seed in range(6):
        x = host(8, 16, seed=seed).to("simdev")
        for m, forward in ((eager_model, eager_model), (model, compiled)):
            m.zero_grad(set_to_none=True)
            forward(x).square().mean().backward()
        kept.append([p.grad for p in model.parameters()])
        expected.append([p.grad.cpu() for p in eager_model.parameters()])
    for grads, eager in zip(kept, expected):
        for grad, reference in zip(grads, eager):
            torch.testing.assert_close(grad.cpu(), reference, rtol=1e-5, atol=1e-6)


def test_gradients_accumulated_over_steps_match_eager():
    # .grad kept from one backward to the next (no zero_grad): the first
    # replay's gradient, taken as it is, is moved out before the graph replays
    # again, and the later ones are added into it.
    eager_model, model = small_model(0), small_model(0)
    compiled = torch.compile(model, mode="reduce-overhead")
    for seed in range(5):
        x = host(8, 16, seed=seed).to("simdev")
        eager_model(x).square().mean().backward()
        compiled(x).square().mean().backward()
    for a, b in zip(eager_model.parameters(), model.parameters()):
        torch.testing.assert_close(b.grad.cpu(), a.grad.cpu(), rtol=1e-5, atol=1e-6)


def adamw_after_steps(mode: str | None, steps: int = 4, **options):
    """A small model's parameters after `steps` AdamW steps on simdev, the
    step eager (mode None) or compiled with `mode`; and the optimizer."""
    model = small_model(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True, **options)
    step = optimizer.step if mode is None else torch.compile(optimizer.step, mode=mode)
    for seed in range(steps):
        x = host(8, 16, seed=seed).to("simdev")
        optimizer.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        step()
    return [p.detach().cpu() for p in model.parameters()], optimizer


def test_an_optimizer_step_whose_step_counts_live_on_the_cpu_runs_uncaptured_and_says_so(caplog):
    """torch.compile makes an optimizer capturable for cuda and xpu parameters
    only: on a plugin device AdamW's step counts stay CPU tensors, and with
    graph partitions its update kernel takes their values as arguments, read
    on the host. A capture would keep the values of its own step (the bias
    corrections of every later step wrong by up to 1e-2 here): not captured."""
    expected, _ = adamw_after_steps(None)
    counted = Counted()
    with caplog.at_level(logging.WARNING, logger="devbridge.inductor"):
        got, optimizer = adamw_after_steps("reduce-overhead")
    assert optimizer.state[optimizer.param_groups[0]["params"][0]]["step"].device.type == "cpu"
    for a, b in zip(expected, got):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    assert counted["not_captured"] >= 1 and counted["replays"] == 0, graph_capture_counts()
    # torch without graph partitions turns capture off for the CPU nodes itself
    assert "reads on the host" in caplog.text or "cpu device" in caplog.text, caplog.text
    if "reads on the host" in caplog.text:
        assert "pass capturable=True to capture its step" in caplog.text


def test_a_capturable_optimizer_step_is_captured_and_matches_eager():
    expected, _ = adamw_after_steps(None, capturable=True)
    counted = Counted()
    got, optimizer = adamw_after_steps("reduce-overhead", capturable=True)
    assert optimizer.state[optimizer.param_groups[0]["params"][0]]["step"].device.type == "simdev"
    for a, b in zip(expected, got):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    # step 1 warms up, step 2 captures and replays, steps 3-4 replay
    assert counted["captures"] >= 1 and counted["replays"] >= 3 and counted["not_captured"] == 0, \
        graph_capture_counts()


def test_a_graph_handed_a_tensor_of_another_accelerator_runs_uncaptured_naming_it(caplog):
    """The refusal's other branch: a graph input on a device that is neither
    the plugin's nor the CPU. This machine has no second accelerator, so a
    meta tensor stands in for one, handed straight to the wrapper devbridge
    puts around a compiled graph (graph_capture._Graphified); the graph runs
    as compiled on every call, and one warning names the tensor and why."""
    from devbridge.inductor import graph_capture

    calls = []

    def compiled_graph(inputs):
        calls.append([x.device.type for x in inputs])
        return [inputs[0] * 2]

    wrapper = graph_capture._Graphified("simdev", compiled_graph, static_input_idxs=(), mutated_input_idxs=())
    counted = Counted()
    x = host(4, 8, seed=0).to("simdev")
    with caplog.at_level(logging.WARNING, logger="devbridge.inductor"):
        results = [wrapper([x, torch.empty(3, device="meta")]) for _ in range(3)]
    assert calls == [["simdev", "meta"]] * 3
    for (result,) in results:
        torch.testing.assert_close(result.cpu(), x.cpu() * 2)
    assert counted["captures"] == 0 and counted["replays"] == 0 and counted["not_captured"] == 1, \
        graph_capture_counts()
    assert "tensor on meta, whose work a capture on simdev cannot record" in caplog.text, caplog.text
