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
devbridge stream hooks: what devbridge does for such plugins is tested on it),
``SIMDEV_DEVBRIDGE=0`` (never call devbridge: no ``devbridge.install()``, no
stream hooks, no Triton hardware, as a plugin that knows nothing of devbridge;
what a user of such a plugin meets is tested on it).

With devbridge installed, importing this package also sets devbridge up for
simdev, whether torch autoloaded it or the process imported it itself (with
``TORCH_DEVICE_BACKEND_AUTOLOAD=0``, as any process with two plugins installed
must): the DLPack exchange table and the Python protocol, simdev's stream
hooks, and its Triton hardware (``_install_devbridge``).
"""

from __future__ import annotations

import atexit
import os


def _autoload() -> None:
    """The ``torch.backends`` entry point, called by ``import torch``.
    Importing this package did the work (registering simdev, then
    ``_install_devbridge``), so that a plain ``import torch_simdev`` with
    autoload off sets up the same process.

    Defined before ``import torch`` below: when a user imports torch_simdev
    before torch, torch's autoload calls this hook while this package is still
    being imported, and the hook must already exist then.
    """


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
    value = os.environ.get("SIMDEV_DEVBRIDGE")
    if value not in (None, "0", "1"):
        raise RuntimeError(f"SIMDEV_DEVBRIDGE={value!r}: use 1 (the default: importing simdev sets devbridge up "
                           "when it is installed) or 0 (simdev never calls devbridge), or unset it")


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

from . import distributed as _distributed  # noqa: E402

_distributed.register()  # the "sdgloo" collective backend for simdev tensors


def _install_devbridge() -> None:
    """What docs/plugin-authors.md asks of a plugin, when devbridge is
    installed: devbridge.install() (the DLPack exchange table and the Python
    protocol on simdev tensors), simdev's stream hooks (a guard without a
    native-handle override, SIMDEV_NATIVE_HANDLE=0, stands for an older
    plugin and registers neither), and simdev's Triton hardware: Triton's
    interpreter on simdev's streams (simdev has no instruction set; tests
    only; the triton_target subpackage). devbridge being absent is fine; a devbridge
    that is installed but fails to import is reported, and simdev works
    without it; an error of devbridge.install() itself propagates.

    `import devbridge` may be what imported torch and, through autoload, this
    package: devbridge is then half imported, and it records these calls and
    makes them once it is complete (devbridge/__init__.py)."""
    if os.environ.get("SIMDEV_DEVBRIDGE") == "0":
        return
    try:
        import devbridge
    except ImportError as error:
        if getattr(error, "name", None) != "devbridge":
            import warnings

            warnings.warn(f"simdev: devbridge is installed but failed to import ({error}); continuing without "
                          "devbridge", RuntimeWarning, stacklevel=2)
        return
    devbridge.install()
    if _C.guard_has_native_handle() and hasattr(devbridge, "register_current_stream_query"):
        devbridge.register_current_stream_query(_C.current_stream_query(), _BACKEND_NAME)
        devbridge.register_external_stream_hook(_C.external_stream_hook(), _BACKEND_NAME)
        if hasattr(devbridge, "register_graph_api"):  # graph capture (devbridge.graphs)
            devbridge.register_graph_api(_C.graph_api(), _BACKEND_NAME)
    try:
        from devbridge.triton import declare_hardware
    except ImportError:  # a devbridge without the Triton integration
        return
    import devbridge.triton

    if hasattr(devbridge.triton, "compiling_source"):
        from . import triton_target  # imports neither Triton nor devbridge's extension

        # The kernel runtime is passed uncalled: devbridge's driver makes it
        # when it first needs it (devbridge may still be importing now).
        declare_hardware(_BACKEND_NAME, compiler=triton_target.COMPILER,
                         kernel_runtime=triton_target.kernel_runtime)
    else:  # a devbridge older than its compiler hooks carries simdev's target in its core
        declare_hardware(_BACKEND_NAME, compiler="interpreter",
                         kernel_runtime="simdev-interpreter:" + runtime_library_path())
    # torch.compile: simdev's convolutions return cuDNN's layouts
    # (csrc/ops/Convolution.cpp), channels-last results for channels-last inputs.
    try:
        from devbridge.inductor import cudnn_convolution_format, declare_convolution_format
    except ImportError:  # a devbridge older than the declaration: torch predicts contiguous results
        return
    declare_convolution_format(_BACKEND_NAME, cudnn_convolution_format)


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


_install_devbridge()


def _drain_queues_at_exit() -> None:
    """Work still queued when the interpreter exits would run on the stream
    workers while Python finalizes. Most of it is C++, but a Triton kernel
    on simdev runs in Triton's interpreter on the worker, in Python: taking
    the GIL from a finalizing interpreter aborts the process. A real device
    finishes or drops its queues at exit; simdev finishes them, while the
    interpreter is still whole (atexit runs before finalization)."""
    for index in range(_C.device_count()):
        try:
            _C.synchronize(index)
        except Exception as error:  # noqa: BLE001  (reported, the other devices still drained)
            import sys

            print(f"simdev: work queued on simdev:{index} failed while the process exited: {error}",
                  file=sys.stderr)


atexit.register(_drain_queues_at_exit)
