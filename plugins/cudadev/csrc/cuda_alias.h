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
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAStream.h>

namespace cudadev {

// The current cudadev stream of a device, as a torch.cuda (external) stream,
// for CUDAStreamGuard.
c10::cuda::CUDAStream current_stream_as_cuda(c10::DeviceIndex idx);

class AliasScope {
 public:
  explicit AliasScope(c10::DeviceIndex device) : device_(device) {}
  AliasScope(const AliasScope&) = delete;
  AliasScope& operator=(const AliasScope&) = delete;

  // Room for `num_tensors` aliases, so that a call aliasing long tensor
  // lists (the multi-tensor operators, foreach.cpp) grows no vector.
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

  c10::DeviceIndex device_;
  std::vector<StoragePair> storages_;
  std::vector<TensorPair> tensors_;
  // Fresh CUDA storages already adopted in this scope (outputs sharing one).
  std::vector<std::pair<c10::StorageImpl*, c10::Storage>> adopted_;
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
