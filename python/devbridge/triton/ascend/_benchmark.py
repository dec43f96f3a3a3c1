"""A benchmarker for the Ascend drivers on any plugin device: what
triton.testing.do_bench computes (milliseconds per call, after flushing the
cache between calls), timed with the policy's device interface. triton-ascend
3.2.0's own do_bench asks torch.npu.is_available() first, which fails on any
plugin that is not torch_npu."""

from __future__ import annotations

import statistics

from .. import policy


def do_bench(fn, warmup: float = 25, rep: float = 100, grad_to_none=None, quantiles=None, return_mode: str = "mean"):
    """Time `fn()` on the current plugin device: about `warmup` ms of warm-up
    calls, then about `rep` ms of timed calls, each after zeroing a buffer
    larger than the device cache. Returns the `return_mode` ("min", "max",
    "mean", "median", "all") of the per-call milliseconds, or the
    `quantiles` of them."""
    if return_mode not in ("min", "max", "mean", "median", "all"):
        raise ValueError(f"devbridge: return_mode must be min, max, mean, median or all, got {return_mode!r}")
    device = policy.call("get_device_interface")
    cache = policy.call("get_empty_tensor", 192 * 1024 * 1024 // 4)
    fn()
    device.synchronize()

    # Estimate one call's time from five calls.
    start, end = device.Event(enable_timing=True), device.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        cache.zero_()
        fn()
    end.record()
    device.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)
    n_warmup = max(1, int(warmup / estimate))
    n_repeat = max(1, int(rep / estimate))

    for _ in range(n_warmup):
        fn()
    starts = [device.Event(enable_timing=True) for _ in range(n_repeat)]
    ends = [device.Event(enable_timing=True) for _ in range(n_repeat)]
    for i in range(n_repeat):
        for tensor in grad_to_none or ():
            tensor.grad = None
        cache.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    device.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    if quantiles is not None:
        ordered = sorted(times)
        picked = [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in quantiles]
        return picked[0] if len(picked) == 1 else picked
    if return_mode == "all":
        return times
    return {"min": min, "max": max, "mean": statistics.fmean, "median": statistics.median}[return_mode](times)
