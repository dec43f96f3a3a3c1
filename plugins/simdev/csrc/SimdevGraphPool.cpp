#include "SimdevGraphPool.h"

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "SimdevAllocator.h"
#include "SimdevCheck.h"

namespace torch_simdev {

class CapturePool : public std::enable_shared_from_this<CapturePool> {
 public:
  CapturePool(c10::DeviceIndex device, sdStream_t stream) : device_(device) { streams_.push_back(stream); }

  c10::DataPtr allocate(size_t nbytes) {
    const c10::Device device(c10::DeviceType::PrivateUse1, device_);
    if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &SimdevAllocator::deleteBlock, device);
    const size_t size = (nbytes + kRoundBytes - 1) / kRoundBytes * kRoundBytes;
    void* ptr = takeFree(size);
    if (ptr == nullptr) ptr = allocateNew(size);
    return c10::DataPtr(ptr, new Allocation{shared_from_this(), ptr}, &deleteAllocation, device);
  }

  void noteStream(sdStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::find(streams_.begin(), streams_.end(), stream) == streams_.end()) streams_.push_back(stream);
  }

  // The last owner is gone: the free blocks go to the allocator now, the
  // others when they are freed.
  void release() noexcept {
    std::vector<std::pair<void*, size_t>> blocks;
    std::vector<sdStream_t> streams;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      released_ = true;
      for (const auto& entry : free_) blocks.emplace_back(entry.second, entry.first);
      free_.clear();
      streams = streams_;
    }
    for (const auto& block : blocks) allocator().adoptBlock(block.first, block.second, device_, streams);
  }

 private:
  struct Allocation {
    std::shared_ptr<CapturePool> pool;
    void* ptr;
  };

  static void deleteAllocation(void* context) noexcept {
    std::unique_ptr<Allocation> allocation(static_cast<Allocation*>(context));
    allocation->pool->free(allocation->ptr);
  }

  void free(void* ptr) noexcept {
    size_t size = 0;
    std::vector<sdStream_t> streams;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      size = sizes_.at(ptr);
      if (!released_) {
        free_.emplace(size, ptr);
        return;
      }
      sizes_.erase(ptr);
      streams = streams_;
    }
    allocator().adoptBlock(ptr, size, device_, streams);
  }

  void* takeFree(size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.lower_bound(size);
    if (it == free_.end() || it->first > 2 * size) return nullptr;
    void* ptr = it->second;
    free_.erase(it);
    return ptr;
  }

  void* allocateNew(size_t size) {
    void* ptr = nullptr;
    sdError_t status = sdMalloc(&ptr, size, device_);
    if (status == sdErrorMemoryAllocation) {
      allocator().emptyCache();  // the cache's blocks are not the capture's: return them and retry once
      status = sdMalloc(&ptr, size, device_);
      TORCH_CHECK_WITH(OutOfMemoryError, status != sdErrorMemoryAllocation, "simdev out of memory on simdev:",
                       static_cast<int>(device_), " while capturing a graph: ", size,
                       " bytes for the capture's pool (memory allocated during a capture stays with its graph "
                       "until the graph is destroyed). Destroy graphs you no longer need (Graph.reset()), or "
                       "start the process with a larger SIMDEV_MEMORY_CAPACITY. Runtime: ",
                       sdGetLastErrorString());
    }
    SIMDEV_CHECK(status);
    std::lock_guard<std::mutex> lock(mutex_);
    sizes_.emplace(ptr, size);
    return ptr;
  }

  const c10::DeviceIndex device_;
  std::mutex mutex_;
  std::multimap<size_t, void*> free_;          // free blocks by size
  std::unordered_map<void*, size_t> sizes_;    // every block the pool holds
  std::vector<sdStream_t> streams_;            // the capture stream, then every replay stream
  bool released_ = false;
};

CapturePoolOwner::~CapturePoolOwner() { pool_->release(); }

namespace {

struct CapturingStreams {
  std::mutex mutex;
  std::unordered_map<sdStream_t, std::shared_ptr<CapturePoolOwner>> pools;
  std::atomic<int> active{0};
};

CapturingStreams& capturing() {
  static auto* streams = new CapturingStreams;  // leaked: tensors may be freed during static destruction
  return *streams;
}

}  // namespace

std::shared_ptr<CapturePoolOwner> makeCapturePool(c10::DeviceIndex device, sdStream_t stream) {
  return std::make_shared<CapturePoolOwner>(std::make_shared<CapturePool>(device, stream));
}

void noteReplayStream(CapturePool& pool, sdStream_t stream) { pool.noteStream(stream); }

void beginAllocatingToPool(sdStream_t stream, const std::shared_ptr<CapturePoolOwner>& owner) {
  CapturingStreams& c = capturing();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.pools.emplace(stream, owner).second) c.active.fetch_add(1, std::memory_order_release);
}

void endAllocatingToPool(sdStream_t stream) {
  std::shared_ptr<CapturePoolOwner> owner;  // released outside the lock
  CapturingStreams& c = capturing();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.pools.find(stream);
  if (it == c.pools.end()) return;
  owner = std::move(it->second);
  c.pools.erase(it);
  c.active.fetch_sub(1, std::memory_order_release);
}

bool anyCapturePoolActive() noexcept { return capturing().active.load(std::memory_order_acquire) > 0; }

c10::DataPtr allocateFromCapturePool(sdStream_t stream, size_t nbytes, bool* served) {
  std::shared_ptr<CapturePoolOwner> owner;
  {
    CapturingStreams& c = capturing();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.pools.find(stream);
    if (it != c.pools.end()) owner = it->second;
  }
  *served = owner != nullptr;
  if (!owner) return {};
  return owner->pool().allocate(nbytes);
}

}  // namespace torch_simdev
