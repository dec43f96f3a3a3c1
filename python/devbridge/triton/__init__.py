"""devbridge for Triton: kernels compiled by Triton, launched on plugin devices.

  activate() / deactivate()   make devbridge's Triton driver the active one
                              (both also work as context managers); needed
                              only where another Triton backend is active
                              (cuda on a GPU host): where the plugin is the
                              only accelerator, Triton picks devbridge's
                              driver by itself (backend/driver.py)
  declare_hardware()          a plugin says which Triton compiler and kernel
                              runtime serve its device (hardware.py)
  compiling_source()          for a hardware compiler's stages: the source
                              Triton is compiling
  policy                      the registry of host-runtime policies; the
                              generic `torch_plugin` one serves any plugin
  Launcher                    the launcher the driver hands out as
                              `launcher_cls` (devbridge.launch has the
                              non-Triton face)

Importing this package imports neither Triton nor devbridge's extension
(plugins declare their hardware from autoload hooks, possibly while devbridge
itself is still being imported); activate() imports Triton.
"""

from __future__ import annotations

import threading

from . import policy
from .hardware import declare_hardware, declared


def __getattr__(name):
    if name == "Launcher":
        from .._C import Launcher

        return Launcher
    raise AttributeError(f"module 'devbridge.triton' has no attribute {name!r}")



def compiling_source():
    """The source triton.compile() is compiling on this thread (an ASTSource
    for a @triton.jit function, an IRSource for an IR file), or None outside
    a compile. For a hardware compiler's add_stages, which Triton hands only
    the IR: a compiler whose binary refers back to the kernel's Python
    function reads it here (docs/plugin-authors.md §6)."""
    from .. import _triton_api

    return _triton_api.compiling_source()


_lock = threading.Lock()
_driver = None


def driver():
    """devbridge's Triton driver (created once; not necessarily active)."""
    global _driver
    with _lock:
        if _driver is None:
            from .. import _triton_api

            _triton_api.check_version()
            from .backend.driver import DevbridgeDriver

            _driver = DevbridgeDriver()
        return _driver


def activate():
    """Make devbridge's driver Triton's active driver and return it.

    Needed where another Triton backend is active (cuda on a GPU host beside
    the plugin): Triton keeps that one as its default. Where the plugin is the
    only accelerator, Triton's default is devbridge's driver already.

    Use it as a context manager to deactivate on exit:

        with devbridge.triton.activate():
            kernel[grid](x, y)       # x, y on the plugin device

    Calls nest: each deactivate() undoes one activate(), so an inner `with
    activate():` leaves the driver active for the outer one. Triton has one
    active driver per process, so this is process-wide, not per thread.
    """
    from . import _activation

    ours = driver()
    _activation.push(ours)
    return ours


class _Deactivation:
    """deactivate()'s result: as a context manager, re-activates on exit."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        activate()
        return False


def deactivate() -> _Deactivation:
    """Undo the last activate(): restore the driver that was active before it
    (Triton's own default when there was none). A no-op when devbridge's
    driver is not active."""
    from . import _activation
    from .backend.driver import DevbridgeDriver

    _activation.pop(DevbridgeDriver.instance())
    return _Deactivation()


def is_active() -> bool:
    """devbridge's driver is Triton's active one now (set by activate(), or
    Triton's default where no other backend is active, once Triton used it)."""
    from .. import _triton_api
    from .backend.driver import DevbridgeDriver

    ours = DevbridgeDriver.instance()
    return ours is not None and _triton_api.active_driver_or_none() is ours


__all__ = ["Launcher", "activate", "compiling_source", "deactivate", "declare_hardware", "declared", "driver",
           "is_active", "policy"]
