"""The torch.compile check of `devbridge check`: devbridge.inductor.register()
serves the plugin device, Inductor generates Triton for it (no fallback), the
compiled function matches eager on the CPU, and its kernels run on the
current stream (ordered after work queued there before them)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time

import torch

from .native_stream import require_native_stream
from .plugin import Backend
from .registry import check
from .result import CheckFailed, CheckResult
from .timing import delay_knob, enqueue_ns_per_call, no_delay_knob
from .triton_checks import TRITON_FIX

_CACHE_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
_DOC = "docs/torch-compile.md"
_STREAM_FIX = ("Inductor launches on devbridge's get_raw_stream(), the native handle of the current stream, so the "
               "plugin's getStreamNativeHandle (or its stream resolver) must return the stream the current "
               "torch.Stream runs on")


def _function(x):
    return torch.softmax(x * 2 + 1, -1)


@contextlib.contextmanager
def _private_caches():
    """Inductor and Triton caches of the check's own (devbridge's run-time
    settings are in no cache key, so a cache shared with other configurations
    could answer for them), and the environment as it was afterwards."""
    saved = {key: os.environ.get(key) for key in _CACHE_ENV}
    root = tempfile.mkdtemp(prefix="devbridge-check-compile-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, "inductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(root, "triton")
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(root, ignore_errors=True)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


@check("torch.compile", "torch.compile round trip", depends_on=("allocator", "dlpack.stream", "triton.kernel"))
def _torch_compile(backend: Backend, result: CheckResult) -> None:
    try:
        import triton  # noqa: F401
    except ImportError:
        result.skip("Triton is not installed, and Inductor generates Triton for the plugin device",
                    ["to enable: " + TRITON_FIX])
        return
    import devbridge.triton

    hardware = devbridge.triton.declared(backend.name)
    if hardware is None:
        from devbridge.triton.hardware import how_to_declare

        result.skip(f"'{backend.name}' declares no Triton hardware, so torch.compile has no Triton compiler "
                    "for it", ["to enable: " + how_to_declare(backend.name)])
        return
    import devbridge.inductor

    try:
        devbridge.inductor.register()
    except Exception as error:  # noqa: BLE001 - its message is the fix
        raise CheckFailed(f"devbridge.inductor.register() failed ({type(error).__name__})", str(error)) from None

    # Inductor's kernels launch on get_raw_stream(), the current stream's
    # native handle: without one, fail with the fix every such check gives.
    index = torch.accelerator.current_device_index()
    require_native_stream(backend, index)
    from torch._inductor import config as inductor_config
    from torch._inductor.utils import run_and_get_code

    device = torch.device(backend.name, index)
    set_delay = delay_knob(backend)
    x_cpu = torch.randn(8, 16, generator=torch.Generator().manual_seed(0))
    expected = _function(x_cpu)
    filled = torch.full((8, 16), 0.25)
    expected_filled = _function(filled)
    stream = torch.Stream(device=device)
    with _private_caches(), inductor_config.patch(compile_threads=1), stream:
        compiled = torch.compile(_function, fullgraph=True)
        x = x_cpu.to(device)
        start = time.perf_counter_ns()
        try:
            out, code = run_and_get_code(compiled, x)
            seen = out.cpu()  # a copy on the same stream
        except Exception as error:  # noqa: BLE001 - reported with the fix
            raise CheckFailed(
                f"torch.compile(fullgraph=True) on {device} raised {_first_line(error)}",
                f"run the compile again with TORCH_LOGS=output_code to see the generated code; {_DOC} lists "
                "what devbridge patches in torch and the limits") from None
        first_ns = time.perf_counter_ns() - start
        code = "\n".join(code)
        if "@triton.jit" not in code:
            raise CheckFailed(
                f"Inductor generated no Triton kernel for {device} (a fallback: "
                f"{'C++ kernels for the CPU' if 'cpp_fused' in code else 'no kernels at all'})",
                f"devbridge.inductor.register() ran, yet Inductor did not treat '{backend.name}' as a Triton "
                f"device: nothing else may register a scheduling for it (torch.{backend.name}.Scheduling, "
                f"register_backend_for_device) and torch must be a version {_DOC} lists")
        if not torch.allclose(seen, expected, atol=1e-5, rtol=1e-5):
            raise CheckFailed(
                f"the compiled function differs from eager on the CPU by up to {float((seen - expected).abs().max())}",
                "either the kernel ran on a stream other than the current one (it read its input before the copy "
                "queued on the current stream: " + _STREAM_FIX + "), or the declared hardware's compiler or kernel "
                "runtime computes wrongly (the triton.kernel check runs a kernel of its own)")
        stream.synchronize()
        if set_delay is not None:
            set_delay(20_000)  # queued work sleeps first: a kernel on another stream would read x unfilled
        try:
            x.fill_(0.25)
            ordered = compiled(x).cpu()
        finally:
            if set_delay is not None:
                set_delay(0)
        # Few calls: where kernels run on the host (simdev), each
        # queued call costs far more to run than to enqueue.
        cost = enqueue_ns_per_call(lambda: compiled(x), stream, set_delay, calls=2, repeats=5)
    if not torch.allclose(ordered, expected_filled, atol=1e-5, rtol=1e-5):
        raise CheckFailed(
            "the compiled function did not see the fill queued before it on the current stream: its kernel ran "
            "on another stream",
            _STREAM_FIX[0].upper() + _STREAM_FIX[1:])
    result.costs_ns["compiled(x)"] = cost.ns
    order = ("after the fill on the same stream (delay on)" if set_delay
             else f"ordered, with no delay knob to prove it: {no_delay_knob(backend)}")
    result.detail = (f"softmax(x * 2 + 1) as Triton for {backend.name}, matches eager; first compile+run "
                     f"{first_ns / 1e9:.1f} s; ran {order}; {cost.describe()}")
