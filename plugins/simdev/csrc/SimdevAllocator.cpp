#include "SimdevAllocator.h"

#include <simdev/runtime.h>

#include <c10/util/Logging.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "GilReleased.h"
#include "SimdevCheck.h"
#include "SimdevDevice.h"
#include "SimdevGraphPool.h"
#include "SimdevStream.h"

namespace torch_simdev {

using c10::CachingDeviceAllocator::DeviceStats;

namespace {

constexpr size_t kAggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
// Spare events beyond this are destroyed instead of kept for reuse.
constexpr size_t kMaxSpareEvents = 256;

size_t roundUp(size_t nbytes) { return (nbytes + kRoundBytes - 1) / kRoundBytes * kRoundBytes; }

std::string formatBytes(size_t bytes) {
  char text[32];
  const double b = static_cast<double>(bytes);
  if (bytes >= (size_t{1} << 30)) {
    std::snprintf(text, sizeof(text), "%.2f GiB", b / (1 << 30));
  } else if (bytes >= (size_t{1} << 20)) {
    std::snprintf(text, sizeof(text), "%.2f MiB", b / (1 << 20));
  } else if (bytes >= 1024) {
    std::snprintf(text, sizeof(text), "%.2f KiB", b / 1024);
  } else {
    std::snprintf(text, sizeof(text), "%zu bytes", bytes);
  }
  return text;
}

// Waits until `event` completes. Polls instead of sdEventSynchronize, which
// would also report (and so clear) a failure of the event's stream: that
// failure belongs to the user's next synchronization, not to the allocator.
void waitForEvent(sdEvent_t event) {
  GilReleasedIfHeld no_gil;  // the event's stream may run work that needs it (GilReleased.h)
  for (int polls = 0; sdEventQuery(event) == sdErrorNotReady; ++polls) {
    std::this_thread::sleep_for(std::chrono::microseconds(polls < 100 ? 10 : 200));
  }
}

// An event recorded on `stream` when the block was freed: the block is free
// for another stream once it completes.
struct PendingUse {
  sdStream_t stream;
  sdEvent_t event;
};

struct Block {
  void* ptr = nullptr;
  size_t size = 0;       // rounded, what the runtime reserved
  size_t requested = 0;  // what the caller asked for
  c10::DeviceIndex device = 0;
  sdStream_t alloc_stream = nullptr;
  std::vector<sdStream_t> recorded_streams;  // Tensor.record_stream, other than alloc_stream
  std::vector<PendingUse> pending;           // filled when freed
};

}  // namespace

struct SimdevAllocator::Impl {
  std::mutex mutex;
  std::unordered_map<void*, Block*> active;                    // allocated blocks by pointer
  std::vector<std::multimap<size_t, Block*>> cached;           // free blocks by size, per device
  std::vector<DeviceStats> stats;                              // per device
  std::vector<sdEvent_t> spare_events;
  // Freed blocks whose free could not be recorded yet: one of their streams
  // was capturing (flushDeferredFrees retries).
  std::vector<std::pair<Block*, std::vector<sdStream_t>>> deferred;

  Impl() : cached(deviceCount()), stats(deviceCount()) {}

  DeviceStats& statsOf(c10::DeviceIndex device) { return stats.at(device); }

  // A block for a segment just obtained from sdMalloc (or handed over by a
  // capture pool), counted as reserved. Caller holds the mutex.
  Block* newSegment(void* ptr, size_t size, c10::DeviceIndex device) {
    auto* block = new Block();
    block->ptr = ptr;
    block->size = size;
    block->device = device;
    DeviceStats& s = statsOf(device);
    s.reserved_bytes[kAggregate].increase(size);
    s.segment[kAggregate].increase(1);
    s.num_device_alloc += 1;
    return block;
  }

  // Whether `block` (freed) may serve an allocation for `stream`. Caller holds the mutex.
  static bool usableOn(const Block& block, sdStream_t stream) {
    for (const PendingUse& use : block.pending) {
      if (use.stream == stream) continue;  // same-stream reuse: ordered after the old work
      if (sdEventQuery(use.event) != sdSuccess) return false;  // NotReady (or an error: be safe)
    }
    return true;
  }

  // Takes the smallest usable cached block that fits `size` without wasting
  // more than half of it. Caller holds the mutex.
  Block* takeCached(c10::DeviceIndex device, sdStream_t stream, size_t size) {
    auto& pool = cached.at(device);
    for (auto it = pool.lower_bound(size); it != pool.end() && it->first <= 2 * size; ++it) {
      Block* block = it->second;
      if (!usableOn(*block, stream)) continue;
      pool.erase(it);
      recycleEvents(*block);
      return block;
    }
    return nullptr;
  }

  // Caller holds the mutex. Re-recording a spare event later replaces its
  // capture, so events still pending here may be reused safely: nothing else
  // waits on them.
  void recycleEvents(Block& block) {
    for (const PendingUse& use : block.pending) {
      if (spare_events.size() < kMaxSpareEvents) {
        spare_events.push_back(use.event);
      } else if (sdEventDestroy(use.event) != sdSuccess) {
        LOG(WARNING) << "simdev allocator: sdEventDestroy failed: " << sdGetLastErrorString();
      }
    }
    block.pending.clear();
  }

  // Caller holds the mutex. nullptr if the runtime refuses.
  sdEvent_t takeEvent() {
    if (!spare_events.empty()) {
      sdEvent_t event = spare_events.back();
      spare_events.pop_back();
      return event;
    }
    sdEvent_t event = nullptr;
    if (sdEventCreate(&event, sdEventDisableTiming) != sdSuccess) return nullptr;
    return event;
  }

  // Moves the cached blocks of `device` (every device if -1) out of the cache,
  // waits for their pending work, and returns them to the runtime. The wait
  // happens without the mutex: the work being waited for may itself free
  // blocks (its host work drops the last reference to a tensor).
  void releaseCached(c10::DeviceIndex device) {
    std::vector<Block*> victims;
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (size_t d = 0; d < cached.size(); ++d) {
        if (device != -1 && static_cast<size_t>(device) != d) continue;
        for (auto& entry : cached[d]) victims.push_back(entry.second);
        cached[d].clear();
      }
    }
    for (Block* block : victims) {
      for (const PendingUse& use : block->pending) waitForEvent(use.event);
      if (sdFree(block->ptr) != sdSuccess) {
        LOG(WARNING) << "simdev allocator: sdFree failed: " << sdGetLastErrorString();
      }
    }
    std::lock_guard<std::mutex> lock(mutex);
    for (Block* block : victims) {
      recycleEvents(*block);
      DeviceStats& s = statsOf(block->device);
      s.reserved_bytes[kAggregate].decrease(block->size);
      s.segment[kAggregate].decrease(1);
      s.num_device_free += 1;
      delete block;
    }
  }

  // Records the free of `block` on each of `streams` and caches it; defers
  // it while one of them captures. Caller holds the mutex.
  void cacheFreed(Block* block, std::vector<sdStream_t> streams) {
    if (anyCapturePoolActive()) {
      for (sdStream_t stream : streams) {
        sdStreamCaptureStatus status = sdStreamCaptureStatusNone;
        if (sdStreamGetCaptureStatus(stream, &status) == sdSuccess && status != sdStreamCaptureStatusNone) {
          deferred.emplace_back(block, std::move(streams));
          return;
        }
      }
    }
    for (sdStream_t stream : streams) {
      sdEvent_t event = takeEvent();
      if (event == nullptr || sdEventRecord(event, stream) != sdSuccess) {
        // Without the event nobody can tell when the block's work is done, so
        // it may never be reused: keep it out of the cache (leaked, still
        // counted as reserved) rather than risk handing out memory in use.
        LOG(WARNING) << "simdev allocator: cannot record the free of block " << block->ptr
                     << " on its stream (" << sdGetLastErrorString() << "); the block is not reused";
        if (event != nullptr) spare_events.push_back(event);
        return;
      }
      block->pending.push_back(PendingUse{stream, event});
    }
    cached.at(block->device).emplace(block->size, block);
  }

  [[noreturn]] void throwOutOfMemory(c10::DeviceIndex device, size_t nbytes, const std::string& runtime_message) {
    size_t used = 0;
    size_t capacity = 0;
    (void)sdMemGetInfo(device, &used, &capacity);
    size_t allocated = 0;
    size_t reserved = 0;
    {
      std::lock_guard<std::mutex> lock(mutex);
      DeviceStats& s = statsOf(device);
      s.num_ooms += 1;
      allocated = static_cast<size_t>(s.allocated_bytes[kAggregate].current);
      reserved = static_cast<size_t>(s.reserved_bytes[kAggregate].current);
    }
    TORCH_CHECK_WITH(OutOfMemoryError, false, "simdev out of memory on simdev:", static_cast<int>(device),
                     ": tried to allocate ", formatBytes(nbytes), "; the device has ", formatBytes(used),
                     " in use of its ", formatBytes(capacity), " capacity (", formatBytes(allocated),
                     " held by live tensors, ", formatBytes(reserved),
                     " reserved by the caching allocator; the cache was already emptied). "
                     "Free tensors you no longer need (del them), call torch.simdev.empty_cache(), "
                     "or start the process with a larger SIMDEV_MEMORY_CAPACITY (bytes per device). "
                     "Runtime: ",
                     runtime_message);
  }
};

SimdevAllocator::SimdevAllocator() : impl_(new Impl()) {}

// The instance is leaked (see allocator()), so this never runs; Impl is
// intentionally not freed.
SimdevAllocator::~SimdevAllocator() = default;

namespace {
// 0: disarmed; n: the n-th allocation from the arming fails.
std::atomic<uint64_t> allocation_fault_countdown{0};
std::atomic<uint64_t> allocation_faults_injected{0};

bool takeInjectedAllocationFault() noexcept {
  uint64_t remaining = allocation_fault_countdown.load(std::memory_order_relaxed);
  // Exactly one allocation sees the countdown go from 1 to 0, whichever threads race.
  while (remaining != 0) {
    if (allocation_fault_countdown.compare_exchange_weak(remaining, remaining - 1, std::memory_order_acq_rel)) {
      if (remaining != 1) return false;
      allocation_faults_injected.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}
}  // namespace

void SimdevAllocator::injectAllocationFault(uint64_t nth) noexcept { allocation_fault_countdown.store(nth); }

uint64_t SimdevAllocator::injectedAllocationFaults() const noexcept { return allocation_faults_injected.load(); }

c10::DataPtr SimdevAllocator::allocate(size_t nbytes) {
  const c10::DeviceIndex device = currentDevice();
  const c10::Device c10_device(c10::DeviceType::PrivateUse1, device);
  if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &deleteBlock, c10_device);
  if (C10_UNLIKELY(takeInjectedAllocationFault())) {
    {
      std::lock_guard<std::mutex> lock(impl_->mutex);
      impl_->statsOf(device).num_ooms += 1;
    }
    TORCH_CHECK_WITH(OutOfMemoryError, false, "simdev out of memory on simdev:", static_cast<int>(device),
                     ": tried to allocate ", formatBytes(nbytes),
                     "; an injected fault (torch.simdev.inject_fault('allocation', ...)), not a full device");
  }

  const sdStream_t stream = currentNativeStream(device);
  if (anyCapturePoolActive()) {  // one atomic load unless some stream captures
    bool served = false;
    c10::DataPtr pooled = allocateFromCapturePool(stream, nbytes, &served);
    if (served) return pooled;
  }
  const size_t size = roundUp(nbytes);
  Block* block = nullptr;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    block = impl_->takeCached(device, stream, size);
  }
  if (block == nullptr) {
    void* ptr = nullptr;
    sdError_t status = sdMalloc(&ptr, size, device);
    if (status == sdErrorMemoryAllocation) {
      {
        std::lock_guard<std::mutex> lock(impl_->mutex);
        impl_->statsOf(device).num_alloc_retries += 1;
      }
      impl_->releaseCached(device);
      status = sdMalloc(&ptr, size, device);
      if (status == sdErrorMemoryAllocation) impl_->throwOutOfMemory(device, size, sdGetLastErrorString());
    }
    SIMDEV_CHECK(status);
    std::lock_guard<std::mutex> lock(impl_->mutex);
    block = impl_->newSegment(ptr, size, device);
  }
  block->alloc_stream = stream;
  block->requested = nbytes;
  block->recorded_streams.clear();
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->active.emplace(block->ptr, block);
    DeviceStats& s = impl_->statsOf(device);
    s.allocation[kAggregate].increase(1);
    s.active[kAggregate].increase(1);
    s.allocated_bytes[kAggregate].increase(block->size);
    s.active_bytes[kAggregate].increase(block->size);
    s.requested_bytes[kAggregate].increase(nbytes);
  }
  return c10::DataPtr(block->ptr, block->ptr, &deleteBlock, c10_device);
}

void SimdevAllocator::deleteBlock(void* ptr) noexcept {
  if (ptr == nullptr) return;
  Impl& impl = *allocator().impl_;
  std::lock_guard<std::mutex> lock(impl.mutex);
  auto it = impl.active.find(ptr);
  if (it == impl.active.end()) {
    LOG(ERROR) << "simdev allocator: freeing " << ptr << ", which it did not allocate (double free?)";
    return;
  }
  Block* block = it->second;
  impl.active.erase(it);
  DeviceStats& s = impl.statsOf(block->device);
  s.allocation[kAggregate].decrease(1);
  s.active[kAggregate].decrease(1);
  s.allocated_bytes[kAggregate].decrease(block->size);
  s.active_bytes[kAggregate].decrease(block->size);
  s.requested_bytes[kAggregate].decrease(block->requested);

  std::vector<sdStream_t> streams = std::move(block->recorded_streams);
  block->recorded_streams.clear();
  streams.push_back(block->alloc_stream);
  try {
    impl.cacheFreed(block, std::move(streams));
  } catch (...) {
    LOG(WARNING) << "simdev allocator: out of host memory caching block " << ptr << "; the block is not reused";
  }
}

void SimdevAllocator::adoptBlock(void* ptr, size_t size, c10::DeviceIndex device,
                                 const std::vector<sdStream_t>& streams) noexcept {
  try {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->cacheFreed(impl_->newSegment(ptr, size, device), streams);
  } catch (...) {
    LOG(WARNING) << "simdev allocator: out of host memory adopting block " << ptr << "; the block is not reused";
  }
}

void SimdevAllocator::flushDeferredFrees() noexcept {
  try {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    auto deferred = std::move(impl_->deferred);
    impl_->deferred.clear();
    for (auto& entry : deferred) impl_->cacheFreed(entry.first, std::move(entry.second));
  } catch (...) {
    LOG(WARNING) << "simdev allocator: out of host memory recording deferred frees; those blocks are not reused";
  }
}

c10::DeleterFnPtr SimdevAllocator::raw_deleter() const { return &deleteBlock; }

void SimdevAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  if (count == 0) return;
  int device = 0;
  SIMDEV_CHECK(sdPointerGetDevice(dest, &device));
  const sdStream_t stream = currentNativeStream(static_cast<c10::DeviceIndex>(device));
  GilReleasedIfHeld no_gil;  // a synchronous copy waits for the stream's work
  SIMDEV_CHECK(sdMemcpy(dest, src, count, sdMemcpyDeviceToDevice, stream));
}

void SimdevAllocator::emptyCache(c10::MempoolId_t /*mempool_id*/) { impl_->releaseCached(-1); }

void SimdevAllocator::recordStream(const c10::DataPtr& data_ptr, c10::Stream stream) {
  // Memory from elsewhere (e.g. at::from_blob with a custom deleter): not ours to track.
  if (data_ptr.get_deleter() != &deleteBlock || data_ptr.get() == nullptr) return;
  const sdStream_t native = nativeStream(stream);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto it = impl_->active.find(data_ptr.get());
  if (it == impl_->active.end()) return;
  Block& block = *it->second;
  if (native == block.alloc_stream) return;
  if (std::find(block.recorded_streams.begin(), block.recorded_streams.end(), native) ==
      block.recorded_streams.end()) {
    block.recorded_streams.push_back(native);
  }
}

DeviceStats SimdevAllocator::getDeviceStats(c10::DeviceIndex device) {
  checkDeviceIndex(device);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->statsOf(device);
}

void SimdevAllocator::resetAccumulatedStats(c10::DeviceIndex device) {
  checkDeviceIndex(device);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  DeviceStats& s = impl_->statsOf(device);
  for (auto* array : {&s.allocation, &s.segment, &s.active, &s.allocated_bytes, &s.reserved_bytes,
                      &s.active_bytes, &s.requested_bytes}) {
    for (auto& stat : *array) stat.reset_accumulated();
  }
  s.num_alloc_retries = 0;
  s.num_ooms = 0;
  s.num_device_alloc = 0;
  s.num_device_free = 0;
}

void SimdevAllocator::resetPeakStats(c10::DeviceIndex device) {
  checkDeviceIndex(device);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  DeviceStats& s = impl_->statsOf(device);
  for (auto* array : {&s.allocation, &s.segment, &s.active, &s.allocated_bytes, &s.reserved_bytes,
                      &s.active_bytes, &s.requested_bytes}) {
    for (auto& stat : *array) stat.reset_peak();
  }
}

std::pair<size_t, size_t> SimdevAllocator::getMemoryInfo(c10::DeviceIndex device) {
  checkDeviceIndex(device);
  size_t used = 0;
  size_t capacity = 0;
  SIMDEV_CHECK(sdMemGetInfo(device, &used, &capacity));
  return {capacity - used, capacity};
}

SimdevAllocator& allocator() {
  static auto* instance = new SimdevAllocator();  // leaked on purpose, see the header
  return *instance;
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &allocator())

}  // namespace torch_simdev
