"""What the host pays to enqueue Triton work on simdev, whose kernels run in
Python on the stream's worker: the worker keeps one Python thread state (so
CPython's GIL hand-off works for a host thread waiting to enqueue), enqueueing
never waits for a kernel that is running, helper calls do not re-patch
triton.language, and `devbridge check` times enqueueing with none of the
queued work running meanwhile. Orderings and identities, never timings."""

from __future__ import annotations

import ctypes
import importlib.util
import pathlib
import sys
import threading

import pytest
import torch

triton = pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")
import triton.language as tl  # noqa: E402

import devbridge  # noqa: E402
import devbridge.triton  # noqa: E402
_interpreter = pytest.importorskip("devbridge.triton.interpreter.interpreter", reason="numpy or Triton is not installed")

from launch_support import skip_without_simdev  # noqa: E402

pytestmark = skip_without_simdev

BLOCK = 16


@triton.jit
def _add_one(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + 1.0, mask=mask)


@triton.jit
def _twice(v):
    return v + v


@triton.jit
def _helpers(x, out, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs)
    for _ in tl.static_range(4):
        v = _twice(v)
    tl.store(out + offs, v)


@pytest.fixture
def stream():
    with devbridge.triton.activate():
        side = torch.Stream(device="simdev:0")
        with side:
            yield side
        side.synchronize()
    torch.simdev.set_op_delay_us(0)


@pytest.fixture
def programs(monkeypatch):
    """Calls `observe(program)` on the worker before each interpreted program
    (the trampoline looks run_program up on every call)."""
    observers = []
    run_program = _interpreter.run_program

    def observed(kernel_id, program, grid, device, payload):
        for observe in observers:
            observe(program)
        return run_program(kernel_id, program, grid, device, payload)

    monkeypatch.setattr(_interpreter, "run_program", observed)
    return observers


def _tensors(programs: int):
    x = torch.arange(programs * BLOCK, dtype=torch.float32, device="simdev:0")
    return x, torch.zeros_like(x)


def test_worker_keeps_one_python_thread_state_across_programs_and_launches(stream, programs):
    # A fresh thread state per program made every retake of the GIL by the
    # worker count as a thread switch, so a host thread waiting for the GIL
    # never asked the worker to drop it (see py_kernel_runtime.cpp).
    get_state = ctypes.pythonapi.PyThreadState_Get
    get_state.restype = ctypes.c_void_p
    local = threading.local()
    seen = []

    def observe(program):
        seen.append((threading.get_ident(), get_state(), getattr(local, "mark", None)))
        local.mark = "set by an earlier program"

    programs.append(observe)
    x, out = _tensors(8)
    for _ in range(3):
        _add_one[(8,)](x, out, x.numel(), BLOCK=BLOCK)
    stream.synchronize()
    assert len(seen) == 24
    assert len({(ident, state) for ident, state, _ in seen}) == 1, "one worker, one thread state"
    assert [mark for _, _, mark in seen[1:]] == ["set by an earlier program"] * 23, \
        "threading.local survives from one program to the next"
    torch.testing.assert_close(out.cpu(), x.cpu() + 1.0)


def test_enqueue_does_not_wait_for_the_kernel_the_worker_is_running(stream, programs):
    running, release = threading.Event(), threading.Event()
    order = []

    def observe(program):
        if not running.is_set():
            running.set()
            order.append("first program started")
            assert release.wait(60), "the host never released the first program"
            order.append("first program released")

    programs.append(observe)
    x, out = _tensors(2)
    _add_one[(2,)](x, out, x.numel(), BLOCK=BLOCK)
    assert running.wait(60)
    for _ in range(5):  # the worker is inside a program, holding a launch: these only queue
        _add_one[(2,)](x, out, x.numel(), BLOCK=BLOCK)
    order.append("five more launches enqueued")
    release.set()
    stream.synchronize()
    assert order == ["first program started", "five more launches enqueued", "first program released"]


def test_helper_calls_inside_a_launch_do_not_repatch_triton_language(stream, monkeypatch):
    import triton.runtime.interpreter as interpreter

    from devbridge.triton.interpreter import interpreter as _interpreter

    launches, helper_patches = [], []
    patch_language, patch_lang = _interpreter._patch_language, interpreter._patch_lang

    def counted_launch():
        launches.append(threading.get_ident())
        return patch_language()

    def counted_helper(fn):
        helper_patches.append(fn)
        return patch_lang(fn)

    x, out = _tensors(3)
    _helpers[(3,)](x, out, BLOCK=BLOCK)  # compiled, loaded and the patches recorded before counting
    stream.synchronize()
    monkeypatch.setattr(_interpreter, "_patch_language", counted_launch)
    monkeypatch.setattr(interpreter, "_patch_lang", counted_helper)
    _helpers[(3,)](x, out, BLOCK=BLOCK)
    stream.synchronize()
    # Once for the launch, not once more per helper call (12 here): the
    # launch's patches cover both language modules, replayed as recorded.
    assert len(launches) == 1
    assert helper_patches == []
    torch.testing.assert_close(out.cpu(), x.cpu() * 16.0)


def test_enqueue_cost_is_timed_with_none_of_the_queued_work_running(stream, programs):
    from devbridge.check.timing import enqueue_ns_per_call

    ran = []
    programs.append(ran.append)
    x, out = _tensors(1)
    during = []

    def launch():
        during.append(len(ran))
        _add_one[(1,)](x, out, x.numel(), BLOCK=BLOCK)

    cost = enqueue_ns_per_call(launch, stream, torch.simdev.set_op_delay_us, calls=4, repeats=3)
    assert cost.held is True and cost.ns > 0
    assert "stream held" in cost.describe()
    # The warm-up launch ran before the timing. Of the 12 timed launches (of
    # the last attempt, should a busy machine have outlasted a shorter hold),
    # none ran before the last of them was enqueued; all ran afterwards.
    assert during[0] == 0 and len(set(during[-12:])) == 1 and during[-1] >= 1
    assert len(ran) == len(during)
    assert torch.simdev.get_op_delay_us() == 0


def test_interpreter_target_without_numpy_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "numpy", None)  # what `import numpy` meets where it is not installed
    path = pathlib.Path(_interpreter.__file__).with_name("libdevice.py")
    spec = importlib.util.spec_from_file_location("libdevice_without_numpy", path)
    with pytest.raises(ImportError, match=r"pip install numpy \(torch-simdev and devbridge\[triton\] declare it\)"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
