#pragma once
// Pointer -> position lookups for an AliasScope over long tensor lists.
//
// A scope looks every tensor up among those it already aliased (the same
// tensor twice gets one alias; tensors of one storage share an alias
// storage), and every result among its aliases. With a linear search that
// is quadratic in the number of tensors, which a multi-tensor operator call
// (three lists of a model's parameters, hundreds of tensors) felt. This is an
// open-addressing hash table of pointers, one heap block, no removal: scopes
// only add.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace cudadev {

class PointerIndex {
 public:
  // Room for `n` keys before the table grows.
  void reserve(size_t n) {
    size_t capacity = 16;
    while (capacity < 2 * n) {
      capacity *= 2;
    }
    if (capacity > slots_.size()) {
      rehash(capacity);
    }
  }

  std::optional<size_t> find(const void* key) const {
    if (slots_.empty()) {
      return std::nullopt;
    }
    for (size_t i = slot_of(key);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].first == key) {
        return slots_[i].second;
      }
      if (slots_[i].first == nullptr) {
        return std::nullopt;
      }
    }
  }

  // Adds a key not yet in the table.
  void insert(const void* key, size_t position) {
    if (2 * (size_ + 1) > slots_.size()) {
      rehash(slots_.empty() ? 16 : 2 * slots_.size());
    }
    place(key, position);
    ++size_;
  }

 private:
  size_t slot_of(const void* key) const {
    // Fibonacci hashing; heap pointers' low bits are mostly alignment.
    const auto bits = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(key));
    return static_cast<size_t>((bits * 0x9E3779B97F4A7C15ull) >> 32) & (slots_.size() - 1);
  }

  void place(const void* key, size_t position) {
    size_t i = slot_of(key);
    while (slots_[i].first != nullptr) {
      i = (i + 1) & (slots_.size() - 1);
    }
    slots_[i] = {key, position};
  }

  void rehash(size_t capacity) {
    std::vector<std::pair<const void*, size_t>> old(capacity, {nullptr, 0});
    old.swap(slots_);
    for (const auto& [key, position] : old) {
      if (key != nullptr) {
        place(key, position);
      }
    }
  }

  std::vector<std::pair<const void*, size_t>> slots_;
  size_t size_ = 0;
};

}  // namespace cudadev
