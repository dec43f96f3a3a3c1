"""cudadev's collective backend for ``torch.distributed``: ``cdnccl``.

Registered for the ``cudadev`` device type when torch_cudadev is imported, so
that ``torch.distributed.init_process_group(device_id=torch.device("cudadev",
rank))`` uses it. It is NCCL on cudadev tensors (cudadev memory is CUDA
memory), launched on cudadev's current stream (csrc/distributed.h).
"""

from __future__ import annotations

import torch

from . import _C

BACKEND_NAME = "cdnccl"
DEVICES = ["cudadev"]  # a list: torch 2.11 and 2.13 iterate over a string's letters


def _create_backend(options, backend_options=None):
    """The backend of one process group: a ProcessGroupNCCL on the group's
    store, rank and size, wrapped to take cudadev tensors on cudadev streams."""
    del backend_options
    from torch.distributed import ProcessGroupNCCL

    nccl_options = ProcessGroupNCCL.Options()
    nccl_options._timeout = options.timeout
    nccl = ProcessGroupNCCL(options.store, options.group_rank, options.group_size, nccl_options)
    return _C._distributed.CudadevNcclBackend(nccl)


def is_available() -> bool:
    """Whether this torch has torch.distributed with NCCL."""
    return hasattr(_C, "_distributed") and torch.distributed.is_available() and torch.distributed.is_nccl_available()


def register() -> None:
    """Registers ``cdnccl`` with torch.distributed (once per process)."""
    if not is_available():
        return
    from torch.distributed import Backend

    if BACKEND_NAME not in Backend.backend_list:
        Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=DEVICES)
