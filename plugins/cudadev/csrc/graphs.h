#pragma once
// cudadev's graph capture: devbridge's graph table (include/devbridge/
// c_graph_api.h in devbridge, restated in graphs.cpp so that cudadev builds
// without devbridge) served by ATen's at::cuda::CUDAGraph on cudadev's own
// CUDA streams, presented to ATen as external CUDA streams.

#include <cuda_runtime_api.h>

#include <c10/core/Device.h>

namespace cudadev {

// The DevbridgeGraphAPI* (static storage) for the "devbridge_graph_api" capsule.
void* graph_api();

// Whether `stream` is capturing (active or invalidated). Cheap when no
// cudadev capture is in progress anywhere in the process (one atomic read);
// the allocator asks it on every allocation.
bool stream_is_capturing(cudaStream_t stream) noexcept;
bool any_capture_in_progress() noexcept;

}  // namespace cudadev
