#include "spin_kernel.h"

namespace cudadev {
namespace {

// clock64() reads the SM's cycle counter; the loop cannot be optimised away
// because the counter is volatile.
__global__ void spin_for_cycles(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

cudaError_t launch_spin_kernel(long long cycles, cudaStream_t stream) {
  spin_for_cycles<<<1, 1, 0, stream>>>(cycles);
  return cudaGetLastError();
}

}  // namespace cudadev
