#pragma once
// Turning CUDA runtime errors into c10 errors that a Python user can act on.

#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

// Runs a CUDA runtime call; on failure raises a c10::AcceleratorError
// (torch.AcceleratorError in Python, a RuntimeError) carrying CUDA's error
// code, the call and CUDA's own description, as torch.cuda does
// (c10/cuda/CUDAException.cpp): a kernel's illegal address, reported by the
// next synchronization, is the same exception on cudadev as on cuda.
// cudaGetLastError() clears the thread's last-error slot so that a failure
// that was already reported does not resurface in an unrelated later call.
#define CUDADEV_CHECK(expr)                                                                    \
  do {                                                                                         \
    const cudaError_t cudadev_status_ = (expr);                                                \
    if (C10_UNLIKELY(cudadev_status_ != cudaSuccess)) {                                        \
      (void)cudaGetLastError();                                                                \
      throw ::c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},     \
                                    static_cast<int32_t>(cudadev_status_),                     \
                                    ::c10::str("cudadev: ", #expr, " failed: ",                \
                                               cudaGetErrorName(cudadev_status_), " (",        \
                                               cudaGetErrorString(cudadev_status_), ")"));     \
    }                                                                                          \
  } while (0)
