"""The first lines of every kernel module devbridge's codegen writes.

Inductor compiles kernels in worker processes: fresh Python processes started
from the parent's environment. Where the plugin is autoloaded there, it has
registered itself already and prepare() returns at once. Where it is not
(TORCH_DEVICE_BACKEND_AUTOLOAD=0, a process importing plugins explicitly),
prepare() loads the plugin through its `torch.backends` entry point, the hook
torch's autoload would have called, or, for a plugin without one, by
importing its package. Then it registers what the module's
kernels need at run time (devbridge.inductor.register_runtime(): the device
interface and the driver routing), not Inductor's compiler, which a worker
never runs and whose import would cost every fresh worker about a second at
its first kernel. A process that compiles has run register() already.
"""

from __future__ import annotations

_prepared: str | None = None


def prepare(device: str, plugin_entry_point: str | None) -> None:
    global _prepared
    if _prepared == device:
        return

    from .. import _C
    from ..triton.hardware import declared

    if (_C.plugin_name() != device or declared(device) is None) and plugin_entry_point:
        _load_plugin(plugin_entry_point)
    from . import register_runtime

    register_runtime(device)
    _prepared = device


def _load_plugin(entry_point: str) -> None:
    """Loads "module:function" and calls it, or imports "module"."""
    import importlib.metadata

    hook = importlib.metadata.EntryPoint(name="plugin", value=entry_point, group="torch.backends").load()
    if callable(hook):
        hook()
