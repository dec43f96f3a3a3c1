"""devbridge: DLPack/TVM-FFI and Triton kernels on any PyTorch PrivateUse1 plugin.

The package is a thin front over the C++ core in devbridge._C:
  install() / uninstall() / is_installed()     the DLPack exchange table on torch.Tensor
                                               (install() also arms devbridge.inductor)
  exchange_api() / torch_exchange_api()        devbridge's and PyTorch's tables (capsules)
  runtime_api()                                devbridge's runtime table (capsule)
  register_stream_resolver()                   native stream handles for older plugins
  register_submit_hook()                       hand launches to a plugin's task queue
  launch / triton                              the generic kernel launcher (submodules)
  inductor                                     torch.compile on the plugin device (submodule)
  current_stream() / device_count() / plugin_name()
"""

from __future__ import annotations

# `import devbridge` may be what first imports torch, and torch's autoload then
# runs the plugin's hook, which calls devbridge.install() on this half-imported
# module. Record that call and carry it out once the package is complete.
_install_requested_during_import = None


def install(*, allow_null_stream=False, accept_ascend_device_type=False,
            export_ascend_device_type=False):
    global _install_requested_during_import
    _install_requested_during_import = dict(
        allow_null_stream=allow_null_stream, accept_ascend_device_type=accept_ascend_device_type,
        export_ascend_device_type=export_ascend_device_type)


from ._torch_version import load_extension  # noqa: E402

_C = load_extension()

from ._exchange import exchange_api, is_installed, torch_exchange_api, uninstall  # noqa: E402
from ._exchange import install as _install_exchange_table  # noqa: E402
from ._runtime import (  # noqa: E402
    current_stream,
    device_count,
    plugin_name,
    register_stream_resolver,
    register_submit_hook,
    runtime_api,
    unregister_stream_resolver,
)



def install(*, allow_null_stream=False, accept_ascend_device_type=False,  # noqa: F811
            export_ascend_device_type=False):
    """Put devbridge's DLPack exchange table on torch.Tensor (idempotent; the
    options: devbridge._exchange.install), and register the plugin device
    with torch.compile when Dynamo loads (devbridge.inductor.arm)."""
    _install_exchange_table(allow_null_stream=allow_null_stream,
                            accept_ascend_device_type=accept_ascend_device_type,
                            export_ascend_device_type=export_ascend_device_type)
    from .inductor import arm

    arm()


if _install_requested_during_import is not None:
    install(**_install_requested_during_import)
del _install_requested_during_import

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
    "register_stream_resolver",
    "register_submit_hook",
    "runtime_api",
    "torch_exchange_api",
    "uninstall",
    "unregister_stream_resolver",
]
