// The stream-aware caching allocator for simdev device memory, registered as
// c10::GetAllocator(PrivateUse1) (so at::empty, torch.accelerator.memory_*
// and devbridge's scratch allocations all come here).
//
// Stream semantics (the CUDA caching allocator's contract, enforced with
// events instead of trust):
//  - A block belongs to the stream that was current on its device when it was
//    allocated, plus any stream added with Tensor.record_stream.
//  - When freed, an event is recorded on each of those streams and the block
//    goes to the device's cache. A later allocation may take it when, for
//    every one of those streams, either the allocation is for that same
//    stream (stream order already puts the new work after the old) or the
//    event has completed. So a block freed while stream A still has work on it
//    is never handed to stream B before that work is done.
//  - Out of memory: cached blocks are released (waiting for their events),
//    then the allocation is retried once; if it still fails a
//    torch.OutOfMemoryError names the device, the numbers and the fixes.
//
// Graph capture (SimdevGraphPool.h): while a stream captures, allocations
// for it come from the capture's pool, not from here; a block whose stream
// captures when it is freed has its free recorded once the capture ended
// (an event cannot be recorded on a capturing stream).
//
// Sizes are rounded up to kRoundBytes; a cached block serves requests from
// half its size up. Thread-safe: blocks are freed from any thread, including
// stream worker threads (when host work drops the last reference).
#pragma once

#include <simdev/runtime.h>

#include <c10/core/CachingDeviceAllocator.h>

#include <vector>

namespace torch_simdev {

constexpr size_t kRoundBytes = 512;

class SimdevAllocator final : public c10::DeviceAllocator {
 public:
  SimdevAllocator();
  ~SimdevAllocator() override;

  // Allocates on the calling thread's current simdev device, for its current stream.
  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  // Synchronous device-to-device copy on the current stream of dest's device.
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool initialized() override { return true; }
  // Returns every cached block of every device to the runtime (waiting for
  // the work that may still use them).
  void emptyCache(c10::MempoolId_t mempool_id = {0, 0}) override;
  void recordStream(const c10::DataPtr& data_ptr, c10::Stream stream) override;
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
  // (free, total) bytes of the device, as the runtime accounts them.
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override;

  // The deleter of every DataPtr this allocator returns. Never throws.
  static void deleteBlock(void* ptr) noexcept;

  // Takes a block of the runtime (sdMalloc'ed, `size` bytes, rounded) into
  // the cache as if freed now after work on each of `streams`. Never throws.
  void adoptBlock(void* ptr, size_t size, c10::DeviceIndex device, const std::vector<sdStream_t>& streams) noexcept;
  // Records the frees deferred while their streams captured (call after a
  // capture ended). Never throws.
  void flushDeferredFrees() noexcept;

  // Fault injection for tests (torch.simdev.inject_fault("allocation", nth)):
  // the nth allocation of a non-empty tensor from now on (1: the next) raises
  // torch.OutOfMemoryError saying it was injected, as a full device would,
  // before it takes anything; 0 disarms. One fault per arming.
  void injectAllocationFault(uint64_t nth) noexcept;
  // How many allocation faults were injected in this process.
  uint64_t injectedAllocationFaults() const noexcept;

 private:
  struct Impl;
  Impl* impl_;  // never destroyed: tensors may be freed during static destruction
};

// The process-wide instance (the one registered for PrivateUse1).
SimdevAllocator& allocator();

}  // namespace torch_simdev
