#pragma once
// cudadev's device allocator: stream-ordered CUDA memory
// (cudaMallocFromPoolAsync / cudaFreeAsync on a cudadev-owned memory pool per
// device) behind a caching front (freed blocks wait on their stream's free
// list for the next request of about their size on that stream; see
// allocator.cpp), registered as the PrivateUse1 allocator. It is a
// c10::DeviceAllocator, so torch.accelerator's memory functions and
// Tensor.record_stream work with it.
//
// Two kinds of memory back cudadev tensors, and the allocator accounts for both:
//  * its own blocks, for tensors cudadev allocates (torch.empty(...,
//    device='cudadev') and everything built on it);
//  * adopted CUDA storages: operators run torch's CUDA kernels (see
//    fallback.cpp), whose fresh outputs come from torch's CUDA caching
//    allocator on the cudadev stream the operator ran on. cudadev keeps those
//    storages alive through its own DataPtr rather than copying them; the
//    caching allocator keeps them stream-ordered on that stream.

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Storage.h>

namespace cudadev {

class CudadevAllocator final : public c10::DeviceAllocator {
 public:
  // Allocates on the current device, ordered on its current cudadev stream.
  c10::DataPtr allocate(size_t nbytes) override;
  // Device-to-device copy on the current cudadev stream of the current device.
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool initialized() override { return true; }
  // Gives cached blocks back to the pools, and the pools' unused memory back
  // to the driver.
  void emptyCache(c10::MempoolId_t mempool_id = {0, 0}) override;
  // Records that the memory is used on `stream`; its free then waits for the
  // work enqueued on that stream up to the free.
  void recordStream(const c10::DataPtr& data_ptr, c10::Stream stream) override;
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
  // (free, total) bytes of the GPU, as CUDA reports them.
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override;

  // A PrivateUse1 DataPtr that owns `cuda_storage` (a storage of torch.cuda
  // memory on CUDA device `device`) until the DataPtr is destroyed.
  c10::DataPtr adopt_cuda_storage(c10::Storage cuda_storage, c10::DeviceIndex device);
  // Whether the DataPtr came from this allocator (own block or adopted).
  bool owns(const c10::DataPtr& data_ptr) const;

  // Graph capture (graphs.cpp): allocations on a capturing stream come from
  // torch's CUDA caching allocator, which serves them from the capture's
  // private pool, adopted like the fallback's outputs; frees that would have
  // to be ordered on a capturing stream wait until the capture ends, and
  // this gives them back to the pool then.
  void release_parked_frees(c10::DeviceIndex device);
};

// The one registered instance (also c10::GetAllocator(PrivateUse1)).
CudadevAllocator& allocator();

}  // namespace cudadev
