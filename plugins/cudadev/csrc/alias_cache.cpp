#include "alias_cache.h"

#include <algorithm>
#include <utility>

namespace cudadev {
namespace {

// Below this many entries a map is never swept: a sweep would cost more than
// the few dead entries it could drop.
constexpr size_t kSmallestSweep = 1024;

// Drops the entries whose cudadev object was freed, once the map has doubled
// since its last sweep (amortised O(1) per entry kept).
template <typename Map>
void sweep_if_doubled(Map& map, size_t& size_after_sweep) {
  if (map.size() < std::max(kSmallestSweep, 2 * size_after_sweep)) {
    return;
  }
  for (auto it = map.begin(); it != map.end();) {
    it = it->second.cudadev.expired() ? map.erase(it) : std::next(it);
  }
  size_after_sweep = map.size();
}

bool same_layout(const at::Tensor& a, const at::Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes().equals(b.sizes()) &&
         a.strides().equals(b.strides()) && a.storage_offset() == b.storage_offset() &&
         a.is_conj() == b.is_conj() && a.is_neg() == b.is_neg();
}

}  // namespace

AliasCache& AliasCache::of_this_thread() {
  thread_local AliasCache cache;
  return cache;
}

c10::Storage AliasCache::storage_alias(const c10::Storage& cudadev, const void* data) const {
  const auto it = storages_.find(cudadev.unsafeGetStorageImpl());
  if (it == storages_.end() || it->second.data != data || it->second.nbytes != cudadev.nbytes()) {
    return {};
  }
  return it->second.alias;
}

void AliasCache::keep_storage_alias(const c10::Storage& cudadev, const void* data,
                                    c10::Storage alias) {
  const size_t nbytes = cudadev.nbytes();
  storages_.insert_or_assign(
      cudadev.unsafeGetStorageImpl(),
      StorageEntry{cudadev.getWeakStorageImpl(), std::move(alias), data, nbytes});
  sweep_if_doubled(storages_, storages_after_sweep_);
}

at::Tensor AliasCache::tensor_alias(const at::Tensor& cudadev,
                                    const c10::Storage& alias_storage) const {
  const auto it = tensors_.find(cudadev.unsafeGetTensorImpl());
  if (it == tensors_.end()) {
    return {};
  }
  const at::Tensor& alias = it->second.alias;
  if (alias.storage().unsafeGetStorageImpl() != alias_storage.unsafeGetStorageImpl() ||
      !same_layout(alias, cudadev)) {
    return {};
  }
  return alias;
}

void AliasCache::keep_tensor_alias(const at::Tensor& cudadev, at::Tensor alias) {
  tensors_.insert_or_assign(
      cudadev.unsafeGetTensorImpl(),
      TensorEntry{c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>(
                      cudadev.getIntrusivePtr()),
                  std::move(alias)});
  sweep_if_doubled(tensors_, tensors_after_sweep_);
}

}  // namespace cudadev
