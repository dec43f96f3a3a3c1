"""The Triton check of `devbridge check`: a real @triton.jit kernel, compiled
for the plugin's declared hardware and launched through devbridge's driver,
runs on the current stream (ordered after work queued there before it)."""

from __future__ import annotations

import torch

from .. import _C, _kernel_runtimes
from .native_stream import require_native_stream
from .plugin import Backend
from .registry import check
from .result import CheckFailed, CheckResult
from .timing import delay_knob, enqueue_ns_per_call, no_delay_knob

BLOCK = 1024
N = 4 * BLOCK  # four programs: where programs run on the host (simdev), each is one host call
TRITON_FIX = ("pip install 'devbridge[triton]' with the Triton that pairs with torch "
              "(torch 2.13: triton==3.7.1, torch 2.11: triton==3.6.0)")


# The launch goes on the stream devbridge resolves, as current_work_stream
# does: where dlpack.stream fails, this check would fail with its story again.
@check("triton.kernel", "Triton kernel on the current stream", depends_on=("allocator", "dlpack.stream"))
def _triton_kernel(backend: Backend, result: CheckResult) -> None:
    try:
        import triton  # noqa: F401
    except ImportError:
        result.skip("Triton is not installed", ["to enable: " + TRITON_FIX])
        return
    import devbridge.triton

    hardware = devbridge.triton.declared(backend.name)
    if hardware is None:
        from devbridge.triton.hardware import how_to_declare

        result.skip(f"'{backend.name}' declares no Triton hardware, so no Triton compiler serves it",
                    ["to enable: " + how_to_declare(backend.name)])
        return
    from . import _triton_kernel

    # Launches go on the current stream's native handle: without one, fail
    # with the fix rather than with the launcher's error.
    require_native_stream(backend, torch.accelerator.current_device_index())
    device = torch.device(backend.name, torch.accelerator.current_device_index())
    set_delay = delay_knob(backend)
    stream = torch.Stream(device=device)
    grid = (N // BLOCK,)
    with stream, devbridge.triton.activate():
        x = torch.zeros(N, device=device)
        out = torch.zeros(N, device=device)
        _triton_kernel.add_one_kernel[grid](x, out, N, BLOCK=BLOCK)  # compile and load first
        stream.synchronize()  # (not torch.accelerator's: that one is checked elsewhere)
        if set_delay is not None:
            set_delay(20_000)  # queued work sleeps first: a kernel on another stream would read 0
        try:
            x.fill_(5.0)
            _triton_kernel.add_one_kernel[grid](x, out, N, BLOCK=BLOCK)
            seen = out.cpu()  # a copy on the same stream
        finally:
            if set_delay is not None:
                set_delay(0)
        # The launch's host cost: one program per launch (the call costs the
        # same for any grid), so the launches queued by the timing are cheap
        # to run afterwards where programs run on the host.
        small_x, small_out = x[:BLOCK], out[:BLOCK]
        cost = enqueue_ns_per_call(
            lambda: _triton_kernel.add_one_kernel[(1,)](small_x, small_out, BLOCK, BLOCK=BLOCK), stream, set_delay)
    if not torch.all(seen == 6.0):
        raise CheckFailed(
            f"the Triton kernel read {float(seen.min())}..{float(seen.max())}, not 5.0 + 1: it did not run after "
            "the fill queued before it on the current stream",
            "the plugin's getStreamNativeHandle must return the native stream the current torch.Stream runs on "
            "(the driver launches there), and the declared kernel runtime must launch on it")
    result.costs_ns["kernel[grid](...)"] = cost.ns
    order = ("after the fill on the same stream (delay on)" if set_delay
             else f"ordered, with no delay knob to prove it: {no_delay_knob(backend)}")
    # A spec's runtime ("cuda"), else the name the plugin's table gives
    runtime = (_kernel_runtimes.runtime_kind(hardware.kernel_runtime)
               or _C.kernel_runtime_name(devbridge.triton.driver().kernel_runtime()))
    result.detail = f"{hardware.compiler} compiler, {runtime} kernel runtime; ran {order}; {cost.describe()}"
