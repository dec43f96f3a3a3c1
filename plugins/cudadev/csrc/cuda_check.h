#pragma once
// Turning CUDA runtime errors into c10 errors that a Python user can act on.

#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

// Runs a CUDA runtime call; on failure raises a c10::Error (a RuntimeError in
// Python) that names the call and CUDA's own description of the error.
// cudaGetLastError() clears the thread's last-error slot so that a failure
// that was already reported does not resurface in an unrelated later call.
#define CUDADEV_CHECK(expr)                                              \
  do {                                                                   \
    const cudaError_t cudadev_status_ = (expr);                          \
    if (C10_UNLIKELY(cudadev_status_ != cudaSuccess)) {                  \
      (void)cudaGetLastError();                                          \
      TORCH_CHECK(false, "cudadev: ", #expr, " failed: ",                \
                  cudaGetErrorName(cudadev_status_), " (",               \
                  cudaGetErrorString(cudadev_status_), ")");             \
    }                                                                    \
  } while (0)
