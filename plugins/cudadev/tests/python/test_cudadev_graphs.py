"""Graph capture on cudadev through devbridge.graphs: cudadev's graph table
(csrc/graphs.cpp, at::cuda::CUDAGraph on cudadev's own streams). Each
captured sequence is compared with eager cudadev and with torch.cuda.graph
on torch.cuda tensors; order is proven against a spin queued on the replay
stream; capture errors are checked by message."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.gpu

devbridge = pytest.importorskip("devbridge")
graphs = pytest.importorskip("devbridge.graphs", reason="devbridge without graph capture")

SPIN_MS = 200


def host(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def step(x, w):
    """Operators through cudadev's own kernels (mm) and its fallback (gelu,
    add, softmax), allocating intermediates inside the capture."""
    h = torch.nn.functional.gelu(x @ w + 1.0)
    return torch.softmax(h, dim=-1) * 2.0


def test_cudadev_registers_its_graph_table():
    assert graphs.is_available("cudadev")


def test_replays_match_eager_and_torch_cuda_graphs_with_mutated_inputs():
    x_host, w_host = host(64, 128, seed=0), host(128, 96, seed=1)
    static_x, w = x_host.to("cudadev"), w_host.to("cudadev")
    step(static_x, w)  # warm-up outside the capture (cuBLAS handles, workspaces)
    torch.cudadev.synchronize()
    g = graphs.Graph()
    with graphs.graph(g):
        static_y = step(static_x, w)

    cuda_x, cuda_w = x_host.cuda(), w_host.cuda()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step(cuda_x, cuda_w)
    torch.cuda.current_stream().wait_stream(side)
    cuda_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(cuda_graph):
        cuda_y = step(cuda_x, cuda_w)

    for seed in range(2, 6):
        new_x = host(64, 128, seed=seed)
        static_x.copy_(new_x)
        g.replay()
        cuda_x.copy_(new_x)
        cuda_graph.replay()
        eager = step(new_x.to("cudadev"), w)
        assert torch.equal(static_y.cpu(), cuda_y.cpu()), seed
        torch.testing.assert_close(static_y.cpu(), eager.cpu(), rtol=1e-5, atol=1e-6)
    g.reset()
    cuda_graph.reset()


def test_a_triton_kernel_is_captured_and_replayed():
    triton = pytest.importorskip("triton")
    import triton.language as tl

    import devbridge.triton

    @triton.jit
    def axpy(x, y, out, n, alpha, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out + offs, alpha * tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)

    n = 10_000
    with devbridge.triton.activate():
        x, y = host(n, seed=0).to("cudadev"), host(n, seed=1).to("cudadev")
        out = torch.empty_like(x)
        grid = (triton.cdiv(n, 1024),)
        axpy[grid](x, y, out, n, 3.0, BLOCK=1024)  # compiles outside the capture
        torch.cudadev.synchronize()
        g = graphs.Graph()
        with graphs.graph(g):
            axpy[grid](x, y, out, n, 3.0, BLOCK=1024)
            doubled = out * 2.0
        reference = torch.empty_like(x)
        for seed in (5, 6):
            x.copy_(host(n, seed=seed).to("cudadev"))
            g.replay()
            # the same kernel launched without capture (the GPU fuses the
            # multiply-add, so a CPU computation may differ in the last bit)
            axpy[grid](x, y, reference, n, 3.0, BLOCK=1024)
            assert torch.equal(out.cpu(), reference.cpu())
            assert torch.equal(doubled.cpu(), reference.cpu() * 2.0)
            torch.testing.assert_close(out.cpu(), 3.0 * x.cpu() + y.cpu())
        g.reset()


def test_replay_runs_in_order_on_a_non_default_stream():
    x = torch.ones(1 << 20, device="cudadev")
    y = torch.zeros_like(x)
    x * 3.0  # warm-up
    g = graphs.Graph()
    with graphs.graph(g):
        y.copy_(x * 3.0)
    torch.cudadev.synchronize()
    stream = torch.Stream(device="cudadev")
    with stream:
        torch.cudadev._sleep_on_current_stream(0)
        stream.synchronize()
        torch.cudadev._sleep_on_current_stream(SPIN_MS)
        x.fill_(5.0)  # queued behind the spin
        g.replay(stream)  # must read x only after the fill
    stream.synchronize()
    assert torch.all(y.cpu() == 15.0)
    g.reset()


def test_memory_allocated_in_the_capture_outlives_eager_allocations():
    x = torch.randn(1 << 16, device="cudadev")
    torch.exp(x)
    g = graphs.Graph()
    with graphs.graph(g):
        out = torch.exp(x) + 1.0
    expected = (torch.exp(x) + 1.0).cpu()
    # Eager work on the same device allocates and frees a lot; none of it may
    # land in the capture's memory.
    for _ in range(20):
        junk = torch.randn(1 << 16, device="cudadev") * 7.0
        del junk
    g.replay()
    assert torch.equal(out.cpu(), expected)
    g.reset()


def test_a_synchronisation_inside_the_capture_is_refused_and_ends_it():
    x = torch.ones(16, device="cudadev")
    g = graphs.Graph()
    with pytest.raises(Exception) as info:
        with graphs.graph(g):
            (x + 1).sum().item()  # copies to the host: cannot be captured
    assert "captur" in str(info.value).lower(), info.value
    assert not graphs.is_current_stream_capturing("cudadev")
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        g.replay()
    # The device works afterwards, and the same Graph captures again.
    assert (x + 1).sum().item() == 32.0
    with graphs.graph(g):
        y = x * 4.0
    g.replay()
    assert torch.all(y.cpu() == 4.0)
    g.reset()


def test_is_current_stream_capturing_inside_and_outside():
    g = graphs.Graph()
    assert not graphs.is_current_stream_capturing("cudadev")
    x = torch.ones(4, device="cudadev")
    with graphs.graph(g):
        inside = graphs.is_current_stream_capturing("cudadev")
        y = x + 1
    assert inside
    assert not graphs.is_current_stream_capturing("cudadev")
    g.replay()
    assert torch.all(y.cpu() == 2.0)
    g.reset()


def test_reduce_overhead_compiles_capture_and_replay_on_cudadev():
    pytest.importorskip("triton")
    from devbridge.inductor import graph_capture_counts

    start = graph_capture_counts()
    w1, w2 = host(64, 128, seed=0).to("cudadev"), host(128, 32, seed=1).to("cudadev")

    def mlp(x):
        return torch.relu(x @ w1 + 1.0) @ w2

    compiled = torch.compile(mlp, mode="reduce-overhead")
    for seed in range(2, 7):
        x = host(16, 64, seed=seed).to("cudadev")
        torch.testing.assert_close(compiled(x).cpu(), mlp(x).cpu(), rtol=1e-4, atol=1e-4)
    now = graph_capture_counts()
    assert now["captures"] - start["captures"] == 1, now
    assert now["replays"] - start["replays"] == 4, now


def test_reduce_overhead_on_cudadev_matches_reduce_overhead_on_cuda():
    """The same function compiled with mode="reduce-overhead" for cuda
    (Inductor's CUDA graph trees) and for cudadev (devbridge's capture): the
    same results, replay after replay, with new inputs copied in each time."""
    pytest.importorskip("triton")
    from devbridge.inductor import graph_capture_counts

    w1_host, w2_host = host(64, 128, seed=10), host(128, 32, seed=11)

    def compiled_on(device):
        w1, w2 = w1_host.to(device), w2_host.to(device)

        def mlp(x):
            return torch.relu(x @ w1 + 1.0) @ w2

        return torch.compile(mlp, mode="reduce-overhead")

    start = graph_capture_counts()
    on_cuda, on_cudadev = compiled_on("cuda"), compiled_on("cudadev")
    with torch.no_grad():
        for seed in range(12, 17):
            x = host(16, 64, seed=seed)
            torch.compiler.cudagraph_mark_step_begin()
            expected = on_cuda(x.to("cuda")).cpu()
            torch.testing.assert_close(on_cudadev(x.to("cudadev")).cpu(), expected, rtol=1e-5, atol=1e-5)
    now = graph_capture_counts()
    assert now["captures"] - start["captures"] == 1, now
    assert now["replays"] - start["replays"] == 4, now


@pytest.mark.parametrize("capturable", [False, True], ids=["adamw_defaults", "adamw_capturable"])
def test_a_compiled_adamw_step_under_reduce_overhead_matches_cuda(capturable):
    """torch.compile makes AdamW capturable for cuda parameters only. On
    cudadev its step counts stay CPU tensors unless it is built
    capturable=True, and devbridge runs that step's graph uncaptured (a
    capture would keep the step values read at the capture); built capturable
    it is captured. Either way the parameters follow cuda's, step by step.
    The gradients are made on the host, the same for both devices: a
    torch.cuda backward beside a PrivateUse1 backend trips torch 2.11's
    autograd engine (test_cudadev_ops.py)."""
    pytest.importorskip("triton")
    from devbridge.inductor import graph_capture_counts

    def parameters_after_steps(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).to(device)
        options = {"capturable": True} if capturable else {}
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True, **options)
        optimizer_step = torch.compile(optimizer.step, mode="reduce-overhead")
        for step in range(4):
            for i, parameter in enumerate(model.parameters()):
                parameter.grad = host(*parameter.shape, seed=100 * step + i).to(device)
            optimizer_step()
        return [p.detach().cpu() for p in model.parameters()]

    start = graph_capture_counts()
    on_cudadev = parameters_after_steps("cudadev")
    now = graph_capture_counts()
    on_cuda = parameters_after_steps("cuda")
    for expected, got in zip(on_cuda, on_cudadev):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
    if capturable:
        assert now["replays"] - start["replays"] >= 2 and now["not_captured"] == start["not_captured"], now
    else:
        assert now["not_captured"] - start["not_captured"] >= 1, now
