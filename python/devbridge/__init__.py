"""devbridge: DLPack/TVM-FFI and Triton kernels on any PyTorch PrivateUse1 plugin.

The package is a thin front over the C++ core in devbridge._C:
  install() / uninstall() / is_installed()     the DLPack exchange table on torch.Tensor
  exchange_api() / torch_exchange_api()        devbridge's and PyTorch's tables (capsules)
  runtime_api()                                devbridge's runtime table (capsule)
  register_stream_resolver()                   native stream handles for older plugins
  register_current_stream_query()              a plugin's fast current-stream query (C)
  register_external_stream_hook()              a plugin's map from native streams to c10's
  register_submit_hook()                       hand launches to a plugin's task queue
  register_graph_api()                         a plugin's graph-capture table (devbridge.graphs)
  launch / triton                              the generic kernel launcher (submodules)
  inductor                                     torch.compile on the plugin device (submodule;
                                               install() arms it)
  current_stream() / device_count() / plugin_name()
"""

from __future__ import annotations

# `import devbridge` may be what first imports torch, and torch's autoload then
# runs the plugin's hook, which calls devbridge.install() (and registers its
# stream hooks) on this half-imported module. Record those calls and carry
# them out, in order, once the package is complete.
_calls_during_import: list = []


def _recorded(name):
    def record(*args, **kwargs):
        _calls_during_import.append((name, args, kwargs))

    record.__name__ = name
    return record


install = _recorded("install")
register_current_stream_query = _recorded("register_current_stream_query")
register_external_stream_hook = _recorded("register_external_stream_hook")
register_graph_api = _recorded("register_graph_api")

from ._torch_version import load_extension  # noqa: E402

_C = load_extension()

from ._exchange import exchange_api, is_installed, torch_exchange_api, uninstall  # noqa: E402
from ._exchange import install as _install_exchange_table  # noqa: E402
from ._runtime import (  # noqa: E402,F811
    current_stream,
    device_count,
    plugin_name,
    register_current_stream_query,
    register_external_stream_hook,
    register_stream_resolver,
    register_submit_hook,
    runtime_api,
    unregister_stream_resolver,
)
from .graphs import register_graph_api  # noqa: E402,F811


def install(**options) -> None:  # noqa: F811
    """devbridge._exchange.install(**options) (the DLPack exchange table and the
    Python protocol on torch.Tensor; see its options), then register the plugin
    device with torch.compile at Dynamo's first compile (devbridge.inductor.arm)."""
    _install_exchange_table(**options)
    from .inductor import arm

    arm()


def _replay(calls) -> None:
    for name, args, kwargs in calls:
        globals()[name](*args, **kwargs)


_replay(_calls_during_import)
del _calls_during_import, _recorded, _replay

__version__ = "0.1.0"
#: The torch version devbridge._C was compiled against (checked at import).
built_with_torch: str = _C.built_with_torch

__all__ = [
    "__version__",
    "built_with_torch",
    "current_stream",
    "device_count",
    "exchange_api",
    "install",
    "is_installed",
    "plugin_name",
    "register_graph_api",
    "register_current_stream_query",
    "register_external_stream_hook",
    "register_stream_resolver",
    "register_submit_hook",
    "runtime_api",
    "torch_exchange_api",
    "uninstall",
    "unregister_stream_resolver",
]
