"""simdev's Triton target: kernels run by Triton's own interpreter, program by
program on simdev's stream workers, over simdev memory in place. For tests,
not speed: CI has no GPU, yet devbridge's whole Triton path runs for real on
it (docs/simdev.md, "simdev's Triton target").

It is served through the extension points any plugin uses
(docs/plugin-authors.md §6): torch_simdev declares

    devbridge.triton.declare_hardware("simdev", compiler=COMPILER, kernel_runtime=kernel_runtime)

  compiler.py      the compiler: NVIDIA's front end, a binary that describes
                   the kernel for the interpreter (and devbridge's hooks:
                   kernels are not timed, no cache to flush, the Python
                   function found before a kernel loads)
  kernel_runtime   the kernel runtime, made when devbridge's driver first
                   needs it: devbridge's Python kernel runtime over simdev's
                   stream (devbridge.launch.python_kernel_runtime), whose
                   programs are interpreter.run_program calls
  interpreter.py   the binary's format, loading and running one program
                   (source.py, memory.py, libdevice.py its parts;
                   _triton_api.py every private Triton name they use)

Importing this package imports neither Triton nor devbridge: torch_simdev
declares its hardware while `import torch` (or `import devbridge`) may still
be running.
"""

from __future__ import annotations

import sys
import threading

#: The compiler simdev declares (devbridge imports it when it compiles).
COMPILER = "torch_simdev.triton_target.compiler:InterpreterBackend"
#: The kernel runtime's name, as devbridge's messages and cache keys give it.
RUNTIME_NAME = "simdev-interpreter"

_lock = threading.Lock()
_runtimes: dict[str, object] = {}
_interpreter = None  # the interpreter module, imported at the first load (it needs numpy)


def _interpreter_module():
    global _interpreter
    if _interpreter is None:
        from . import interpreter

        _interpreter = interpreter
    return _interpreter


def _load(image: bytes) -> int:
    return _interpreter_module().register(image)


def _run(kernel_id: int, program: tuple, grid: tuple, device: int, payload: bytes) -> int:
    # run_program is looked up on every call, so that it can be observed (tests).
    try:
        return _interpreter_module().run_program(kernel_id, program, grid, device, payload)
    except Exception as error:  # noqa: BLE001 - the launch fails; simdev reports it at the next synchronization
        message = f"{type(error).__name__}: {error}"
        print(f"devbridge: an interpreted Triton kernel failed on simdev:{device}: {message[:2000]}", file=sys.stderr)
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
