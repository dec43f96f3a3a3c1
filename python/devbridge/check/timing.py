"""Per-call cost of the hot calls, measured the way a launcher would pay it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable


# The debug delay hook the ordering checks look for in the plugin's device
# module: torch.<name>.set_op_delay_us(microseconds) makes every operation
# queued afterwards sleep that long when it starts, on the device side (0: off).
DELAY_HOOK = "set_op_delay_us"


def delay_knob(backend) -> Callable[[int], None] | None:
    """The plugin's debug delay setter, torch.<name>.set_op_delay_us, if any."""
    return getattr(backend.module, DELAY_HOOK, None)


def no_delay_knob(backend) -> str:
    """The hook a plugin without a delay knob would provide, by name."""
    return (f"torch.{backend.name}.{DELAY_HOOK}(microseconds) is not defined "
            "(the debug delay hook, docs/plugin-authors.md §1)")


def ns_per_call(fn: Callable[[], object], *, target_seconds: float = 0.02, repeats: int = 5) -> float:
    """Median over ``repeats`` of the mean time of one call, in nanoseconds.

    The loop count is calibrated so one repeat lasts about ``target_seconds``:
    long enough to hide timer resolution, short enough that ``check`` stays a
    quick command.
    """
    fn()  # warm caches and lazy initialisation outside the measurement
    loops = 1
    while True:
        start = time.perf_counter_ns()
        for _ in range(loops):
            fn()
        elapsed = time.perf_counter_ns() - start
        if elapsed >= target_seconds * 1e9 / 10 or loops >= 1 << 24:
            break
        loops *= 4
    loops = max(1, int(loops * (target_seconds * 1e9) / max(elapsed, 1)))
    return _timed(fn, loops, repeats)


@dataclass
class EnqueueCost:
    """What enqueue_ns_per_call measured."""

    ns: float  # median over the repeats of the mean time of one call
    # True: the stream ran none of the queued work meanwhile; False: it could
    # not be held that long; None: the plugin has no knob to hold it.
    held: bool | None

    def describe(self) -> str:
        if self.held is None:
            return "enqueue cost, timed from an idle stream"
        if self.held:
            return "enqueue cost, timed with the stream held"
        return "timed while the stream ran the queued work (it could not be held): not the enqueue cost alone"


def enqueue_ns_per_call(fn: Callable[[], object], stream, set_delay: Callable[[int], None] | None, *,
                        calls: int = 10, repeats: int = 5) -> EnqueueCost:
    """Host cost of ``fn``, a call that queues work on ``stream``, without the
    cost of running that work.

    A plugin whose device work runs on host threads (simdev runs Triton
    kernels in Python, on its stream's worker) would otherwise bill the loop
    for the worker's share of the GIL and the CPU: the earlier calls' kernels
    run while the later calls are timed. So the stream's earlier work is
    finished first and, where the plugin has a debug delay knob
    (``set_delay``, microseconds before each queued operation), one delayed
    operation holds the worker back for the whole measurement. An event
    queued behind it shows the hold lasted; if it did not, the measurement is
    repeated with a longer hold.
    """
    import torch

    with stream:
        fn()  # warm caches and lazy initialisation outside the measurement
        stream.synchronize()
        if set_delay is None:
            return EnqueueCost(_timed(fn, calls, repeats), held=None)
        gate = torch.empty(1, device=stream.device)
        hold_us = 50_000
        for _ in range(3):
            set_delay(hold_us)
            try:
                gate.fill_(0.0)  # the worker sleeps hold_us before it, without the GIL
                released = torch.Event(device=stream.device)
                released.record(stream)
                ns = _timed(fn, calls, repeats)
            finally:
                set_delay(0)
            held = not released.query()  # still behind the gate: nothing queued has run yet
            stream.synchronize()
            if held:
                break
            hold_us *= 4
        return EnqueueCost(ns, held)


def _timed(fn: Callable[[], object], calls: int, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter_ns() - start) / calls)
    samples.sort()
    return samples[len(samples) // 2]
