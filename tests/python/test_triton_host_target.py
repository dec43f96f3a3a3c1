"""The host-memory Triton target any plugin can declare (issue #39):

    devbridge.triton.declare_hardware("<device>", compiler="interpreter", kernel_runtime="host")

Triton's interpreter runs the kernel's programs on the launching thread, over
the plugin's host memory in place, ordered on the plugin's current stream
through its c10 device guard alone (the work queued there is waited for, the
kernel runs, later work follows the launch's return).

simdev declares it here instead of its own target (restored after each
test): its streams are asynchronous and its delay knob holds each operation
back, so work queued before a kernel is still pending when the kernel is
launched, and work queued after it is queued before the kernel's output is
read: the results prove the ordering. Each program's thread is recorded, so
the tests also prove the host runtime ran the kernel (simdev's own runtime
runs programs on its stream workers).
"""

from __future__ import annotations

import threading

import pytest
import torch

triton = pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")
import triton.language as tl  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402

import devbridge  # noqa: E402
import devbridge.triton  # noqa: E402

from inductor_support import private_inductor, reset_dynamo_around_test  # noqa: E402
from launch_support import PACKED, run, skip_without_simdev  # noqa: E402
from triton_aot_kernels import add_kernel as scale_add  # noqa: E402  (out = x * alpha + y)

pytestmark = skip_without_simdev


@triton.jit
def copy_rows(src_ptr, dst_ptr, rows, cols, BLOCK: tl.constexpr):
    row = tl.program_id(1)
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = (offsets < cols) & (row < rows)
    tl.store(dst_ptr + row * cols + offsets, tl.load(src_ptr + row * cols + offsets, mask=mask) + 1.0, mask=mask)


@pytest.fixture
def host_target():
    """simdev served by the host target; its own declaration restored after."""
    before = devbridge.triton.declared("simdev")
    declared = devbridge.triton.declare_hardware("simdev", compiler="interpreter", kernel_runtime="host")
    try:
        with devbridge.triton.activate():
            yield declared
    finally:
        torch.accelerator.synchronize()
        torch.simdev.set_op_delay_us(0)
        if before is not None:
            devbridge.triton.declare_hardware("simdev", compiler=before.compiler, kernel_runtime=before.kernel_runtime)


@pytest.fixture
def program_threads(monkeypatch):
    """The thread of every interpreted program run from now on."""
    from devbridge.triton.interpreter import interpreter

    threads = []
    run_program = interpreter.run_program

    def observed(*args):
        threads.append(threading.get_ident())
        return run_program(*args)

    monkeypatch.setattr(interpreter, "run_program", observed)
    return threads


def test_the_declaration_names_devbridges_interpreter_compiler_and_the_host_runtime(host_target):
    from devbridge import _C
    from devbridge.triton.interpreter.compiler import InterpreterBackend

    assert host_target.compiler == "interpreter" and host_target.kernel_runtime == "host"
    assert host_target.compiler_backend() == (InterpreterBackend, None)
    runtime = devbridge.triton.driver().kernel_runtime()
    assert _C.kernel_runtime_name(runtime) == "host"
    assert _C.kernel_runtime_device_properties(runtime, 0)["arch"] == 0


def test_kernel_results_computed_on_the_launching_thread(host_target, program_threads):
    n = 100
    x = torch.arange(n, dtype=torch.float32, device="simdev")
    y = torch.full((n,), 0.5, device="simdev")
    out = torch.empty(n, device="simdev")
    scale_add[(triton.cdiv(n, 32),)](x, y, out, n, 2.0, BLOCK=32)
    assert torch.equal(out.cpu(), torch.arange(n, dtype=torch.float32) * 2.0 + 0.5)
    assert program_threads == [threading.get_ident()] * 4

    src = torch.randn(3, 40, device="simdev")
    dst = torch.zeros(3, 40, device="simdev")
    copy_rows[(2, 3)](src, dst, 3, 40, BLOCK=32)
    assert torch.equal(dst.cpu(), src.cpu() + 1.0)
    assert len(program_threads) == 4 + 2 * 3


def test_earlier_work_is_seen_and_later_work_sees_the_kernel_on_a_side_stream(host_target, program_threads):
    n = 64
    stream = torch.Stream(device="simdev:0")
    with stream:
        x = torch.zeros(n, device="simdev")
        y = torch.zeros(n, device="simdev")
        out = torch.zeros(n, device="simdev")
        scale_add[(2,)](x, y, out, n, 1.0, BLOCK=32)  # compiled and loaded
        torch.accelerator.synchronize()
        with torch.simdev.op_delay(30_000):
            x.fill_(5.0)                                  # queued before: still pending at the launch
            scale_add[(2,)](x, y, out, n, 3.0, BLOCK=32)  # waits for it, then runs: out = 15
            out.add_(1.0)                                 # queued after: sees 15
            assert not stream.query()                     # the add is still queued (delayed)
            result = out.cpu()
    assert result.tolist() == [16.0] * n
    assert program_threads == [threading.get_ident()] * 4


def test_a_launch_on_a_stream_that_is_not_current_is_refused_naming_why(host_target):
    n = 32
    x = torch.ones(n, device="simdev")
    out = torch.zeros(n, device="simdev")
    compiled = scale_add[(1,)](x, x, out, n, 1.0, BLOCK=32)
    assert out.cpu().tolist() == [2.0] * n
    side = torch.Stream(device="simdev:0")
    with pytest.raises(RuntimeError, match=r"the host kernel runtime launches on the current stream only: this "
                                           r"launch is on stream 0x[0-9a-f]+, and the current stream of simdev:0 "
                                           r"is 0x[0-9a-f]+"):
        run(compiled.run, (1,), compiled, x, x, out, n, 3.0, 32, stream=side.native_handle, packed=PACKED)
    with side:  # made current, the same launch runs
        run(compiled.run, (1,), compiled, x, x, out, n, 3.0, 32, stream=side.native_handle, packed=PACKED)
        assert out.cpu().tolist() == [4.0] * n


def test_a_failing_program_fails_its_launch_with_the_python_error(host_target, monkeypatch):
    from devbridge.triton.interpreter import interpreter

    n = 32
    x = torch.ones(n, device="simdev")
    out = torch.zeros(n, device="simdev")
    scale_add[(1,)](x, x, out, n, 1.0, BLOCK=32)

    def fails(*args):
        raise ValueError("a program failed on purpose")

    monkeypatch.setattr(interpreter, "run_program", fails)
    with pytest.raises(RuntimeError, match=r"a kernel of the host kernel runtime failed on simdev:0: "
                                           r"ValueError: a program failed on purpose"):
        scale_add[(1,)](x, x, out, n, 1.0, BLOCK=32)


@pytest.fixture
def inductor(tmp_path):
    with private_inductor(tmp_path):
        yield from reset_dynamo_around_test()


def _function(x, w):
    return torch.tanh(x @ w) * 1.25 + torch.sigmoid(x).sum(dim=1, keepdim=True)


def test_torch_compile_forward_and_backward_through_the_host_target(host_target, program_threads, inductor):
    torch.manual_seed(0)
    x, w = torch.randn(8, 16), torch.randn(16, 4)
    expected = _function(x.requires_grad_(), w.requires_grad_())
    expected.sum().backward()

    xs = x.detach().to("simdev").requires_grad_()
    ws = w.detach().to("simdev").requires_grad_()
    compiled = torch.compile(_function, fullgraph=True)
    actual, code = run_and_get_code(compiled, xs, ws)
    assert "@triton.jit" in "\n".join(code)
    forward_programs = len(program_threads)
    assert forward_programs > 0 and set(program_threads) == {threading.get_ident()}
    actual.sum().backward()
    # The backward's kernels ran through it too, on the thread that launched
    # them: autograd's worker thread of the plugin device.
    assert len(program_threads) > forward_programs
    torch.testing.assert_close(actual.detach().cpu(), expected.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(xs.grad.cpu(), x.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ws.grad.cpu(), w.grad, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------- graph capture
# simdev registers a graph table, so its streams can be captured; the host
# runtime runs each kernel on the launching thread, where no graph records it.
# A capture that reaches a kernel is refused by devbridge, naming the fix
# (before the stream is synchronized: simdev would fail that without saying
# why, and a plugin that allowed it would record a graph without the kernel);
# reduce-overhead does not try, and runs the graph uncaptured with a warning.


def test_a_kernel_launch_under_graph_capture_is_refused_naming_the_fix(host_target):
    import devbridge.graphs

    n = 32
    x = torch.ones(n, device="simdev")
    out = torch.zeros(n, device="simdev")
    scale_add[(1,)](x, x, out, n, 1.0, BLOCK=32)  # compiled and loaded outside the capture
    graph = devbridge.graphs.Graph()
    with pytest.raises(RuntimeError, match=r"the host kernel runtime cannot launch on stream 0x[0-9a-f]+ of simdev:0, "
                                           r"which is being captured into a graph: it runs the kernel right away"):
        with devbridge.graphs.graph(graph):
            scale_add[(1,)](x, x, out, n, 3.0, BLOCK=32)
    assert not devbridge.graphs.is_current_stream_capturing()
    scale_add[(1,)](x, x, out, n, 5.0, BLOCK=32)  # outside the capture, as before
    assert out.cpu().tolist() == [6.0] * n


def test_reduce_overhead_runs_uncaptured_with_the_reason(host_target, inductor, caplog):
    from devbridge.inductor import graph_capture_counts

    before = graph_capture_counts()
    compiled = torch.compile(lambda t: (t * 2.0 + 1.0).sin(), mode="reduce-overhead")
    x = torch.zeros(64, device="simdev")
    with caplog.at_level("WARNING", logger="devbridge.inductor"):
        for value in (0.0, 0.5, 1.0):
            x.fill_(value)
            assert torch.allclose(compiled(x).cpu(), torch.full((64,), value * 2.0 + 1.0).sin())
    after = graph_capture_counts()
    assert after["captures"] == before["captures"] and after["not_captured"] > before["not_captured"]
    assert "simdev's Triton kernels run on the host kernel runtime (kernel_runtime='host')" in caplog.text
    assert "the plugin refused the capture" not in caplog.text  # refused before any capture was tried
