"""hostplug: a minimal PrivateUse1 plugin written as a third party would write
one, with nothing of devbridge in its C++ (csrc/: torch and c10 APIs only).

Device memory is host memory; each of its two devices has asynchronous
streams (a worker thread each, csrc/Runtime.h); every operator is queued on
the current stream (csrc/Ops.h, csrc/Fallback.cpp). ``torch.hostplug.set_op_delay_us(us)``
makes each queued operator sleep first, so that a missing synchronisation
shows up as wrong data.

Importing the package claims PrivateUse1 as ``hostplug`` and, where devbridge
is installed, does what docs/plugin-authors.md asks of a plugin: §2's
``devbridge.install()`` and §6's host Triton target. There is no
``torch.backends`` entry point (see pyproject.toml): import it yourself, with
``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` where another plugin is installed.
"""

from __future__ import annotations

import atexit

import torch

_NAME = "hostplug"

if torch._C._get_privateuse1_backend_name() not in ("privateuseone", _NAME):
    raise RuntimeError(f"torch_hostplug cannot load: PrivateUse1 is already the "
                       f"'{torch._C._get_privateuse1_backend_name()}' backend of this process (one PrivateUse1 "
                       "backend per process; set TORCH_DEVICE_BACKEND_AUTOLOAD=0 and import only torch_hostplug)")

from . import _C  # noqa: E402,F401  (loading the library registers the backend with c10 and ATen)
from . import _device  # noqa: E402

if torch._C._get_privateuse1_backend_name() != _NAME:
    torch.utils.rename_privateuse1_backend(_NAME)
    torch._register_device_module(_NAME, _device)
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)


def _install_devbridge() -> None:
    try:
        import devbridge
        from devbridge.triton import declare_hardware
    except ImportError:  # devbridge is optional
        return
    devbridge.install()
    # Tensors are host memory: devbridge's host target runs Triton kernels
    # (torch.compile's too) in Triton's interpreter, ordered on our streams.
    declare_hardware(_NAME, compiler="interpreter", kernel_runtime="host")


_install_devbridge()


@atexit.register
def _drain() -> None:
    # Finish queued work while the interpreter is whole, not during its teardown.
    for index in range(_device.device_count()):
        _device.synchronize(index)
