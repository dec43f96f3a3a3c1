"""devbridge's kernel runtimes by name, and the kernel-runtime specs that
name them: the one place that knows both spellings.

  a name and a library     launch.kernel_runtime("simdev", library=...)
  a spec                   what a plugin declares as its hardware's kernel
                           runtime (devbridge.triton.declare_hardware):
                           "cuda", "host", "simdev:<library path>", its own
                           'devbridge_kernel_runtime' capsule, or a function
                           returning that capsule (called when the runtime is
                           first needed: for a capsule that cannot be made
                           while the plugin is imported)
  Python kernels           launch.python_kernel_runtime(...): a runtime whose
                           programs are Python calls on the plugin's stream
                           (python_kernel_runtime below)
  host kernels             launch.host_kernel_runtime(...): a runtime whose
                           programs are Python calls on the launching thread,
                           after the plugin's current stream was synchronized
                           (host_kernel_runtime below); the "host" spec is
                           the one running the interpreter Triton target
                           (devbridge.triton.interpreter)

resolve(spec) turns a spec into the capsule; runtime_name(spec) names it
for cache keys without opening anything. _C is imported only where a
runtime is opened or named, so declare_hardware's check of a spec (while
`import triton` may still be running) loads nothing.

"simdev-interpreter:<library path>" is an older spelling, kept so that
declarations written for it still work: the runtime of simdev's Triton
target, which simdev's package makes (its `factory` below).
"""

from __future__ import annotations

from typing import Any, NamedTuple

CAPSULE = "devbridge_kernel_runtime"


class _Runtime(NamedTuple):
    name: str
    needs_library: bool
    declarable: bool   # a spec may name it: the Triton driver launches its default-layout launchers
    opens: str = ""    # what it opens itself, for the refusal of a library (runtimes without one)
    # "module:function" that makes it: function(library) of a plugin, for older
    # spellings; function() of devbridge's Triton layer, which this core module
    # names without importing (the "host" runtime runs the interpreter target)
    factory: str = ""


# Every kernel runtime devbridge has, in the order messages list them.
# "ascend" is launched only by the Ascend driver's own launchers
# (devbridge.triton.ascend), so no spec names it.
RUNTIMES = (
    _Runtime("cuda", needs_library=False, declarable=True, opens="libcuda.so.1"),
    _Runtime("ascend", needs_library=False, declarable=False,
             opens="CANN's libascendcl.so; DEVBRIDGE_ASCENDCL_LIBRARY names another path"),
    _Runtime("host", needs_library=False, declarable=True,
             opens="nothing: it runs the interpreter Triton target's programs on the launching thread",
             factory="devbridge.triton.interpreter:host_kernel_runtime"),
    _Runtime("simdev", needs_library=True, declarable=True),
    _Runtime("simdev-interpreter", needs_library=True, declarable=True,
             factory="torch_simdev.triton_target:kernel_runtime"),
)
_BY_NAME = {runtime.name: runtime for runtime in RUNTIMES}


def _listing(items: list[str], last: str) -> str:
    return ", ".join(items[:-1]) + f" {last} " + items[-1]


#: The accepted names of launch.kernel_runtime, for its messages.
NAMES = _listing([repr(runtime.name) for runtime in RUNTIMES], "and")
#: The accepted specs, for the messages of every face that takes one.
SPECS = _listing([repr(runtime.name + ":<library path>" if runtime.needs_library else runtime.name)
                  for runtime in RUNTIMES if runtime.declarable] + [f"a '{CAPSULE}' capsule"], "or")


def _is_capsule(value: Any) -> bool:
    return type(value).__name__ == "PyCapsule"


def is_spec(spec: Any) -> bool:
    """Whether `spec` has a spec's type (a string, a capsule or a function);
    its value is checked where it is resolved."""
    return isinstance(spec, str) or _is_capsule(spec) or callable(spec)


def check_type(spec: Any, what: str = "kernel_runtime") -> None:
    if not is_spec(spec):
        raise TypeError(f"devbridge: {what} must be {SPECS}, got {type(spec).__name__}; a plugin whose capsule "
                        "cannot be made yet may pass the function that makes it")


def open_runtime(name: str, library: str | None = None):
    """The kernel runtime `name` (library: the library it needs), a capsule."""
    from . import _C

    runtime = _BY_NAME.get(name)
    if runtime is None:
        raise ValueError(f"devbridge: unknown kernel runtime {name!r}; devbridge has {NAMES}, "
                         f"and a plugin may pass its own table as a '{CAPSULE}' capsule")
    if not runtime.needs_library:
        if library is not None:
            raise ValueError(f"devbridge: the {name} kernel runtime takes no library (it opens {runtime.opens})")
        if runtime.factory:
            return _from_factory(runtime)
        return _C.cuda_kernel_runtime() if name == "cuda" else _C.ascend_kernel_runtime()
    if not library:
        raise ValueError(f"devbridge: the {name} kernel runtime needs library=<path of "
                         "libsimdev_runtime.so> (torch_simdev.runtime_library_path())")
    if runtime.factory:
        return _from_factory(runtime, library)
    return _C.simdev_kernel_runtime(library)


def _from_factory(runtime: _Runtime, *library: str):
    """The runtime a package makes: a plugin's (an older spelling's row, with
    its library) or devbridge's Triton layer's (no library)."""
    import importlib

    module, _, function = runtime.factory.partition(":")
    try:
        make = getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as error:
        raise RuntimeError(f"devbridge: the {runtime.name} kernel runtime is made by {runtime.factory}, which "
                           f"cannot be imported ({error}); install the plugin that provides it") from error
    return _checked_capsule(make(*library), runtime.factory)


def _checked_capsule(runtime: Any, made_by: str):
    if not _is_capsule(runtime):
        raise TypeError(f"devbridge: {made_by} must return a '{CAPSULE}' capsule, got {type(runtime).__name__}")
    return runtime


def parse(spec: str, owner: str = "") -> tuple[str, str | None]:
    """(name, library) of a spec string; `owner` (" declared for 'dev'")
    says in the refusal whose spec it is."""
    for runtime in RUNTIMES:
        if not runtime.declarable:
            continue
        if not runtime.needs_library and spec == runtime.name:
            return runtime.name, None
        if runtime.needs_library and spec.startswith(runtime.name + ":"):
            return runtime.name, spec[len(runtime.name) + 1:]
    raise ValueError(f"devbridge: unknown kernel runtime {spec!r}{owner}; use {SPECS}")


def resolve(spec: Any, owner: str = ""):
    """The 'devbridge_kernel_runtime' capsule a spec names: a capsule is
    returned as is, a function is called, a string is opened (see parse)."""
    check_type(spec)
    if _is_capsule(spec):
        return spec
    if not isinstance(spec, str):
        return _checked_capsule(spec(), f"the kernel runtime function {_function_name(spec)}{owner}")
    return open_runtime(*parse(spec, owner))


def _function_name(function: Any) -> str:
    return f"{getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', repr(function))}"


def runtime_name(spec: Any) -> str:
    """A spec's name for cache keys: the spec string itself (it names the
    library too), the function's qualified name, or the name a capsule's
    table gives; nothing is opened."""
    if isinstance(spec, str):
        return spec
    if not _is_capsule(spec):
        return _function_name(spec)
    from . import _C

    return _C.kernel_runtime_name(spec)


def runtime_kind(spec: Any) -> str | None:
    """The runtime a spec string names, without its library ("simdev" for
    "simdev:<path>"); None for a capsule (the plugin's own runtime)."""
    return spec.partition(":")[0] if isinstance(spec, str) else None


# ---------------------------------------------------------------- Python kernels

_stop_registered = False


def python_kernel_runtime(name: str, *, library: str, load, run):
    """A kernel runtime whose kernels are Python (launch.python_kernel_runtime)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"devbridge: a Python kernel runtime needs a name for messages, got {name!r}")
    if not isinstance(library, str) or not library:
        raise ValueError("devbridge: a Python kernel runtime needs library=<path of libsimdev_runtime.so> "
                         "(torch_simdev.runtime_library_path()): its programs run on simdev's streams")
    for role, function in (("load", load), ("run", run)):
        if not callable(function):
            raise TypeError(f"devbridge: a Python kernel runtime's {role} must be callable, got "
                            f"{type(function).__name__}")
    from . import _C

    def load_then_stop_at_exit(image: bytes) -> int:
        _stop_at_exit()
        return load(image)

    return _C.python_kernel_runtime(name, library, _trampoline(), load_then_stop_at_exit, run)


def host_kernel_runtime(name: str, *, load, run):
    """A kernel runtime whose kernels are Python, run on the launching thread
    (launch.host_kernel_runtime)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"devbridge: a host kernel runtime needs a name for messages, got {name!r}")
    for role, function in (("load", load), ("run", run)):
        if not callable(function):
            raise TypeError(f"devbridge: a host kernel runtime's {role} must be callable, got "
                            f"{type(function).__name__}")
    from . import _C

    return _C.host_kernel_runtime(name, load, run)


def _stop_at_exit() -> None:
    """From the first load on, at exit: the plugin's queues are first
    finished while the interpreter is whole (queued Python kernels run to
    the end, as a device finishes its queues), then programs queued later
    are skipped rather than run in a finalizing interpreter. Finishing first
    makes the order of exit hooks irrelevant: a plugin's own drain, registered
    before or after this one, finds its queues done or finishes them itself."""
    global _stop_registered
    if not _stop_registered:
        import atexit

        atexit.register(_finish_queues_then_stop)
        _stop_registered = True


def _finish_queues_then_stop() -> None:
    import sys

    import torch

    from . import _C

    try:
        accelerator = torch.accelerator.current_accelerator()
        if accelerator is not None and accelerator.type == _C.plugin_name():
            for index in range(torch.accelerator.device_count()):
                torch.accelerator.synchronize(index)
    except Exception as error:  # noqa: BLE001  (reported; the exit goes on)
        print(f"devbridge: work queued on the plugin device failed while the process exited: {error}",
              file=sys.stderr)
    finally:
        _C._stop_python_kernels_at_exit()


def _trampoline() -> str:
    import glob
    import os

    from . import _C

    found = glob.glob(os.path.join(os.path.dirname(os.path.abspath(_C.__file__)), "_python_kernel_trampoline*.so"))
    if not found:
        raise RuntimeError("devbridge: the Python kernel trampoline (_python_kernel_trampoline.so) is missing from "
                           "the devbridge package; reinstall devbridge")
    return found[0]
