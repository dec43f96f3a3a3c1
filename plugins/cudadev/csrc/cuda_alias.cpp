#include "cuda_alias.h"

#include <ATen/ops/zeros.h>
#include <c10/core/TensorImpl.h>

#include "alias_cache.h"
#include "allocator.h"
#include "streams.h"

namespace cudadev {
namespace {

constexpr auto kCudadev = c10::DeviceType::PrivateUse1;

// Deleter of an alias storage's DataPtr: the alias keeps its cudadev storage
// (and so the memory) alive, whatever happens to the cudadev tensor meanwhile.
// The context is a reference to the cudadev StorageImpl, released from a
// c10::Storage (no heap allocation of its own).
void release_storage_impl(void* context) noexcept {
  c10::intrusive_ptr<c10::StorageImpl>::reclaim(static_cast<c10::StorageImpl*>(context));
}

// The allocator of alias storages. A CUDA kernel that grows an alias storage
// (an out= tensor too small for the result) allocates through it, so it gets
// cudadev memory on the current cudadev stream — which is also the current
// CUDA stream while the kernel runs. The memory is labelled CUDA until
// write_back() hands it to the cudadev storage.
class AliasStorageAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DataPtr data = allocator().allocate(nbytes);
    data.unsafe_set_device(c10::Device(c10::DeviceType::CUDA, data.device().index()));
    return data;
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    allocator().copy_data(dest, src, count);
  }
};

AliasStorageAllocator& alias_storage_allocator() {
  static auto* instance = new AliasStorageAllocator();
  return *instance;
}

// A tensor of dispatch key `key` over `storage` with the geometry and the
// lazy conj/neg bits of `like`.
at::Tensor tensor_over(c10::Storage storage, c10::DispatchKey key, const at::Tensor& like) {
  at::Tensor tensor = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(key), like.dtype());
  c10::TensorImpl* impl = tensor.unsafeGetTensorImpl();
  impl->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  impl->_set_conj(like.is_conj());
  impl->_set_neg(like.is_neg());
  return tensor;
}

// What a CUDA alias needs of a cudadev tensor.
void check_aliasable(const at::Tensor& cudadev_tensor, c10::DeviceIndex device) {
  TORCH_CHECK(cudadev_tensor.layout() == c10::kStrided,
              "cudadev: operators support strided tensors only, got layout ",
              cudadev_tensor.layout());
  TORCH_CHECK(cudadev_tensor.has_storage(),
              "cudadev: the tensor has no storage (a tensor subclass or wrapper?); cudadev runs "
              "CUDA kernels on tensors that own cudadev memory.");
  TORCH_INTERNAL_ASSERT(cudadev_tensor.device() == c10::Device(kCudadev, device),
                        "cudadev: CUDA aliases for cudadev:", static_cast<int>(device),
                        " got a tensor on ", cudadev_tensor.device());
}

bool same_geometry(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes().equals(b.sizes()) && a.strides().equals(b.strides()) &&
         a.storage_offset() == b.storage_offset();
}

}  // namespace

c10::cuda::CUDAStream current_stream_as_cuda(c10::DeviceIndex idx) {
  return c10::cuda::getStreamFromExternal(current_native_stream(idx), idx);
}

namespace {

// Past this many tensors a scope indexes what it aliased (pointer_index.h).
constexpr size_t kIndexedFrom = 8;

template <typename Vector, typename Key>
std::optional<size_t> linear_find(const Vector& items, Key&& key_of, const void* key) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (key_of(items[i]) == key) {
      return i;
    }
  }
  return std::nullopt;
}

// A CUDA storage over a cudadev storage's memory (`data`) that does not own
// it: for the alias cache, whose aliases outlive the call (alias_cache.h).
// Not resizable, so a kernel cannot give the tensor other memory through it.
c10::Storage borrowing_alias_storage(const c10::Storage& cudadev_storage, void* data,
                                     c10::DeviceIndex device) {
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), cudadev_storage.nbytes(),
      c10::DataPtr(data, c10::Device(c10::DeviceType::CUDA, device)), /*allocator=*/nullptr,
      /*resizable=*/false));
}

}  // namespace

void AliasScope::reserve(size_t num_tensors) {
  // Before the first alias, so that the indexes start complete.
  TORCH_INTERNAL_ASSERT(storages_.empty() && tensors_.empty() && adopted_.empty(),
                        "cudadev: AliasScope::reserve() after the scope made aliases");
  storages_.reserve(num_tensors);
  tensors_.reserve(num_tensors);
  if (num_tensors > kIndexedFrom) {
    indexed_ = true;
    for (PointerIndex* index : {&tensor_index_, &alias_tensor_index_, &storage_index_,
                                &alias_storage_index_, &adopted_index_}) {
      index->reserve(num_tensors);
    }
  }
}

template <typename Vector, typename Key>
std::optional<size_t> AliasScope::find(const PointerIndex& index, const Vector& items, Key&& key_of,
                                       const void* key) const {
  return indexed_ ? index.find(key) : linear_find(items, key_of, key);
}

std::optional<size_t> AliasScope::find_tensor(const c10::TensorImpl* cudadev) const {
  return find(tensor_index_, tensors_, [](const TensorPair& p) { return p.cudadev.unsafeGetTensorImpl(); },
              cudadev);
}

std::optional<size_t> AliasScope::find_alias_tensor(const c10::TensorImpl* alias) const {
  return find(alias_tensor_index_, tensors_, [](const TensorPair& p) { return p.alias.unsafeGetTensorImpl(); },
              alias);
}

std::optional<size_t> AliasScope::find_storage(const c10::StorageImpl* cudadev) const {
  return find(storage_index_, storages_,
              [](const StoragePair& p) { return p.cudadev.unsafeGetStorageImpl(); }, cudadev);
}

std::optional<size_t> AliasScope::find_alias_storage(const c10::StorageImpl* alias) const {
  return find(alias_storage_index_, storages_,
              [](const StoragePair& p) { return p.alias.unsafeGetStorageImpl(); }, alias);
}

std::optional<size_t> AliasScope::find_adopted(const c10::StorageImpl* cuda) const {
  return find(adopted_index_, adopted_, [](const auto& p) { return p.first; }, cuda);
}

void AliasScope::add_storage(StoragePair pair) {
  if (indexed_) {
    storage_index_.insert(pair.cudadev.unsafeGetStorageImpl(), storages_.size());
    alias_storage_index_.insert(pair.alias.unsafeGetStorageImpl(), storages_.size());
  }
  storages_.push_back(std::move(pair));
}

void AliasScope::add_tensor(TensorPair pair) {
  if (indexed_) {
    tensor_index_.insert(pair.cudadev.unsafeGetTensorImpl(), tensors_.size());
    alias_tensor_index_.insert(pair.alias.unsafeGetTensorImpl(), tensors_.size());
  }
  tensors_.push_back(std::move(pair));
}

size_t AliasScope::alias_storage_for(const c10::Storage& cudadev_storage) {
  c10::StorageImpl* impl = cudadev_storage.unsafeGetStorageImpl();
  if (const std::optional<size_t> known = find_storage(impl)) {
    return *known;
  }
  // mutable_data() materialises a copy-on-write storage first, so a kernel
  // writing through the alias never writes into memory another tensor shares.
  void* data = impl->mutable_data();
  const size_t nbytes = impl->nbytes();
  c10::Storage alias;
  if (cache_ != nullptr) {
    alias = cache_->storage_alias(cudadev_storage, data);
    if (!alias) {
      alias = borrowing_alias_storage(cudadev_storage, data, device_);
      cache_->keep_storage_alias(cudadev_storage, data, alias);
    }
  } else {
    c10::DataPtr data_ptr(data, c10::Storage(cudadev_storage).unsafeReleaseStorageImpl(),
                          &release_storage_impl, c10::Device(c10::DeviceType::CUDA, device_));
    alias = c10::Storage(c10::make_intrusive<c10::StorageImpl>(
        c10::StorageImpl::use_byte_size_t(), nbytes, std::move(data_ptr),
        &alias_storage_allocator(), impl->resizable()));
  }
  add_storage(StoragePair{cudadev_storage, std::move(alias), data, nbytes});
  return storages_.size() - 1;
}

c10::Storage AliasScope::cudadev_storage_for(const c10::Storage& cuda_storage) {
  c10::StorageImpl* impl = cuda_storage.unsafeGetStorageImpl();
  if (const std::optional<size_t> ours = find_alias_storage(impl)) {
    return storages_[*ours].cudadev;
  }
  if (const std::optional<size_t> adopted = find_adopted(impl)) {
    return adopted_[*adopted].second;
  }
  TORCH_CHECK(cuda_storage.device() == c10::Device(c10::DeviceType::CUDA, device_),
              "cudadev: a CUDA kernel run for cudadev:", static_cast<int>(device_),
              " returned memory on ", cuda_storage.device(), "; cudadev cannot adopt it.");
  const size_t nbytes = cuda_storage.nbytes();
  c10::Storage cudadev(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), nbytes,
      allocator().adopt_cuda_storage(cuda_storage, device_), &allocator(),
      /*resizable=*/true));
  if (indexed_) {
    adopted_index_.insert(impl, adopted_.size());
  }
  adopted_.emplace_back(impl, cudadev);
  return cudadev;
}

at::Tensor AliasScope::alias_over(size_t storage, const at::Tensor& cudadev_tensor) {
  const c10::Storage& alias_storage = storages_[storage].alias;
  if (cache_ == nullptr) {
    return tensor_over(alias_storage, c10::DispatchKey::CUDA, cudadev_tensor);
  }
  at::Tensor alias = cache_->tensor_alias(cudadev_tensor, alias_storage);
  if (!alias.defined()) {
    alias = tensor_over(alias_storage, c10::DispatchKey::CUDA, cudadev_tensor);
    cache_->keep_tensor_alias(cudadev_tensor, alias);
  }
  return alias;
}

at::Tensor AliasScope::to_cuda(const at::Tensor& cudadev_tensor) {
  if (const std::optional<size_t> known = find_tensor(cudadev_tensor.unsafeGetTensorImpl())) {
    return tensors_[*known].alias;
  }
  check_aliasable(cudadev_tensor, device_);
  const size_t storage = alias_storage_for(cudadev_tensor.storage());
  at::Tensor alias = alias_over(storage, cudadev_tensor);
  add_tensor(TensorPair{cudadev_tensor, alias, storage});
  return alias;
}

void AliasScope::write_back() {
  for (StoragePair& pair : storages_) {
    c10::StorageImpl* alias = pair.alias.unsafeGetStorageImpl();
    if (alias->data() == pair.original_data && alias->nbytes() == pair.original_nbytes) {
      continue;
    }
    // The kernel resized the alias storage (new memory came from
    // AliasStorageAllocator, or it shrank to nothing): the cudadev storage
    // takes the new memory over.
    const size_t nbytes = alias->nbytes();
    c10::DataPtr resized = alias->set_data_ptr(c10::DataPtr(nullptr, alias->device()));
    TORCH_CHECK(resized.get() == nullptr || allocator().owns(resized),
                "cudadev: a CUDA kernel gave a cudadev tensor memory that cudadev did not "
                "allocate; this operator cannot run on cudadev.");
    resized.unsafe_set_device(c10::Device(kCudadev, device_));
    c10::StorageImpl* target = pair.cudadev.unsafeGetStorageImpl();
    if (target->data() != nullptr) {
      // The kernel copied the old contents on the current stream; the old
      // memory's free must wait for that copy.
      allocator().recordStream(target->data_ptr(), current_stream(device_));
    }
    target->set_data_ptr_noswap(std::move(resized));
    target->set_nbytes(nbytes);
    pair.original_data = target->data();
    pair.original_nbytes = nbytes;
  }
  for (TensorPair& pair : tensors_) {
    c10::TensorImpl* impl = pair.cudadev.unsafeGetTensorImpl();
    // A kernel may have pointed the alias at other memory (set_-style out=
    // kernels); the cudadev tensor follows. (The usual case, the alias still
    // on the storage made for it, needs no search.)
    const c10::StorageImpl* alias_storage = pair.alias.storage().unsafeGetStorageImpl();
    if (alias_storage != storages_[pair.storage].alias.unsafeGetStorageImpl()) {
      c10::Storage storage = cudadev_storage_for(pair.alias.storage());
      if (storage.unsafeGetStorageImpl() != pair.cudadev.storage().unsafeGetStorageImpl()) {
        impl->set_storage_keep_dtype(std::move(storage));
      }
    }
    if (!same_geometry(pair.cudadev, pair.alias)) {
      impl->set_sizes_and_strides(pair.alias.sizes(), pair.alias.strides(),
                                  pair.alias.storage_offset());
    }
  }
}

at::Tensor AliasScope::to_cudadev(const at::Tensor& result) {
  if (!result.defined() || result.device().type() != c10::DeviceType::CUDA) {
    return result;
  }
  if (const std::optional<size_t> ours = find_alias_tensor(result.unsafeGetTensorImpl())) {
    return tensors_[*ours].cudadev;
  }
  if (result._is_zerotensor()) {
    // A ZeroTensor (autograd's memory-free zeros) has no memory to adopt;
    // cudadev has no ZeroTensor of its own, so it materialises the zeros.
    return at::zeros(result.sizes(), result.options().device(c10::Device(kCudadev, device_)));
  }
  TORCH_CHECK(result.layout() == c10::kStrided && result.has_storage(),
              "cudadev: the CUDA kernel returned a ", result.layout(),
              " tensor; cudadev supports strided tensors only.");
  return tensor_over(cudadev_storage_for(result.storage()), c10::DispatchKey::PrivateUse1, result);
}

at::Tensor DirectAliases::to_cuda(const at::Tensor& cudadev_tensor) {
  const c10::TensorImpl* tensor_impl = cudadev_tensor.unsafeGetTensorImpl();
  for (int i = 0; i < num_tensors_; ++i) {
    if (cudadev_tensors_[i] == tensor_impl) {
      return alias_tensors_[i];
    }
  }
  check_aliasable(cudadev_tensor, device_);
  TORCH_INTERNAL_ASSERT(num_tensors_ < kMaxTensors, "cudadev: DirectAliases holds at most ",
                        kMaxTensors, " tensors");
  const c10::Storage& cudadev_storage = cudadev_tensor.storage();
  c10::StorageImpl* storage_impl = cudadev_storage.unsafeGetStorageImpl();
  c10::Storage alias_storage;
  for (int i = 0; i < num_storages_; ++i) {
    if (cudadev_storages_[i] == storage_impl) {
      alias_storage = alias_storages_[i];
      break;
    }
  }
  if (!alias_storage) {
    // mutable_data() materialises a copy-on-write storage first, as in
    // AliasScope: a kernel writing through the alias never writes into memory
    // another tensor shares.
    void* data = storage_impl->mutable_data();
    const size_t nbytes = storage_impl->nbytes();
    c10::DataPtr data_ptr(data, c10::Storage(cudadev_storage).unsafeReleaseStorageImpl(),
                          &release_storage_impl, c10::Device(c10::DeviceType::CUDA, device_));
    alias_storage = c10::Storage(c10::make_intrusive<c10::StorageImpl>(
        c10::StorageImpl::use_byte_size_t(), nbytes, std::move(data_ptr), /*allocator=*/nullptr,
        /*resizable=*/false));
    cudadev_storages_[num_storages_] = storage_impl;
    alias_storages_[num_storages_] = alias_storage;
    ++num_storages_;
  }
  at::Tensor alias = tensor_over(std::move(alias_storage), c10::DispatchKey::CUDA, cudadev_tensor);
  cudadev_tensors_[num_tensors_] = tensor_impl;
  alias_tensors_[num_tensors_] = alias;
  ++num_tensors_;
  return alias;
}

}  // namespace cudadev
