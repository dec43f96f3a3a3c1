#pragma once
// cudadev's collective backend: NCCL on cudadev tensors, on cudadev's streams.
//
// cudadev memory is CUDA memory, so NCCL can reduce it in place. The backend
// wraps a ProcessGroupNCCL made in Python from the same store, rank and size
// (cdnccl, torch_cudadev/distributed.py). For each collective it makes CUDA
// aliases of the cudadev tensors (cuda_alias.h), makes cudadev's current
// stream CUDA's current stream, and calls NCCL with asyncOp=false: NCCL then
// launches on that stream (ProcessGroupNCCL's synchronous path, no side stream,
// no recordStream), after the work queued before it and before the work
// queued after it, with no host synchronization.
//
// The Work it returns is cudadev's, not NCCL's: an event recorded on the
// collective's stream; wait() makes the caller's current stream wait for it;
// the future is completed at issue with the cudadev tensors (DDP reads its
// gradients back from it). NCCL's watchdog still sees NCCL's own work.

#include <pybind11/pybind11.h>

namespace cudadev {

// Adds torch_cudadev._C._distributed (CudadevNcclBackend).
void bind_distributed(pybind11::module& parent);

}  // namespace cudadev
