"""The interpreter Triton target: kernels compiled by Triton's front end into a
description that Triton's own interpreter runs, program by program, over the
plugin's memory in place. For plugins whose tensors live in host memory: the
path for bring-up, and for CI before a plugin's own compiler exists
(docs/plugin-authors.md §6, "Triton targets").

Any such plugin declares it with devbridge's host kernel runtime:

    devbridge.triton.declare_hardware("<device>", compiler="interpreter", kernel_runtime="host")

  compiler="interpreter"   compiler.py's InterpreterBackend (NVIDIA's front
                           end; the binary is JSON for the interpreter, never
                           user data; kernels are not timed by autotuning)
  kernel_runtime="host"    devbridge's host kernel runtime
                           (src/python/host_kernel_runtime.cpp): a launch
                           waits for the work queued on the plugin's current
                           stream (the c10 guard's synchronizeStream), then
                           runs every program on the launching thread (this
                           package's run), so later work on the stream comes
                           after it; nothing of the plugin's runtime library
                           is used, only its c10 device guard

simdev declares the same compiler with its own kernel runtime, which runs the
programs on its stream workers (torch_simdev.triton_target).

  interpreter.py   the binary's format, loading (register) and running one
                   program (run_program); source.py, memory.py (and
                   address_space.py), libdevice.py (and its libdevice_*.py
                   tables), dot.py and casts.py its parts; _triton_api.py every private Triton
                   name they use, with the Triton versions checked

Importing this package imports neither Triton nor devbridge's extension
(declare_hardware names it while `import triton` may still be running).
"""

from __future__ import annotations

import threading

#: The compiler's name for declare_hardware, and its class.
COMPILER = "interpreter"
COMPILER_CLASS = "devbridge.triton.interpreter.compiler:InterpreterBackend"
#: The kernel runtime spec of the host kernel runtime.
HOST_RUNTIME = "host"

_lock = threading.Lock()
_host_runtime = None


def load(image: bytes) -> int:
    """A binary registered with the interpreter: its nonzero id."""
    from . import interpreter

    return interpreter.register(image)


def run(kernel_id: int, program: tuple, grid: tuple, device: int, payload: bytes) -> int:
    """One program of a launch (payload: the parameters, an 8-byte slot each).
    run_program is looked up on every call, so that it can be observed (tests)."""
    from . import interpreter

    return interpreter.run_program(kernel_id, program, grid, device, payload)


def host_kernel_runtime():
    """The 'devbridge_kernel_runtime' capsule of the host kernel runtime (one
    per process): what kernel_runtime="host" resolves to."""
    global _host_runtime
    with _lock:
        if _host_runtime is None:
            from ... import _kernel_runtimes

            _host_runtime = _kernel_runtimes.host_kernel_runtime(HOST_RUNTIME, load=load, run=run)
        return _host_runtime


__all__ = ["COMPILER", "COMPILER_CLASS", "HOST_RUNTIME", "host_kernel_runtime", "load", "run"]
