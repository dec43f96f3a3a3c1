"""Real Triton kernels on simdev, through `kernel[grid](...)` with devbridge's
driver active: compiled by devbridge's backend for simdev's target (Triton's
front end builds the TTIR; the binary is a description for Triton's
interpreter), loaded and launched through simdev's module API by devbridge's
launcher, run per program on the stream's worker over simdev memory in place.

Each result is compared bit for bit with the same kernel run by Triton's
interpreter on CPU tensors (what TRITON_INTERPRET=1 does), and with torch.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import threading

import pytest
import torch

triton = pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")
import triton.language as tl  # noqa: E402

import devbridge  # noqa: E402
import devbridge.triton  # noqa: E402

import triton_test_kernels as kernels  # noqa: E402
from launch_support import skip_without_simdev  # noqa: E402

pytestmark = skip_without_simdev


@pytest.fixture(autouse=True)
def devbridge_driver():
    with devbridge.triton.activate():
        yield
    torch.simdev.set_op_delay_us(0)



def same_bits(a, b):
    a, b = a.cpu().contiguous(), b.cpu().contiguous()
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Every case run as TRITON_INTERPRET=1 runs it (a fresh interpreter, CPU tensors)."""
    out = tmp_path_factory.mktemp("triton-interpret") / "reference.pt"
    env = {**os.environ, "TRITON_INTERPRET": "1", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    done = subprocess.run([sys.executable, str(pathlib.Path(kernels.__file__)), str(out)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return torch.load(out)


TORCH = {
    "vector_add": lambda x, y, *_: x + y,
    "softmax": lambda x, *_: torch.softmax(x, dim=1),
    "matmul": lambda a, b, *_: a @ b,
    "autotuned": lambda x, *_: x * 3.0,
    "atomics": lambda v, *_: torch.bincount(v, minlength=16).int(),
    "masked_loads": lambda x, *_: torch.cat([torch.full((7,), -1.0), x[:-7]]),
    "grid_2d": lambda x, *_: x.t(),
    "helper": lambda x, *_: x * x,
}


@pytest.mark.parametrize("case", sorted(kernels.CASES))
def test_kernels_are_bit_identical_to_triton_interpret_and_match_torch(case, reference):
    outputs = kernels.run_case(case, device="simdev")
    if case not in kernels.NOT_INTERPRETABLE_ON_CPU:
        assert len(outputs) == len(reference[case])
        for ours, theirs in zip(outputs, reference[case]):
            assert same_bits(ours, theirs), f"{case}: simdev differs from TRITON_INTERPRET=1"
    _, _, args, _, _ = kernels.CASES[case]()
    torch.testing.assert_close(outputs[0], TORCH[case](*args), rtol=1e-4, atol=1e-4)


def test_the_autotuner_benchmarks_both_configs_on_simdev():
    kernels.tuned_scale_kernel.cache.clear()
    kernels.run_case("autotuned", device="simdev")
    assert len(kernels.tuned_scale_kernel.cache) == 1
    timings = getattr(kernels.tuned_scale_kernel, "configs_timings", None)
    assert timings is None or len(timings) == 2


def test_a_kernel_calling_jit_helpers_leaves_triton_language_unpatched():
    load_before = tl.load
    kernels.run_case("helper", device="simdev")
    torch.accelerator.synchronize()
    assert tl.load is load_before
    # and the front end still compiles a new specialization afterwards
    out = torch.ones(10, device="simdev")
    kernels.add_kernel[(1,)](out, out, out, 10, BLOCK=16)
    assert out.cpu().tolist() == [2.0] * 10


def test_views_and_offsets_are_used_in_place():
    base = torch.arange(64, dtype=torch.float32, device="simdev")
    view = base[10:30]
    kernels.add_kernel[(1,)](view, view, view, 20, BLOCK=32)
    expected = torch.arange(64, dtype=torch.float32)
    expected[10:30] *= 2
    assert torch.equal(base.cpu(), expected)


# ---------------------------------------------------------------- streams and devices


def test_both_devices_and_non_default_streams():
    for index in (0, 1):
        device = f"simdev:{index}"
        torch.accelerator.set_device_index(index)
        stream = torch.Stream(device=device)
        with stream:
            x = torch.full((64,), float(index + 1), device=device)
            out = torch.empty(64, device=device)
            kernels.add_kernel[(1,)](x, x, out, 64, BLOCK=64)
            assert out.cpu().tolist() == [2.0 * (index + 1)] * 64
    torch.accelerator.set_device_index(0)


def test_a_tensor_on_the_other_device_is_refused():
    x = torch.ones(8, device="simdev:0")
    other = torch.ones(8, device="simdev:1")
    with pytest.raises(ValueError, match=r"argument 1 \('y'\) of kernel 'add_kernel' is a tensor on simdev:1, "
                                         r"but the kernel launches on simdev:0"):
        kernels.add_kernel[(1,)](x, other, x, 8, BLOCK=8)
    with pytest.raises(ValueError, match=r"is a tensor on cpu"):
        kernels.add_kernel[(1,)](x, torch.ones(8), x, 8, BLOCK=8)


def test_the_kernel_runs_after_earlier_work_and_before_later_work_on_its_stream():
    n = 64
    stream = torch.Stream(device="simdev:0")
    with stream:
        x = torch.zeros(n, device="simdev")
        out = torch.zeros(n, device="simdev")
        kernels.copy_kernel[(1,)](x, out, n, BLOCK=64)  # compiled and loaded
        torch.accelerator.synchronize()
        with torch.simdev.op_delay(30_000):
            x.fill_(5.0)                                   # earlier work
            kernels.copy_kernel[(1,)](x, out, n, BLOCK=64)
            out.add_(1.0)                                  # later work
            assert not stream.query()
            result = out.cpu()
    assert result.tolist() == [6.0] * n


def test_a_consumer_on_another_stream_reads_stale_data_without_an_event():
    n = 64
    producer = torch.Stream(device="simdev:0")
    consumer = torch.Stream(device="simdev:0")
    x = torch.ones(n, device="simdev")
    out = torch.zeros(n, device="simdev")
    stale = torch.zeros(n, device="simdev")
    fresh = torch.zeros(n, device="simdev")
    kernels.copy_kernel[(1,)](x, out, n, BLOCK=64)
    torch.accelerator.synchronize()
    out.zero_()
    torch.accelerator.synchronize()
    with torch.simdev.op_delay(30_000):
        with producer:
            for _ in range(3):  # the producer's kernel starts three delays after the consumer's
                x.mul_(1.0)
            kernels.copy_kernel[(1,)](x, out, n, BLOCK=64)  # out = 1, late
            done = torch.Event()
            done.record(producer)
        with consumer:
            kernels.copy_kernel[(1,)](out, stale, n, BLOCK=64)  # no wait: reads 0
            consumer.wait_event(done)
            kernels.copy_kernel[(1,)](out, fresh, n, BLOCK=64)
        # Inside: the worker reads the delay when an operation starts.
        torch.accelerator.synchronize()
    assert stale.cpu().tolist() == [0.0] * n
    assert fresh.cpu().tolist() == [1.0] * n


def test_several_host_threads_and_streams_do_not_deadlock():
    """Workers take the GIL only while a kernel runs; every host wait releases it."""
    n = 256
    kernels.add_kernel[(2,)](torch.ones(n, device="simdev"), torch.ones(n, device="simdev"),
                     torch.empty(n, device="simdev"), n, BLOCK=128)  # compile once, on this thread
    errors = []

    def worker(index):
        try:
            device = index % 2
            torch.accelerator.set_device_index(device)
            stream = torch.Stream(device=f"simdev:{device}")
            with stream:  # the driver is active for the whole process (the fixture)
                x = torch.full((n,), float(index), device=f"simdev:{device}")
                out = torch.empty(n, device=f"simdev:{device}")
                for step in range(5):
                    kernels.add_kernel[(2,)](x, x, out, n, BLOCK=128)
                    if step % 2:
                        stream.synchronize()
                    else:
                        event = torch.Event()
                        event.record(stream)
                        event.synchronize()
                    x, out = out, x
                if not torch.equal(x.cpu(), torch.full((n,), float(index) * 32)):  # a blocking copy
                    errors.append(f"thread {index}: wrong result")
                torch.accelerator.synchronize(device)
        except Exception as error:  # noqa: BLE001
            errors.append(f"thread {index}: {error!r}")

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "deadlock: a thread is still waiting"
    assert errors == []


@triton.jit
def _row_sums_kernel(x, out, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for step in range(0, tl.cdiv(n, BLOCK)):  # a bound from a runtime int
        offs = step * BLOCK + tl.arange(0, BLOCK)
        total += tl.load(x + row * n + offs, mask=offs < n, other=0.0)
    tl.store(out + row, tl.sum(total, 0))


def test_a_loop_bound_from_a_runtime_int():
    """The loop of Inductor's looped reductions and mm template. Triton 3.6's
    own interpreter refuses it under NumPy 2 (its bound is a one-element
    array); simdev runs it on every checked Triton."""
    x = torch.arange(3 * 100, dtype=torch.float32).reshape(3, 100)
    out = torch.empty(3, device="simdev")
    _row_sums_kernel[(3,)](x.to("simdev"), out, 100, BLOCK=32)
    assert torch.equal(out.cpu(), x.sum(1))


def test_the_front_end_compiles_while_a_kernel_is_interpreted(monkeypatch, tmp_path):
    """Triton's interpreter patches triton.language process-wide while a launch
    runs on simdev's worker; the host thread compiling the next kernel
    meanwhile (torch.compile compiles a backward while the forward runs) must
    still see triton.language as the front end knows it.

    The launch is held in the middle, its patches applied, until the compile
    has had its chance: waiting for the launch to show up instead missed
    launches that ran between two looks on a machine of many cores."""
    import threading

    from devbridge.triton.interpreter import interpreter

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # the new specialization is compiled, not loaded
    n = 1 << 16
    x, out = torch.ones(n, device="simdev"), torch.empty(n, device="simdev")
    kernels.add_kernel[(1,)](x, x, out, n, BLOCK=16)
    torch.accelerator.synchronize()

    patched, resume = threading.Event(), threading.Event()
    begin = interpreter._begin

    def begin_and_hold(*args, **kwargs):
        launch = begin(*args, **kwargs)  # triton.language is patched from here on
        if not patched.is_set():
            patched.set()
            resume.wait(30)
        return launch

    monkeypatch.setattr(interpreter, "_begin", begin_and_hold)
    failures = []

    def compile_and_launch():
        try:
            kernels.add_kernel[(n // 512,)](x, out, out, n, BLOCK=512)  # compiled now, during that launch
        except BaseException as error:  # reported by the main thread
            failures.append(error)

    host = threading.Thread(target=compile_and_launch)
    try:
        kernels.add_kernel[(n // 16,)](x, x, out, n, BLOCK=16)  # interpreted on the worker, held in _begin
        assert patched.wait(30), "the launch never started"
        host.start()
        host.join(2)  # the front end waits for the held launch; without that it compiles under its patches
    finally:
        resume.set()
    host.join(30)
    assert not host.is_alive(), "the compile never finished after the launch"
    assert not failures, f"the front end failed while a launch was interpreted: {failures[0]!r}"
    assert torch.equal(out.cpu(), torch.full((n,), 3.0))


def test_a_kernel_that_fails_is_reported_at_the_next_synchronize(capfd):
    x = torch.ones(4, device="simdev")
    kernels.asserting_kernel[(2,)](x, 4, BLOCK=4, debug=True)  # fails in program (0, 0, 0)
    # A device fault, as torch.cuda reports one; the cause is in the exception, where the user looks.
    with pytest.raises(torch.AcceleratorError, match=r"(?s)sdErrorLaunchFailure.*kernel 'devbridge_interpret'.* "
                                                     r"returned 1 at program \(0, 0, 0\) on default stream .*: the "
                                                     r"interpreted Triton kernel asserting_kernel program \(0, 0, 0\): "
                                                     r"AssertionError: .*devbridge test assertion"):
        torch.accelerator.synchronize()
    assert "devbridge test assertion" not in capfd.readouterr().err  # reported once, not also printed
    # The interpreter is free again: the next kernel runs.
    kernels.add_kernel[(1,)](x, x, x, 4, BLOCK=4)
    assert x.cpu().tolist() == [2.0] * 4
