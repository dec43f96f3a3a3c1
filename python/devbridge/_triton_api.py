"""Every private Triton name devbridge touches, in one place, with the Triton
versions each was checked on (3.6.0 on a GPU machine and in CI, 3.7.1 and
3.8.0 in CI; the ranges are in _versions.py).

  triton.runtime.driver.driver._active   the driver set with set_active(), or
                                         None while Triton would still create
                                         its default lazily (DriverConfig,
                                         runtime/driver.py, 3.6.0, 3.7.1, 3.8.0).
                                         Read and cleared to restore the state
                                         before activate() without creating
                                         Triton's default driver.
  JITFunction.device_caches              keyed by driver.get_current_device()'s
                                         value (runtime/jit.py, 3.6.0-3.8.0):
                                         devbridge's driver answers with an int
                                         subclass of its own so plugin-device
                                         compiles never share an entry with
                                         another driver's device of the same index
  triton.compiler.compiler.compile       its local `src` (the ASTSource being
                                         compiled), for
                                         devbridge.triton.compiling_source():
                                         a stage sees only the IR, and a
                                         hardware compiler whose binary refers
                                         back to the Python function needs it
                                         (3.6.0, 3.7.1, 3.8.0)
  triton.knobs.HookChain                 the type of an empty launch hook
                                         and its `calls` list (3.6.0-3.8.0;
                                         absent before 3.5, where hooks are
                                         None)

  triton.backends.backends               {entry-point name: Backend(compiler,
                                         driver)}, every backend Triton
                                         discovered (backends/__init__.py,
                                         3.6.0-3.8.0); Triton's default
                                         driver is the one whose driver class
                                         reports is_active() (runtime/driver.py
                                         _create_driver, 3.6.0-3.8.0); the
                                         layers below devbridge's driver find
                                         it there (devbridge_driver_or_none)

  CompiledKernel.__del__ /               3.8.0 unloads self.module through
  CompiledKernel._init_handles           driver.active.utils.unload_module at
                                         garbage collection, after
                                         knobs.runtime.kernel_unload_hook
                                         (compiler/compiler.py); 3.6.0 and
                                         3.7.1 have no __del__. Wrapped by
                                         route_kernel_unloads() so that each
                                         kernel is unloaded by the driver that
                                         loaded it (_init_handles: the active
                                         driver loads), not by whichever is
                                         active when it is collected

Public names used elsewhere (checked on the same versions):
triton.runtime.driver.set_active, triton.backends.driver.DriverBase,
triton.backends.compiler.BaseBackend / GPUTarget, triton.testing.do_bench,
triton.__version__.

A Triton outside the checked range is refused at activate() with a clear
error, never run on guesses.
"""

from __future__ import annotations

from ._versions import TRITON_CHECKED, major_minor, require_checked, triton_major_minor

CHECKED_VERSIONS = tuple(major_minor(v) for v in TRITON_CHECKED)  # the range, in _versions.py


def triton_version() -> tuple[int, int]:
    return triton_major_minor()


def check_version() -> None:
    """Refuse a Triton outside _versions.TRITON_CHECKED (or warn, with the opt-in)."""
    require_checked("triton", "devbridge's Triton driver")


def driver_config():
    from triton.runtime.driver import driver

    return driver


def active_driver_or_none():
    """The active driver without creating Triton's default one."""
    return getattr(driver_config(), "_active", None)


def restore_active_driver(previous) -> None:
    """Make `previous` active again; None restores Triton's lazy default."""
    config = driver_config()
    if previous is None:
        config._active = None
    else:
        config.set_active(previous)


def compiling_source():
    """The ASTSource that triton.compile() is compiling on this thread, or None."""
    import sys

    import triton.compiler.compiler as compiler_module

    code = compiler_module.compile.__code__
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code:
            return frame.f_locals.get("src")
        frame = frame.f_back
    return None


def hook_chain_type():
    try:
        from triton.knobs import HookChain
    except ImportError:
        return None
    return HookChain


def launch_hook_is_empty(hook) -> bool:
    """No hook at all: None, or a HookChain with nothing in it."""
    if hook is None:
        return True
    chain_type = hook_chain_type()
    return chain_type is not None and type(hook) is chain_type and not hook.calls


def launch_hooks_empty(runtime=None) -> bool:
    """Neither launch hook is installed in `runtime` (a triton.knobs.runtime,
    the process's own by default: launch_enter_hook / launch_exit_hook, public)."""
    if runtime is None:
        from triton import knobs

        runtime = knobs.runtime
    return launch_hook_is_empty(runtime.launch_enter_hook) and launch_hook_is_empty(runtime.launch_exit_hook)


def devbridge_driver_or_none(own: str = "devbridge"):
    """devbridge's Triton driver if it was created, else None, found the way
    Triton finds it: the driver class of the `own` entry point in Triton's
    backend table, then that class's one instance. The policy registry and
    the torch_plugin policy reach the driver this way to have it bind again
    (select(), register(), configure()) without importing the layer above
    them. Triton is not imported here: before `import triton` (or while it
    runs) no driver can exist yet."""
    import sys

    backends = getattr(sys.modules.get("triton.backends"), "backends", None)
    backend = backends.get(own) if isinstance(backends, dict) else None
    return None if backend is None else backend.driver.instance()


def other_active_backends(own: str = "devbridge") -> list[str]:
    """The Triton backends other than `own` that are active in this process:
    their driver reports is_active(), or (nvidia, amd) torch.cuda is
    available for them, which is how torch 2.13's Inductor also counts them
    (triton_helpers._is_backend_active). A backend whose probe raises is not
    active."""
    import triton.backends

    active = []
    for name, backend in triton.backends.backends.items():
        if name == own:
            continue
        try:
            if backend.driver.is_active():
                active.append(name)
                continue
        except Exception:  # noqa: BLE001 - Triton's own probes may raise where their runtime is broken
            continue
        if name in ("nvidia", "amd"):
            import torch

            if torch.cuda.is_available() and (torch.version.hip is None) == (name == "nvidia"):
                active.append(name)
    return active


def route_kernel_unloads() -> bool:
    """Make every CompiledKernel unload through the driver that loaded it.

    Triton 3.8's CompiledKernel.__del__ unloads through the driver active at
    garbage collection. devbridge switches the active driver (activate(),
    the Inductor routing beside cuda), so a plugin kernel's handle could
    reach cuModuleUnload, or a CUDA module devbridge's driver. The wrapped
    _init_handles remembers the utils of the driver that loaded the kernel;
    the wrapped __del__ hands a devbridge handle to devbridge whatever is
    active, and any other module to the utils that loaded it. Idempotent;
    returns False where CompiledKernel has no __del__ (3.6, 3.7): nothing to
    route there."""
    from triton import knobs
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.driver import driver

    original_del = CompiledKernel.__dict__.get("__del__")
    if original_del is None:
        return False
    if hasattr(original_del, "__devbridge_wraps__"):
        return True
    original_init_handles = CompiledKernel._init_handles

    def _init_handles(self):
        loading = self.module is None
        original_init_handles(self)
        if loading and self.module is not None:
            self._devbridge_loaded_by = driver.active.utils

    def __del__(self):
        module = getattr(self, "module", None)
        if module is None:
            return
        from . import launch

        loaded_by = getattr(self, "_devbridge_loaded_by", None)
        ours = launch.is_loaded(module)
        if not ours and loaded_by is None:
            return original_del(self)  # loaded before devbridge's driver existed: Triton's own way
        if knobs.runtime.kernel_unload_hook is not None:
            knobs.runtime.kernel_unload_hook(self.module, self.function, self.name, self.metadata_group, self.hash)
        if ours:
            launch.unload(module)
        elif type(loaded_by).__module__.split(".")[0] != "devbridge":
            loaded_by.unload_module(module)
        self.module = None

    _init_handles.__devbridge_wraps__ = original_init_handles
    __del__.__devbridge_wraps__ = original_del
    CompiledKernel._init_handles = _init_handles
    CompiledKernel.__del__ = __del__
    return True
