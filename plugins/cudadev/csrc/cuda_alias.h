#pragma once
// Running torch's CUDA kernels on cudadev tensors.
//
// A cudadev tensor's memory is CUDA device memory, so a CUDA kernel can work
// on it directly through a *CUDA alias*: a torch.cuda tensor over the same
// bytes (same sizes, strides, storage offset, conj/neg bits). An AliasScope
// lives for one operator call: it makes the aliases, and afterwards maps what
// the CUDA kernel produced back to cudadev tensors:
//  * an output that is one of the aliases (in-place and out= operators) is
//    the cudadev tensor it aliases;
//  * an output over an alias's memory (a view) becomes a cudadev view with
//    the same geometry over the cudadev storage;
//  * a fresh output (from torch's CUDA caching allocator) becomes a cudadev
//    tensor whose storage adopts that memory (see CudadevAllocator).
// Tensors sharing one cudadev storage share one alias storage, so CUDA's
// memory-overlap checks see what they would see on torch.cuda tensors.
// Alias storages are resizable through cudadev's allocator: an out= kernel
// that grows its output (e.g. torch.arange into an empty tensor) gets cudadev
// memory, which write_back() moves into the cudadev storage.

#include <array>
#include <optional>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAStream.h>

#include "pointer_index.h"

namespace cudadev {

// The current cudadev stream of a device, as a torch.cuda (external) stream,
// for CUDAStreamGuard.
c10::cuda::CUDAStream current_stream_as_cuda(c10::DeviceIndex idx);

class AliasCache;

class AliasScope {
 public:
  // With a cache (alias_cache.h), the scope takes the aliases of tensors it
  // saw in earlier calls from it, and keeps those it makes there; only for
  // operators whose kernels follow the cache's rule.
  explicit AliasScope(c10::DeviceIndex device, AliasCache* cache = nullptr)
      : device_(device), cache_(cache) {}
  AliasScope(const AliasScope&) = delete;
  AliasScope& operator=(const AliasScope&) = delete;

  // Room for `num_tensors` aliases, so that a call aliasing long tensor
  // lists (the multi-tensor operators, foreach.cpp) grows no vector; past a
  // few tensors, lookups go through hash indexes instead of linear searches.
  // Only before the scope's first alias.
  void reserve(size_t num_tensors);

  // The CUDA alias of a cudadev tensor on this scope's device; the same
  // TensorImpl for the same cudadev tensor within the scope.
  at::Tensor to_cuda(const at::Tensor& cudadev_tensor);

  // Applies what the CUDA kernel did to the aliases (new geometry, grown or
  // replaced storage) to the cudadev tensors. Call after the kernel, before
  // to_cudadev().
  void write_back();

  // The cudadev tensor for a tensor the CUDA kernel returned; tensors on
  // other devices (e.g. CPU results) come back unchanged.
  at::Tensor to_cudadev(const at::Tensor& result);

 private:
  struct StoragePair {
    c10::Storage cudadev;
    c10::Storage alias;
    const void* original_data;
    size_t original_nbytes;
  };
  struct TensorPair {
    at::Tensor cudadev;
    at::Tensor alias;
    size_t storage;  // the index of the alias's StoragePair
  };

  // The index of the StoragePair of a cudadev storage, made if new.
  size_t alias_storage_for(const c10::Storage& cudadev_storage);
  c10::Storage cudadev_storage_for(const c10::Storage& cuda_storage);
  at::Tensor alias_over(size_t storage, const at::Tensor& cudadev_tensor);

  // Positions in storages_, tensors_ and adopted_ by pointer: through the
  // indexes once reserve() asked for them, by linear search otherwise.
  std::optional<size_t> find_tensor(const c10::TensorImpl* cudadev) const;
  std::optional<size_t> find_alias_tensor(const c10::TensorImpl* alias) const;
  std::optional<size_t> find_storage(const c10::StorageImpl* cudadev) const;
  std::optional<size_t> find_alias_storage(const c10::StorageImpl* alias) const;
  std::optional<size_t> find_adopted(const c10::StorageImpl* cuda) const;
  template <typename Vector, typename Key>
  std::optional<size_t> find(const PointerIndex& index, const Vector& items, Key&& key_of,
                             const void* key) const;
  void add_storage(StoragePair pair);
  void add_tensor(TensorPair pair);

  c10::DeviceIndex device_;
  AliasCache* cache_;
  std::vector<StoragePair> storages_;
  std::vector<TensorPair> tensors_;
  // Fresh CUDA storages already adopted in this scope (outputs sharing one).
  std::vector<std::pair<c10::StorageImpl*, c10::Storage>> adopted_;
  bool indexed_ = false;
  PointerIndex tensor_index_, alias_tensor_index_, storage_index_, alias_storage_index_,
      adopted_index_;
};

// CUDA aliases for the kernels cudadev calls directly on its hot paths
// (matmul.cpp): the same aliases as an AliasScope makes (one alias storage per
// cudadev storage, one alias per cudadev tensor, so CUDA's overlap and
// identity checks see what they would see on torch.cuda tensors), without its
// bookkeeping (no heap vectors, nothing to write back). For calls whose CUDA
// kernel neither resizes nor re-points its tensors: alias storages are not
// resizable, so a kernel that tries raises instead of giving a cudadev tensor
// memory cudadev does not know. Callers check that up front (e.g. an out=
// tensor already of the result's shape) and use an AliasScope otherwise.
class DirectAliases {
 public:
  explicit DirectAliases(c10::DeviceIndex device) : device_(device) {}
  DirectAliases(const DirectAliases&) = delete;
  DirectAliases& operator=(const DirectAliases&) = delete;

  // The CUDA alias of a cudadev tensor on this device (the same TensorImpl
  // for the same cudadev tensor). An alias keeps the cudadev storage alive.
  at::Tensor to_cuda(const at::Tensor& cudadev_tensor);

  // The most tensors one call aliases (addmm.out: self, mat1, mat2, out).
  static constexpr int kMaxTensors = 4;

 private:
  c10::DeviceIndex device_;
  int num_storages_ = 0;
  int num_tensors_ = 0;
  std::array<const c10::StorageImpl*, kMaxTensors> cudadev_storages_{};
  std::array<c10::Storage, kMaxTensors> alias_storages_;
  std::array<const c10::TensorImpl*, kMaxTensors> cudadev_tensors_{};
  std::array<at::Tensor, kMaxTensors> alias_tensors_;
};

}  // namespace cudadev
