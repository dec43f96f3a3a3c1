"""Per-call cost of the hot calls, measured the way a launcher would pay it."""

from __future__ import annotations

import time
from typing import Callable


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
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(loops):
            fn()
        samples.append((time.perf_counter_ns() - start) / loops)
    samples.sort()
    return samples[len(samples) // 2]
