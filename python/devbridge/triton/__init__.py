"""devbridge for Triton: kernels compiled by Triton, launched on plugin devices.

  Launcher     the launcher a Triton driver hands out as `launcher_cls`:
               Launcher(src, metadata), then called exactly as Triton calls
               launchers (devbridge.launch has the non-Triton face)
"""

from __future__ import annotations

from .. import _C

Launcher = _C.Launcher


def _register_hook_chain_type() -> None:
    # An empty HookChain (what Triton passes when no hook is set) is skipped
    # without a Python call once the launcher knows the type. Triton < 3.5
    # passes None instead, which needs nothing.
    try:
        from triton.knobs import HookChain
    except ImportError:
        return
    _C._set_hook_chain_type(HookChain)


_register_hook_chain_type()

__all__ = ["Launcher"]
