"""Faults on cudadev surface as torch.cuda reports them: a kernel's illegal
address as torch.AcceleratorError at the next synchronization, an allocation
that does not fit as torch.OutOfMemoryError, eager and inside a compiled
graph, and the process keeps working after the out-of-memory.

An illegal address leaves the CUDA context unusable for the rest of the
process (CUDA's errors of that class are sticky), so each fault runs in a
fresh interpreter, next to the same fault on torch.cuda for comparison."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

pytestmark = pytest.mark.gpu

pytest.importorskip("triton", reason="triton is not installed")

_ILLEGAL_ADDRESS = textwrap.dedent("""
    import contextlib, json, sys
    import torch
    import triton
    import triton.language as tl

    device = sys.argv[1]
    driver = contextlib.nullcontext()
    if device == "cudadev":
        import torch_cudadev  # noqa: F401
        import devbridge.triton
        driver = devbridge.triton.activate()

    @triton.jit
    def store_far_away(out, far):
        tl.store(out + far, 1.0)  # 2**40 elements past a 4-byte allocation

    with driver:
        out = torch.zeros(1, device=device)
        store_far_away[(1,)](out, 2**40)
        try:
            torch.accelerator.synchronize()
            print(json.dumps({"raised": None}))
        except Exception as error:  # what the user's code would catch
            print(json.dumps({"raised": type(error).__name__,
                              "accelerator_error": isinstance(error, torch.AcceleratorError),
                              "message": str(error)[:2000]}))
""")


def _illegal_address_on(device: str, tmp_path) -> dict:
    script = tmp_path / "illegal_address.py"  # @triton.jit reads its kernel's source from a file
    script.write_text(_ILLEGAL_ADDRESS)
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    done = subprocess.run([sys.executable, str(script), device], env=env, capture_output=True, text=True,
                          timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"the {device} process printed no result (exit {done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(lines[-1])


def test_an_illegal_address_in_a_triton_kernel_is_an_accelerator_error_as_on_cuda(tmp_path):
    on_cuda = _illegal_address_on("cuda", tmp_path)
    on_cudadev = _illegal_address_on("cudadev", tmp_path)
    assert on_cuda["accelerator_error"], f"torch.cuda itself raised {on_cuda}"
    assert on_cudadev["accelerator_error"], f"cudadev raised {on_cudadev}, torch.cuda an AcceleratorError"
    assert "cudaErrorIllegalAddress" in on_cudadev["message"] or "illegal memory access" in on_cudadev["message"]
    assert "cudadev" in on_cudadev["message"]  # which device's call failed


def test_out_of_memory_inside_a_compiled_graph_is_torch_out_of_memory_and_the_process_recovers():
    total = torch.cuda.mem_get_info()[1]
    elements = 2 * total // 4  # twice the device, in float32

    def grow(x):  # the output buffer the compiled wrapper allocates does not fit
        return x.expand(elements).contiguous() * 2

    compiled = torch.compile(grow, dynamic=False)
    x = torch.ones(1, device="cudadev")
    torch.cudadev.synchronize()
    before = torch.accelerator.memory_allocated(0)
    for call in ("first call (compiles)", "second call (cached graph)"):
        with pytest.raises(torch.OutOfMemoryError, match="cudadev"):
            compiled(x)
        torch.cudadev.synchronize()
        assert torch.accelerator.memory_allocated(0) == before, f"memory left allocated after the {call}"
    # The device, the allocator and torch.compile keep working.
    small = torch.compile(lambda t: (t * 2).sum())
    assert small(torch.ones(1024, device="cudadev")).item() == 2048.0
