"""Out of memory inside a compiled graph on a plugin device: the buffer
allocation of Inductor's wrapper (devbridge's plugin_empty_strided) raises
torch.OutOfMemoryError with the plugin's message, as eager allocation and
cuda's compiled graphs do, so code that catches it to shrink a batch works;
and the process keeps working afterwards (memory returned, later calls right).

On the first call of a graph AOTAutograd's runtime puts a dispatch mode
around it, and reduce-overhead's partitions allocate through Inductor's
generic empty_strided (torch.ops.aten.empty_strided): both went through
pybind11's exception translators, where devbridge's, once global, made the
plugin's error a bare MemoryError; both the first and a later call are
tested, in the default mode and under reduce-overhead (whose capture, out of
memory, leaves the graph uncaptured). simdev's SIMDEV_MEMORY_CAPACITY makes
the out-of-memory deterministic; it is fixed per process, hence the
subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")

from launch_support import skip_without_simdev  # noqa: E402

pytestmark = skip_without_simdev

MIB = 1 << 20

SCRIPT = textwrap.dedent("""
    import gc, json, sys
    import torch, torch_simdev

    def three(x):
        return x + 1, x * 2, x - 3

    seen = {}
    compiled = torch.compile(three, dynamic=False, mode=sys.argv[1])
    small = torch.ones(1024, device="simdev")
    compiled(small), compiled(small)  # reduce-overhead: warmed up and captured
    base = torch.simdev.memory_allocated()
    big = torch.ones(6 * (1 << 20) // 4, device="simdev")  # three 6 MiB outputs in 16 MiB
    for call in ("first call", "later call"):
        try:
            compiled(big)
        except Exception as error:
            seen[call] = {"type": f"{type(error).__module__}.{type(error).__name__}", "message": str(error),
                          "is_oom": isinstance(error, torch.OutOfMemoryError)}
        else:
            seen[call] = {"type": None}
    del big
    gc.collect()
    seen["memory back"] = torch.simdev.memory_allocated() == base
    out = compiled(small)
    seen["later result right"] = all(torch.equal(o.cpu(), e) for o, e in zip(out, three(small.cpu())))
    print(json.dumps(seen))
""")


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_out_of_memory_in_a_compiled_graph_is_torch_out_of_memory_error(mode):
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", SIMDEV_MEMORY_CAPACITY=str(16 * MIB))
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    for call in ("first call", "later call"):
        assert seen[call]["type"] == "torch.OutOfMemoryError", (call, seen[call])
        assert seen[call]["is_oom"]
        assert seen[call]["message"].startswith("simdev out of memory on simdev:0: tried to allocate 6.00 MiB"), seen
    assert seen["memory back"], seen
    assert seen["later result right"], seen
