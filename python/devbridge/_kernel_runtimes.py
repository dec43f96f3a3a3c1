"""devbridge's kernel runtimes by name, and the kernel-runtime specs that
name them: the one place that knows both spellings.

  a name and a library     launch.kernel_runtime("simdev", library=...)
  a spec                   what a plugin declares as its hardware's kernel
                           runtime (devbridge.triton.declare_hardware):
                           "cuda", "simdev:<library path>",
                           "simdev-interpreter:<library path>", or its own
                           'devbridge_kernel_runtime' capsule

resolve(spec) turns a spec into the capsule; runtime_name(spec) names it
for cache keys without opening anything. _C is imported only where a
runtime is opened or named, so declare_hardware's check of a spec (while
`import triton` may still be running) loads nothing.
"""

from __future__ import annotations

from typing import Any, NamedTuple

CAPSULE = "devbridge_kernel_runtime"


class _Runtime(NamedTuple):
    name: str
    needs_library: bool
    declarable: bool   # a spec may name it: the Triton driver launches its default-layout launchers
    opens: str = ""    # what it opens itself, for the refusal of a library (runtimes without one)


# Every kernel runtime devbridge has, in the order messages list them.
# "ascend" is launched only by the Ascend driver's own launchers
# (devbridge.triton.ascend), so no spec names it.
RUNTIMES = (
    _Runtime("cuda", needs_library=False, declarable=True, opens="libcuda.so.1"),
    _Runtime("ascend", needs_library=False, declarable=False,
             opens="CANN's libascendcl.so; DEVBRIDGE_ASCENDCL_LIBRARY names another path"),
    _Runtime("simdev", needs_library=True, declarable=True),
    _Runtime("simdev-interpreter", needs_library=True, declarable=True),
)
_BY_NAME = {runtime.name: runtime for runtime in RUNTIMES}


def _listing(items: list[str], last: str) -> str:
    return ", ".join(items[:-1]) + f" {last} " + items[-1]


#: The accepted names of launch.kernel_runtime, for its messages.
NAMES = _listing([repr(runtime.name) for runtime in RUNTIMES], "and")
#: The accepted specs, for the messages of every face that takes one.
SPECS = _listing([repr(runtime.name + ":<library path>" if runtime.needs_library else runtime.name)
                  for runtime in RUNTIMES if runtime.declarable] + [f"a '{CAPSULE}' capsule"], "or")


def is_spec(spec: Any) -> bool:
    """Whether `spec` has a spec's type (a string or a capsule); its value is
    checked where it is resolved."""
    return isinstance(spec, str) or type(spec).__name__ == "PyCapsule"


def check_type(spec: Any, what: str = "kernel_runtime") -> None:
    if not is_spec(spec):
        raise TypeError(f"devbridge: {what} must be {SPECS}, got {type(spec).__name__}")


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
        return _C.cuda_kernel_runtime() if name == "cuda" else _C.ascend_kernel_runtime()
    if not library:
        raise ValueError(f"devbridge: the {name} kernel runtime needs library=<path of "
                         "libsimdev_runtime.so> (torch_simdev.runtime_library_path())")
    if name == "simdev":
        return _C.simdev_kernel_runtime(library)
    return _C.simdev_interpreter_kernel_runtime(library, _simdev_interpreter_trampoline())


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
    returned as is, a string is opened (see parse)."""
    check_type(spec)
    if not isinstance(spec, str):
        return spec
    return open_runtime(*parse(spec, owner))


def runtime_name(spec: Any) -> str:
    """A spec's name for cache keys: the spec string itself (it names the
    library too), or the name a capsule's table gives; nothing is opened."""
    if isinstance(spec, str):
        return spec
    from . import _C

    return _C.kernel_runtime_name(spec)


def runtime_kind(spec: Any) -> str | None:
    """The runtime a spec string names, without its library ("simdev" for
    "simdev:<path>"); None for a capsule (the plugin's own runtime)."""
    return spec.partition(":")[0] if isinstance(spec, str) else None


def _simdev_interpreter_trampoline() -> str:
    import glob
    import os

    from . import _C

    found = glob.glob(os.path.join(os.path.dirname(os.path.abspath(_C.__file__)), "_simdev_interpreter*.so"))
    if not found:
        raise RuntimeError("devbridge: the simdev interpreter trampoline (_simdev_interpreter.so) is missing from "
                           "the devbridge package; reinstall devbridge")
    return found[0]
