"""cudadev: a reference PyTorch PrivateUse1 backend backed by CUDA.

cudadev stands in for the many vendor plugins that own PyTorch's PrivateUse1
dispatch key on CUDA-like hardware. Its tensors live in CUDA device memory
from its own stream-ordered allocator, its work runs on its own CUDA streams
(never CUDA's legacy default stream), and its operators run torch's CUDA
kernels on those streams. It coexists with torch.cuda in one process: a GPU
is both cuda:i and cudadev:i, each with its own current stream.

Importing this package claims PrivateUse1 for the process under the name
"cudadev" (torch.device("cudadev:0"), torch.cudadev, Tensor.cudadev(), ...).
Only one PrivateUse1 plugin can be loaded per process; with several installed,
set TORCH_DEVICE_BACKEND_AUTOLOAD=0 and import the one you want.
"""

import warnings

import torch

_BACKEND_NAME = "cudadev"


def _check_process_can_load_cudadev() -> None:
    if torch.version.cuda is None:
        raise ImportError(
            f"cudadev needs a CUDA build of torch; this torch is {torch.__version__}. "
            "Install a CUDA wheel of torch to use cudadev."
        )
    claimed_by = torch._C._get_privateuse1_backend_name()
    if claimed_by not in ("privateuseone", _BACKEND_NAME):
        # Checked before loading _C: its static registrations would replace
        # the other plugin's guard, allocator and kernels (last writer wins).
        raise ImportError(
            f"cudadev cannot load: PrivateUse1 is already claimed by '{claimed_by}' in this "
            "process, and only one PrivateUse1 plugin can be loaded per process. With several "
            "plugins installed, set TORCH_DEVICE_BACKEND_AUTOLOAD=0 and import the one you "
            "want (import torch_cudadev)."
        )


_check_process_can_load_cudadev()

# Loading the extension registers cudadev's device guard, allocator, hooks and
# kernels for PrivateUse1 (static initialisers in the C++ sources).
from . import _C  # noqa: E402
from . import _device_module  # noqa: E402

if torch._C._get_privateuse1_backend_name() != _BACKEND_NAME:
    torch.utils.rename_privateuse1_backend(_BACKEND_NAME)
if not hasattr(torch, _BACKEND_NAME):
    torch._register_device_module(_BACKEND_NAME, _device_module)
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)

from . import distributed as _distributed  # noqa: E402

_distributed.register()  # the "cdnccl" collective backend for cudadev tensors


def _install_devbridge() -> None:
    """Put devbridge's DLPack exchange table in place and declare cudadev's Triton
    hardware when devbridge is installed.

    devbridge is optional: when it is not installed, nothing happens. When it is
    installed but fails to import, cudadev still works and says why devbridge
    is missing; an error raised by devbridge.install() itself propagates.
    """
    try:
        import devbridge
    except ImportError as error:
        if getattr(error, "name", None) != "devbridge":
            warnings.warn(
                f"cudadev: devbridge is installed but failed to import ({error}); continuing "
                "without devbridge's DLPack exchange table.",
                RuntimeWarning,
                stacklevel=2,
            )
        return
    install = getattr(devbridge, "install", None)
    if install is not None:
        install()
    # The fast current-stream query (one thread-local read instead of the
    # guard's getStream + getStreamNativeHandle) and the external-stream hook
    # (__dlpack__(stream=<any CUDA stream of the GPU>)): docs/plugin-authors.md.
    if hasattr(devbridge, "register_current_stream_query"):
        devbridge.register_current_stream_query(_C.current_stream_query(), _BACKEND_NAME)
        devbridge.register_external_stream_hook(_C.external_stream_hook(), _BACKEND_NAME)
    # Graph capture (devbridge.graphs): CUDA graphs of cudadev's streams.
    # devbridge.register_graph_api, not devbridge.graphs.register_graph_api:
    # while torch's autoload runs inside `import devbridge`, the submodule may
    # not exist yet, and devbridge records the table until it does.
    if hasattr(devbridge, "register_graph_api"):
        devbridge.register_graph_api(_C.graph_api(), _BACKEND_NAME)
    # Triton: cudadev runs on NVIDIA GPUs, so NVIDIA's Triton compiler builds
    # its kernels and devbridge launches the cubins through libcuda.
    try:
        from devbridge.triton import declare_hardware
    except ImportError:  # a devbridge without the Triton integration
        return
    declare_hardware(_BACKEND_NAME, compiler="nvidia", kernel_runtime="cuda")
    # torch.compile: cudadev's convolutions return cuDNN's layouts
    # (csrc/convolution.cpp), channels-last results for channels-last inputs.
    try:
        from devbridge.inductor import cudnn_convolution_format, declare_convolution_format
    except ImportError:  # a devbridge older than the declaration: torch predicts contiguous results
        return
    declare_convolution_format(_BACKEND_NAME, cudnn_convolution_format)


_install_devbridge()


def _autoload() -> None:
    """Entry point of the torch.backends group: importing the package did the work."""


__all__: list = []
