#include "Memory.h"

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "Config.h"
#include "Error.h"

namespace simdev {
namespace {

// Allocations are aligned like a real device's (CUDA guarantees 256 bytes),
// so kernels may use any vector width.
constexpr size_t kAlignment = 256;

struct Allocation {
  size_t size;
  int device;
};

class AllocationRegistry {
 public:
  void* allocate(size_t size, int device) {
    const uint64_t capacity = config().memory_capacity;
    std::lock_guard<std::mutex> lock(mutex_);
    if (used_.empty()) used_.resize(static_cast<size_t>(config().device_count));
    uint64_t& used = used_[static_cast<size_t>(device)];
    if (size > capacity - used) {
      throw error(sdErrorMemoryAllocation, "cannot allocate ", size, " bytes on device ", device, ": ", used,
                  " of ", capacity,
                  " bytes are in use; free memory or raise SIMDEV_MEMORY_CAPACITY (bytes per device)");
    }
    // size <= capacity <= 2^48 here, so rounding up cannot overflow. A 0-byte
    // allocation still gets its own block, hence a unique non-NULL pointer.
    const size_t padded = (size == 0 ? kAlignment : (size + kAlignment - 1) / kAlignment * kAlignment);
    void* ptr = std::aligned_alloc(kAlignment, padded);
    if (ptr == nullptr) {
      throw error(sdErrorMemoryAllocation, "the host could not provide ", size, " bytes for device ", device);
    }
    by_address_.emplace(reinterpret_cast<uintptr_t>(ptr), Allocation{size, device});
    used += size;
    return ptr;
  }

  void release(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = by_address_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == by_address_.end()) {
      auto containing = containingLocked(ptr);
      if (containing != by_address_.end()) {
        throw error(sdErrorInvalidDevicePointer, ptr, " points inside the allocation at ",
                    reinterpret_cast<void*>(containing->first), "; pass the pointer sdMalloc returned");
      }
      throw error(sdErrorInvalidDevicePointer, ptr,
                  " is not a live simdev allocation (already freed, or not from sdMalloc)");
    }
    used_[static_cast<size_t>(it->second.device)] -= it->second.size;
    by_address_.erase(it);
    std::free(ptr);
  }

  // The allocation containing `ptr` (a 0-byte allocation contains its base).
  bool find(const void* ptr, uintptr_t* base, Allocation* allocation) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = containingLocked(ptr);
    if (it == by_address_.end()) return false;
    *base = it->first;
    *allocation = it->second;
    return true;
  }

  uint64_t used(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return used_.empty() ? 0 : used_[static_cast<size_t>(device)];
  }

 private:
  std::map<uintptr_t, Allocation>::iterator containingLocked(const void* ptr) {
    const auto address = reinterpret_cast<uintptr_t>(ptr);
    auto it = by_address_.upper_bound(address);
    if (it == by_address_.begin()) return by_address_.end();
    --it;
    const uintptr_t extent = it->second.size == 0 ? 1 : it->second.size;
    return address - it->first < extent ? it : by_address_.end();
  }

  std::mutex mutex_;
  std::map<uintptr_t, Allocation> by_address_;
  std::vector<uint64_t> used_;  // bytes in use, by device
};

AllocationRegistry& allocations() {
  // Leaked: allocations may be freed from static destructors of other
  // libraries (a caching allocator at exit), after ours would be gone.
  static auto* registry = new AllocationRegistry;
  return *registry;
}

}  // namespace

int requireDeviceRange(const void* ptr, size_t size, int device, const char* role) {
  uintptr_t base = 0;
  Allocation allocation{};
  if (!allocations().find(ptr, &base, &allocation)) {
    throw error(sdErrorInvalidDevicePointer, role, " ", ptr,
                " is not simdev device memory (freed, never allocated, or a host pointer; check the copy kind)");
  }
  const uintptr_t offset = reinterpret_cast<uintptr_t>(ptr) - base;
  if (size > allocation.size - offset) {
    throw error(sdErrorInvalidDevicePointer, role, " range [", ptr, ", +", size, " bytes) runs past the end of the ",
                allocation.size, "-byte allocation at ", reinterpret_cast<void*>(base), " (", offset,
                " bytes in); shrink the size or check the offset");
  }
  if (device >= 0 && allocation.device != device) {
    throw error(sdErrorInvalidDevicePointer, role, " ", ptr, " is memory of device ", allocation.device,
                ", but the stream belongs to device ", device,
                "; use a stream of the memory's device (sdMemcpyDeviceToDevice may cross devices)");
  }
  return allocation.device;
}

}  // namespace simdev

using simdev::apiCall;
using simdev::error;

extern "C" {

SIMDEV_API sdError_t sdMalloc(void** out_ptr, size_t size, int device) {
  return apiCall("sdMalloc", [&] {
    simdev::requireOutput(out_ptr, "out_ptr");
    simdev::requireDevice(device);
    *out_ptr = simdev::allocations().allocate(size, device);
  });
}

SIMDEV_API sdError_t sdFree(void* ptr) {
  return apiCall("sdFree", [&] {
    if (ptr != nullptr) simdev::allocations().release(ptr);
  });
}

SIMDEV_API sdError_t sdPointerGetDevice(const void* ptr, int* out_device) {
  return apiCall("sdPointerGetDevice", [&] {
    simdev::requireOutput(out_device, "out_device");
    *out_device = simdev::requireDeviceRange(ptr, 0, -1, "pointer");
  });
}

SIMDEV_API sdError_t sdMemGetInfo(int device, size_t* out_used, size_t* out_capacity) {
  return apiCall("sdMemGetInfo", [&] {
    simdev::requireOutput(out_used, "out_used");
    simdev::requireOutput(out_capacity, "out_capacity");
    simdev::requireDevice(device);
    *out_used = static_cast<size_t>(simdev::allocations().used(device));
    *out_capacity = static_cast<size_t>(simdev::config().memory_capacity);
  });
}

}  // extern "C"
