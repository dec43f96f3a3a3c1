// Opaque handles (sdStream_t, sdEvent_t, sdModule_t, sdFunction_t) are not
// addresses but ids drawn from one process-wide counter that never repeats.
// So a destroyed handle stays invalid forever (no address reuse can revive
// it), and a handle of one kind passed as another kind is rejected.
#ifndef SIMDEV_SRC_HANDLE_TABLE_H_
#define SIMDEV_SRC_HANDLE_TABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace simdev {

inline uint64_t nextHandleId() {
  static std::atomic<uint64_t> next{1};  // 0 would be NULL, never a valid handle
  return next.fetch_add(1, std::memory_order_relaxed);
}

template <typename Handle>
uint64_t handleId(Handle handle) {
  return reinterpret_cast<uintptr_t>(handle);
}

template <typename Handle>
Handle asHandle(uint64_t id) {
  return reinterpret_cast<Handle>(static_cast<uintptr_t>(id));
}

// Live objects by handle id. Lookups hand out shared_ptrs, so an object stays
// valid for a caller that found it even if another thread erases it meanwhile.
template <typename T>
class HandleTable {
 public:
  // `id` comes from nextHandleId(); objects that print their own handle in
  // messages are constructed with it before they are inserted.
  void insert(uint64_t id, std::shared_ptr<T> object) {
    std::lock_guard<std::mutex> lock(mutex_);
    objects_.emplace(id, std::move(object));
  }

  std::shared_ptr<T> find(uint64_t id) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = objects_.find(id);
    return it == objects_.end() ? nullptr : it->second;
  }

  // Removes and returns the object (nullptr if `id` is not live).
  std::shared_ptr<T> erase(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = objects_.find(id);
    if (it == objects_.end()) return nullptr;
    std::shared_ptr<T> object = std::move(it->second);
    objects_.erase(it);
    return object;
  }

  std::vector<std::shared_ptr<T>> snapshot() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::shared_ptr<T>> all;
    all.reserve(objects_.size());
    for (const auto& entry : objects_) all.push_back(entry.second);
    return all;
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, std::shared_ptr<T>> objects_;
};

}  // namespace simdev

#endif  // SIMDEV_SRC_HANDLE_TABLE_H_
