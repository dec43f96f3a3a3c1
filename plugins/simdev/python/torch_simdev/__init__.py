"""simdev: a CPU-simulated asynchronous accelerator as a PyTorch backend.

Importing this package (PyTorch does it at ``import torch`` through the
``torch.backends`` entry point) claims PyTorch's PrivateUse1 device type under
the name ``simdev``: ``torch.device("simdev:1")``, ``Tensor.to("simdev")``,
``torch.Stream(device="simdev")``, ``torch.Event``, ``torch.accelerator.*`` and
the ``torch.simdev`` module all work.

Operators on simdev tensors are asynchronous and ordered by streams, like a
real device; a debug delay (``torch.simdev.op_delay(us)`` or the environment
variable ``SIMDEV_OP_DELAY_US``) makes a missing synchronization show up as
wrong data. Environment: ``SIMDEV_DEVICE_COUNT`` (default 2),
``SIMDEV_MEMORY_CAPACITY`` (bytes per device, default 4 GiB),
``SIMDEV_NATIVE_HANDLE=0`` (register a device guard without
``getStreamNativeHandle``, as a plugin written for torch < 2.11 has, and no
devbridge stream hooks: what devbridge does for such plugins is tested on it).
"""

from __future__ import annotations

import os


def _autoload() -> None:
    """The ``torch.backends`` entry point, called by ``import torch``.

    Importing this package registers simdev. If devbridge is installed, its
    DLPack exchange table is installed too, so TVM-FFI kernels follow simdev's
    current stream: these are the three lines docs/plugin-authors.md asks of a
    plugin. devbridge being absent is fine; any other failure of devbridge is
    raised (PyTorch reports it together with the hint
    TORCH_DEVICE_BACKEND_AUTOLOAD=0).

    Defined before ``import torch`` below: when a user imports torch_simdev
    before torch, torch's autoload calls this hook while this package is still
    being imported, and the hook must already exist then.
    """
    try:
        import devbridge
    except ImportError:
        return
    devbridge.install()
    global _stream_hooks_pending
    if "_C" in globals():
        _register_stream_hooks(devbridge)
    else:  # this package is still being imported: finished at its end
        _stream_hooks_pending = True
    # Triton: simdev has no instruction set; its kernels run in Triton's
    # interpreter, launched through simdev's own module API (tests only).
    try:
        from devbridge.triton import declare_hardware
    except ImportError:  # a devbridge without the Triton integration
        return
    library = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libsimdev_runtime.so")
    declare_hardware("simdev", compiler="interpreter", kernel_runtime="simdev-interpreter:" + library)
    # torch.compile: simdev's convolutions return cuDNN's layouts
    # (csrc/ops/convolution.cpp), channels-last results for channels-last inputs.
    from devbridge.inductor import cudnn_convolution_format, declare_convolution_format

    declare_convolution_format("simdev", cudnn_convolution_format)


_stream_hooks_pending = False


def _register_stream_hooks(devbridge) -> None:
    """devbridge's fast current-stream query and external-stream hook
    (docs/plugin-authors.md). A plugin without a native-handle override
    (SIMDEV_NATIVE_HANDLE=0) stands for an older plugin: it registers neither;
    neither does an older devbridge, which lacks them."""
    if _C.guard_has_native_handle() and hasattr(devbridge, "register_current_stream_query"):
        devbridge.register_current_stream_query(_C.current_stream_query(), "simdev")
        devbridge.register_external_stream_hook(_C.external_stream_hook(), "simdev")


import torch  # noqa: E402  (after _autoload, see its docstring)

__all__ = ["get_include", "runtime_library_path"]

_BACKEND_NAME = "simdev"
_UNCLAIMED_NAME = "privateuseone"  # PrivateUse1's name until a backend renames it


def _check_privateuse1_is_free() -> None:
    # Registration of a guard, allocator and kernels for PrivateUse1 is
    # last-writer-wins, so loading _C over another backend would break it
    # silently. Refuse before loading anything.
    name = torch._C._get_privateuse1_backend_name()
    if name not in (_UNCLAIMED_NAME, _BACKEND_NAME):
        raise RuntimeError(
            f"torch_simdev cannot load: PyTorch's PrivateUse1 device type is already claimed by the "
            f"'{name}' backend, and a process can host only one PrivateUse1 backend. Use simdev in a "
            f"process that does not import '{name}' (or set TORCH_DEVICE_BACKEND_AUTOLOAD=0 and "
            f"import only the backend you need)."
        )


_check_privateuse1_is_free()


def _check_environment() -> None:
    # Read by _C's static initialisers, where an error could not say what is wrong.
    value = os.environ.get("SIMDEV_NATIVE_HANDLE")
    if value not in (None, "0", "1"):
        raise RuntimeError(f"SIMDEV_NATIVE_HANDLE={value!r}: use 1 (the default: the device guard overrides "
                           "getStreamNativeHandle) or 0 (it does not), or unset it")


_check_environment()

from . import _C  # noqa: E402  (registers the backend; must follow the check above)
from . import device_module as _device_module  # noqa: E402


def _register() -> None:
    if torch._C._get_privateuse1_backend_name() != _BACKEND_NAME:
        torch.utils.rename_privateuse1_backend(_BACKEND_NAME)
    if getattr(torch, _BACKEND_NAME, None) is not _device_module:
        torch._register_device_module(_BACKEND_NAME, _device_module)
    if not hasattr(torch.Tensor, "is_" + _BACKEND_NAME):
        torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)


_register()

if _stream_hooks_pending:  # _autoload ran before _C was loaded
    import devbridge as _devbridge

    _register_stream_hooks(_devbridge)
    _stream_hooks_pending = False

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def get_include() -> str:
    """Directory holding ``simdev/runtime.h``, the simdev runtime's C API."""
    return os.path.join(_PACKAGE_DIR, "include")


def runtime_library_path() -> str:
    """Path of ``libsimdev_runtime.so``, the library behind simdev's C API.

    Kernel libraries and other native code link or ``dlopen`` this exact file
    to share the devices, streams and memory of this process.
    """
    return os.path.join(_PACKAGE_DIR, "libsimdev_runtime.so")
