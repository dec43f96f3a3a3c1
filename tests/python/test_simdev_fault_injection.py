"""Injected faults on simdev (torch.simdev.inject_fault): every failure a clear,
catchable torch error, nothing leaked, no wrong result left behind.

simdev fails its nth allocation ("allocation": torch.OutOfMemoryError at the
call) or the nth kernel or operator to start running ("kernel": a device
fault, torch.AcceleratorError at the next synchronization). The cases walk
every path devbridge puts between a user and the device: eager operators,
Triton launches, compiled graphs, reduce-overhead capture and replay, DLPack
export, import and the exchange table's allocator, several streams and host
threads; then 1,000 faults in a row, with memory statistics and RSS flat.

A "kernel" fault counts the kernels that start after the call, so each case
synchronizes before arming one: the fault hits the work the case aims at."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import re
import threading

import pytest
import torch

triton = pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")

import devbridge  # noqa: E402
import devbridge.triton  # noqa: E402
from devbridge import dlpack_ctypes as dl  # noqa: E402
from devbridge.inductor import graph_capture_counts  # noqa: E402

import triton_aot_kernels as kernels  # noqa: E402
from inductor_support import private_inductor, reset_dynamo_around_test  # noqa: E402
from launch_support import skip_without_simdev  # noqa: E402

pytestmark = skip_without_simdev

INJECTED_KERNEL = re.compile(r"(?s)sdErrorLaunchFailure.*injected fault \(sdInjectKernelFault\)")
INJECTED_ALLOCATION = re.compile(r"simdev out of memory on simdev:\d: tried to allocate .*an injected fault")


@pytest.fixture(scope="module", autouse=True)
def inductor_for_simdev(tmp_path_factory):
    with private_inductor(tmp_path_factory.mktemp("inductor-cache")):
        yield


fresh_dynamo = pytest.fixture(autouse=True)(reset_dynamo_around_test)


@pytest.fixture(autouse=True)
def disarmed():
    """Every case starts idle and leaves no armed fault and no unreported failure behind."""
    torch.accelerator.synchronize()
    yield
    torch.simdev.inject_fault("allocation", 0)
    torch.simdev.inject_fault("kernel", 0)
    for device in range(torch.simdev.device_count()):
        torch.simdev.synchronize(device)  # raises if a case left a failure unreported


@pytest.fixture
def driver():
    with devbridge.triton.activate():
        yield


def counts():
    return torch.simdev.injected_faults()


@contextlib.contextmanager
def kernel_fault(nth=1, device=None):
    """Arms a kernel fault for the body's work, then expects it at the synchronization."""
    torch.simdev.synchronize(device)
    before = counts()["kernel"]
    torch.simdev.inject_fault("kernel", nth)
    yield
    with pytest.raises(torch.AcceleratorError, match=INJECTED_KERNEL):
        torch.simdev.synchronize(device)
    assert counts()["kernel"] == before + 1


def allocated():
    gc.collect()
    torch.accelerator.synchronize()
    return [torch.simdev.memory_allocated(d) for d in range(torch.simdev.device_count())]


def host(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------- eager


def test_an_allocation_fault_is_out_of_memory_at_the_call_and_takes_nothing():
    x = torch.ones(64, device="simdev")
    before = allocated()
    torch.simdev.inject_fault("allocation", 2)
    y = x + 1  # the first allocation
    with pytest.raises(torch.OutOfMemoryError, match=INJECTED_ALLOCATION):
        x * 2  # the second
    del y
    assert allocated() == before
    assert torch.equal((x * 2).cpu(), torch.full((64,), 2.0))


def test_an_operator_fault_is_an_accelerator_error_at_the_next_synchronization():
    x = torch.arange(8.0, device="simdev")
    with kernel_fault():
        y = x * 3
    assert torch.equal((x * 3).cpu(), torch.arange(8.0) * 3)  # recomputed right; the stream works on
    del y


def test_a_fault_on_a_side_stream_is_reported_by_that_stream_only():
    side = torch.Stream(device="simdev:0")
    x = torch.ones(16, device="simdev")
    torch.accelerator.synchronize()
    torch.simdev.inject_fault("kernel", 1)
    with side:
        x.mul_(5)
    torch.simdev.current_stream().synchronize()  # the default stream did not fail
    with pytest.raises(torch.AcceleratorError, match=INJECTED_KERNEL):
        side.synchronize()
    side.synchronize()


# ---------------------------------------------------------------- Triton


def test_a_triton_launch_fault_and_the_next_launch(driver):
    x, y = torch.ones(256, device="simdev"), torch.full((256,), 2.0, device="simdev")
    out = torch.zeros(256, device="simdev")
    with kernel_fault():
        kernels.add_kernel[(2,)](x, y, out, 256, 3.0, BLOCK=128)
    assert torch.equal(out.cpu(), torch.zeros(256))  # the faulted grid wrote nothing
    kernels.add_kernel[(2,)](x, y, out, 256, 3.0, BLOCK=128)
    assert torch.equal(out.cpu(), torch.full((256,), 5.0))


def test_faults_across_devices_streams_and_host_threads(driver):
    """Three host threads, each on its own stream (two devices), in loops of
    launches; faults armed from the main thread hit whichever kernel starts.
    A thread may see a wrong result only in an iteration whose
    synchronization reported a fault, and every fault is reported once."""
    rounds, threads_n = 12, 3
    reported = [0] * threads_n
    errors = []
    start = threading.Barrier(threads_n + 1)

    def worker(index):
        device = f"simdev:{index % 2}"
        stream = torch.Stream(device=device)
        try:
            with torch.accelerator.device_index(index % 2), stream:
                x = torch.full((512,), float(index + 1), device=device)
                out = torch.empty(512, device=device)
                stream.synchronize()  # set up before any fault is armed
                start.wait()
                for r in range(rounds):
                    try:  # any synchronization may report the fault: the stream's, the copy to the host's
                        out.zero_()
                        kernels.add_kernel[(4,)](x, x, out, 512, float(r), BLOCK=128)
                        stream.synchronize()
                        result = out.cpu()
                    except torch.AcceleratorError as error:
                        assert INJECTED_KERNEL.search(str(error)), str(error)
                        reported[index] += 1
                        continue
                    expected = torch.full((512,), (index + 1) * (1.0 + r))
                    assert torch.equal(result, expected), f"thread {index} round {r}: a wrong result unreported"
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(threads_n)]
    for thread in threads:
        thread.start()
    first = counts()["kernel"]
    start.wait()
    # Armed while the threads run, each once its predecessor was reported: a
    # stream keeps its first unreported failure only, so two faults in one
    # round of one thread would be reported once.
    for nth in (2, 3, 5):
        seen = sum(reported)
        torch.simdev.inject_fault("kernel", nth)
        while sum(reported) == seen and any(t.is_alive() for t in threads):
            threading.Event().wait(0.001)
    for thread in threads:
        thread.join(120)
    torch.simdev.inject_fault("kernel", 0)  # one may be left armed if the loops ended first
    assert not errors, errors[0]
    struck = counts()["kernel"] - first
    assert struck >= 1 and sum(reported) == struck, (struck, reported)


# ---------------------------------------------------------------- torch.compile


def mlp(x, w1, w2):
    return torch.relu(x @ w1 + 1.0).sum(dim=1, keepdim=True) * (x @ w2)


def test_compiled_graph_every_allocation_fault_then_right_results():
    w1, w2 = host(32, 64, seed=0).to("simdev"), host(32, 16, seed=1).to("simdev")
    x = host(8, 32, seed=2).to("simdev")
    compiled = torch.compile(mlp)
    expected = mlp(x.cpu(), w1.cpu(), w2.cpu())
    compiled(x, w1, w2)  # compiled and warm
    before = allocated()
    nth = 1
    while True:  # the 1st, 2nd, ... allocation of a call fails, until a call needs fewer
        torch.simdev.inject_fault("allocation", nth)
        try:
            out = compiled(x, w1, w2)
        except torch.OutOfMemoryError as error:
            assert INJECTED_ALLOCATION.search(str(error)), str(error)
        else:
            torch.simdev.inject_fault("allocation", 0)
            break
        # (checked once the exception is gone: its traceback holds the call's frames and their buffers)
        assert allocated() == before, f"allocation {nth}'s failure left memory allocated"
        nth += 1
    assert nth > 2, "the compiled call allocated fewer than two buffers: the case tests too little"
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-4)


def test_compiled_graph_kernel_fault_then_right_results():
    w1, w2 = host(32, 64, seed=0).to("simdev"), host(32, 16, seed=1).to("simdev")
    x = host(8, 32, seed=3).to("simdev")
    compiled = torch.compile(mlp)
    expected = mlp(x.cpu(), w1.cpu(), w2.cpu())
    compiled(x, w1, w2)
    for nth in (1, 2, 3):
        with kernel_fault(nth):
            compiled(x, w1, w2)
        torch.testing.assert_close(compiled(x, w1, w2).cpu(), expected, rtol=1e-4, atol=1e-4)


def test_reduce_overhead_faults_in_capture_and_replay_leave_the_graph_right():
    w1, w2 = host(32, 64, seed=0).to("simdev"), host(32, 16, seed=1).to("simdev")
    compiled = torch.compile(mlp, mode="reduce-overhead")
    xs = [host(8, 32, seed=s).to("simdev") for s in range(4, 8)]
    start = graph_capture_counts()
    compiled(xs[0], w1, w2)  # warm-up
    compiled(xs[1], w1, w2)  # captured, then replayed
    assert graph_capture_counts()["captures"] == start["captures"] + 1
    for nth in (1, 2, 4):  # faults inside a replay, on its kernels and operators
        with kernel_fault(nth):
            compiled(xs[2], w1, w2)
        torch.testing.assert_close(compiled(xs[3], w1, w2).cpu(), mlp(xs[3].cpu(), w1.cpu(), w2.cpu()),
                                   rtol=1e-4, atol=1e-4)
    # A fault while a new shape is captured: the capture fails cleanly and the next call is right.
    y = host(4, 32, seed=9).to("simdev")
    compiled(y, w1, w2)
    torch.simdev.inject_fault("allocation", 1)
    try:
        compiled(y, w1, w2)  # captures (the injected out-of-memory may fall on the capture's pool)
    except torch.OutOfMemoryError as error:
        assert INJECTED_ALLOCATION.search(str(error)), str(error)
    torch.simdev.inject_fault("allocation", 0)
    for _ in range(2):
        torch.testing.assert_close(compiled(y, w1, w2).cpu(), mlp(y.cpu(), w1.cpu(), w2.cpu()), rtol=1e-4,
                                   atol=1e-4)


# ---------------------------------------------------------------- DLPack


def test_dlpack_export_import_and_the_allocator_under_faults():
    table = dl.Table(devbridge.exchange_api())
    x = torch.arange(6.0, device="simdev")
    with kernel_fault():
        y = torch.from_dlpack(torch.utils.dlpack.to_dlpack(x)).mul_(2)  # a view of x: the fault hits mul_
    assert y.data_ptr() == x.data_ptr()
    y.mul_(2)
    assert torch.equal(x.cpu(), torch.arange(6.0) * 2)
    # The exchange table's allocator: the plugin's out-of-memory through SetError, nothing taken.
    calls = []
    set_error = dl.SET_ERROR(lambda _ctx, kind, message: calls.append((kind.decode(), message.decode())))
    shape = (ctypes.c_int64 * 1)(1024)
    proto = dl.DLTensor()
    proto.ndim, proto.shape = 1, ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    proto.dtype = dl.DLDataType(dl.KDL_FLOAT, 32, 1)
    proto.device = dl.DLDevice(dl.KDL_EXT_DEV, 0)
    before = allocated()
    torch.simdev.inject_fault("allocation", 1)
    out = dl.MANAGED_PTR()
    assert table.allocator(ctypes.byref(proto), ctypes.byref(out), None, set_error) == -1
    assert not out and len(calls) == 1 and INJECTED_ALLOCATION.search(calls[0][1]), calls
    assert allocated() == before
    assert table.allocator(ctypes.byref(proto), ctypes.byref(out), None, set_error) == 0
    table.to_py(out).fill_(1.0)  # the next allocation works and is owned by the importer


# ---------------------------------------------------------------- a thousand faults


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def test_a_thousand_faults_leak_nothing():
    x = torch.ones(1024, device="simdev")
    out = torch.empty(1024, device="simdev")
    compiled = torch.compile(lambda t: (t * 2).sum(), dynamic=False)
    # Compiled first, outside any activation: loading a compiled module makes
    # Inductor activate the first GPU backend's driver (NVIDIA's on a CUDA
    # host) whatever was active around it; the launches below activate
    # devbridge's driver themselves.
    compiled(x)

    def one_round(i):
        if i % 4 == 1:
            torch.simdev.inject_fault("allocation", 1)
            with pytest.raises(torch.OutOfMemoryError):
                x + i
        elif i % 4 == 3:
            torch.simdev.inject_fault("allocation", 1)
            with pytest.raises(torch.OutOfMemoryError):
                compiled(x)
        else:
            torch.simdev.synchronize()
            torch.simdev.inject_fault("kernel", 1)
            with devbridge.triton.activate():
                kernels.add_kernel[(8,)](x, x, out, 1024, float(i), BLOCK=128)
            with pytest.raises(torch.AcceleratorError):
                torch.simdev.synchronize()

    for i in range(100):  # warm-up: caches, the allocator's pools, the interpreter's patches
        one_round(i)
    gc.collect()
    memory, rss = allocated(), _rss_bytes()
    reserved = torch.simdev.memory_reserved()
    for i in range(1000):
        one_round(i)
    gc.collect()
    assert allocated() == memory
    assert torch.simdev.memory_reserved() == reserved
    grown = _rss_bytes() - rss
    assert grown < 16 << 20, f"RSS grew by {grown / 2**20:.1f} MiB over 1,000 injected faults"
    with devbridge.triton.activate():
        kernels.add_kernel[(8,)](x, x, out, 1024, 1.0, BLOCK=128)
    assert torch.equal(out.cpu(), torch.full((1024,), 2.0))
