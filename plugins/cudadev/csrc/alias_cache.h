#pragma once
// CUDA aliases kept from one multi-tensor operator call to the next.
//
// An AdamW(foreach=True) step calls a dozen multi-tensor operators on the
// same parameters, gradients and optimizer states, step after step. Making
// and releasing a CUDA alias (a StorageImpl and a TensorImpl, cuda_alias.h)
// for every tensor of every call was most of the host time such a step cost
// cudadev beyond torch.cuda's own (bench/multi_tensor_host.py: 0.3-0.55 us
// per tensor argument on an H200). The cache keeps, per host thread, one
// alias storage per cudadev storage and one alias per cudadev tensor, and
// gives them out again while they still describe the tensor: the same
// storage with the same memory (data pointer and size), the same sizes,
// strides, offset, dtype and conj/neg bits.
//
// A cached alias storage does not own the cudadev memory: owning it would keep
// the memory of tensors freed since alive for as long as they stay in the
// cache. It is given out only for a tensor the caller holds, after checking
// that the tensor's storage still has that memory, so the memory outlives the
// call. Hence the rule for callers: only operators whose CUDA kernels neither
// keep a reference to an argument past the call nor resize or re-point their
// arguments may take cached aliases (the alias storages are not resizable, so
// a kernel that tries raises). torch's multi-tensor kernels do neither
// (foreach.cpp).
//
// Entries hold weak references to the cudadev TensorImpl or StorageImpl they
// describe: while an entry exists, no other object can be allocated at the
// address that keys it, so an entry found for an object the caller holds is
// that object's. Entries of objects freed since are swept out whenever the
// cache has doubled since its last sweep.

#include <cstddef>
#include <unordered_map>

#include <ATen/core/Tensor.h>
#include <c10/core/Storage.h>
#include <c10/core/UndefinedTensorImpl.h>
#include <c10/util/intrusive_ptr.h>

namespace cudadev {

class AliasCache {
 public:
  // The calling thread's cache (each thread has its own: no locking).
  static AliasCache& of_this_thread();

  // The cached alias storage of `cudadev` if it still aliases `data` (the
  // storage's current memory) and the storage's size; an empty Storage if not.
  c10::Storage storage_alias(const c10::Storage& cudadev, const void* data) const;
  void keep_storage_alias(const c10::Storage& cudadev, const void* data, c10::Storage alias);

  // The cached alias of `cudadev` if it lies over `alias_storage` and still
  // has the tensor's geometry, dtype and conj/neg bits; undefined if not.
  at::Tensor tensor_alias(const at::Tensor& cudadev, const c10::Storage& alias_storage) const;
  void keep_tensor_alias(const at::Tensor& cudadev, at::Tensor alias);

  size_t num_storage_entries() const { return storages_.size(); }
  size_t num_tensor_entries() const { return tensors_.size(); }

 private:
  struct StorageEntry {
    c10::weak_intrusive_ptr<c10::StorageImpl> cudadev;
    c10::Storage alias;
    const void* data;
    size_t nbytes;
  };
  struct TensorEntry {
    c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> cudadev;
    at::Tensor alias;
  };

  std::unordered_map<const c10::StorageImpl*, StorageEntry> storages_;
  std::unordered_map<const c10::TensorImpl*, TensorEntry> tensors_;
  size_t storages_after_sweep_ = 0;
  size_t tensors_after_sweep_ = 0;
};

}  // namespace cudadev
