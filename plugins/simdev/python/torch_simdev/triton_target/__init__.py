"""simdev's Triton target: devbridge's interpreter target (kernels run by
Triton's own interpreter over simdev memory in place), with simdev's own
kernel runtime, which runs the programs on simdev's stream workers. For tests,
not speed: CI has no GPU, yet devbridge's whole Triton path runs for real on
it (docs/simdev.md, "simdev's Triton target").

It is served through the extension points any plugin uses
(docs/plugin-authors.md §6): torch_simdev declares

    devbridge.triton.declare_hardware("simdev", compiler=COMPILER, kernel_runtime=kernel_runtime)

  COMPILER         "interpreter": devbridge's interpreter compiler
                   (devbridge.triton.interpreter: NVIDIA's front end, a binary
                   that describes the kernel for Triton's interpreter)
  kernel_runtime   the kernel runtime, made when devbridge's driver first
                   needs it: devbridge's Python kernel runtime over simdev's
                   stream (devbridge.launch.python_kernel_runtime), whose
                   programs are the interpreter's run_program calls, queued
                   and run asynchronously like any simdev kernel

Any plugin whose tensors live in host memory can declare the same compiler
with devbridge's generic kernel_runtime="host" instead, which needs no runtime
library (a synchronous launch on the current stream); simdev keeps its own
runtime, whose launches are asynchronous as a device's are, and its tests
declare "host" on simdev too (tests/python/test_triton_host_target.py).

Importing this package imports neither Triton nor devbridge: torch_simdev
declares its hardware while `import torch` (or `import devbridge`) may still
be running.
"""

from __future__ import annotations

import threading

#: The compiler simdev declares: devbridge's interpreter compiler, by name.
COMPILER = "interpreter"
#: The kernel runtime's name, as devbridge's messages and cache keys give it.
RUNTIME_NAME = "simdev-interpreter"

_lock = threading.Lock()
_runtimes: dict[str, object] = {}


def _load(image: bytes) -> int:
    from devbridge.triton.interpreter import interpreter

    return interpreter.register(image)


def _run(kernel_id: int, program: tuple, grid: tuple, device: int, payload: bytes) -> int:
    # run_program is looked up on every call, so that it can be observed (tests).
    from devbridge.triton.interpreter import interpreter

    try:
        return interpreter.run_program(kernel_id, program, grid, device, payload)
    except Exception as error:  # noqa: BLE001 - the launch fails; simdev reports it at the next synchronization
        # The cause goes into the failure the stream reports (a device fault:
        # torch.AcceleratorError at the next synchronization), not to stderr.
        from .._C import _set_work_failure_message

        # run_program's RuntimeError already names the kernel, the program and the cause's type.
        cause = str(error) if type(error) is RuntimeError else f"{type(error).__name__}: {error}"
        _set_work_failure_message(f"the interpreted Triton kernel {cause}"[:4000])
        return 1


def kernel_runtime(library: str | None = None):
    """The 'devbridge_kernel_runtime' capsule of simdev's Triton target over
    the simdev runtime library at `library` (default: the one this
    torch_simdev loaded), one per library. What simdev declares, uncalled:
    devbridge's driver calls it when it first needs the runtime, once
    devbridge's extension is loaded."""
    if library is None:
        from .. import runtime_library_path

        library = runtime_library_path()
    with _lock:
        runtime = _runtimes.get(library)
        if runtime is None:
            from devbridge import launch

            runtime = launch.python_kernel_runtime(RUNTIME_NAME, library=library, load=_load, run=_run)
            _runtimes[library] = runtime
    return runtime


__all__ = ["COMPILER", "RUNTIME_NAME", "kernel_runtime"]
