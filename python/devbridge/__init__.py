"""devbridge: DLPack/TVM-FFI and Triton kernels on any PyTorch PrivateUse1 plugin.

The package is a thin front over the C++ core in devbridge._C:
  install() / uninstall() / is_installed()     the DLPack exchange table on torch.Tensor
  exchange_api() / torch_exchange_api()        devbridge's and PyTorch's tables (capsules)
  runtime_api()                                devbridge's runtime table (capsule)
  register_stream_resolver()                   native stream handles for older plugins
  current_stream() / device_count() / plugin_name()
"""

from __future__ import annotations

from ._torch_version import load_extension

_C = load_extension()

from ._exchange import exchange_api, install, is_installed, torch_exchange_api, uninstall  # noqa: E402
from ._runtime import (  # noqa: E402
    current_stream,
    device_count,
    plugin_name,
    register_stream_resolver,
    runtime_api,
    unregister_stream_resolver,
)

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
    "runtime_api",
    "torch_exchange_api",
    "uninstall",
    "unregister_stream_resolver",
]
