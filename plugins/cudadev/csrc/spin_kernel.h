#pragma once
// A kernel that keeps one GPU thread busy for a number of clock cycles: the
// test helper torch.cudadev._sleep_on_current_stream uses it to hold a
// stream busy, so that work ordered after it visibly waits.

#include <cuda_runtime_api.h>

namespace cudadev {

// Enqueues the spin on `stream` (of the current device); returns the launch
// status.
cudaError_t launch_spin_kernel(long long cycles, cudaStream_t stream);

}  // namespace cudadev
