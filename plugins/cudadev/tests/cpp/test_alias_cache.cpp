// cudadev's alias cache (csrc/alias_cache.h) and the pointer index of its
// alias scopes (csrc/pointer_index.h). Neither needs CUDA, so they are tested
// here on CPU tensors standing in for cudadev tensors and CPU storages for
// alias storages: a cached entry is given out again only while the tensor it
// was made for still has the storage, memory, geometry, dtype and conj/neg
// bits it had; entries of freed tensors are swept; a freed tensor's address
// is not reused under a live entry. Built by the root CMakeLists with the other
// C++ tests (ASan and UBSan in CI); the rest of cudadev needs a CUDA build of
// torch and runs in its Python suite on a GPU.

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <thread>
#include <unordered_set>
#include <vector>

#include "alias_cache.h"
#include "pointer_index.h"

namespace cudadev {
namespace {

// A stand-in alias storage over a tensor's memory (the cache only compares
// storages by identity and never looks inside them).
c10::Storage stand_in_alias_storage(const at::Tensor& tensor) {
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), tensor.storage().nbytes(),
      c10::DataPtr(tensor.storage().mutable_data(), tensor.device()), /*allocator=*/nullptr,
      /*resizable=*/false));
}

// A stand-in alias of `tensor` over `storage`, as AliasScope makes one.
at::Tensor stand_in_alias(const c10::Storage& storage, const at::Tensor& tensor) {
  at::Tensor alias = at::empty({0}, tensor.options()).set_(
      storage, tensor.storage_offset(), tensor.sizes(), tensor.strides());
  alias._set_conj(tensor.is_conj());
  alias._set_neg(tensor.is_neg());
  return alias;
}

struct Cached {
  c10::Storage storage;
  at::Tensor alias;
};

Cached keep(AliasCache& cache, const at::Tensor& tensor) {
  c10::Storage storage = stand_in_alias_storage(tensor);
  cache.keep_storage_alias(tensor.storage(), tensor.storage().data(), storage);
  at::Tensor alias = stand_in_alias(storage, tensor);
  cache.keep_tensor_alias(tensor, alias);
  return {storage, alias};
}

TEST(AliasCache, GivesTheSameAliasBackWhileTheTensorIsUnchanged) {
  AliasCache cache;
  const at::Tensor tensor = at::randn({4, 8});
  const Cached cached = keep(cache, tensor);
  const c10::Storage storage = cache.storage_alias(tensor.storage(), tensor.storage().data());
  ASSERT_TRUE(storage);
  EXPECT_EQ(storage.unsafeGetStorageImpl(), cached.storage.unsafeGetStorageImpl());
  const at::Tensor alias = cache.tensor_alias(tensor, storage);
  ASSERT_TRUE(alias.defined());
  EXPECT_EQ(alias.unsafeGetTensorImpl(), cached.alias.unsafeGetTensorImpl());
}

TEST(AliasCache, ATensorItNeverSawHasNoEntry) {
  AliasCache cache;
  const at::Tensor seen = at::randn({4});
  const Cached cached = keep(cache, seen);
  const at::Tensor unseen = at::randn({4});
  EXPECT_FALSE(cache.storage_alias(unseen.storage(), unseen.storage().data()));
  EXPECT_FALSE(cache.tensor_alias(unseen, cached.storage).defined());
}

TEST(AliasCache, AStorageGivenOtherMemoryIsAliasedAnew) {
  AliasCache cache;
  at::Tensor tensor = at::randn({16});
  keep(cache, tensor);
  // What resize_ to a larger size does: the same StorageImpl, new memory.
  tensor.resize_({1 << 16});
  EXPECT_FALSE(cache.storage_alias(tensor.storage(), tensor.storage().data()));
}

TEST(AliasCache, AStorageOfAnotherSizeIsAliasedAnew) {
  AliasCache cache;
  const at::Tensor tensor = at::randn({16});
  keep(cache, tensor);
  // The same memory seen with another size (set_nbytes, as a shrink does).
  tensor.storage().unsafeGetStorageImpl()->set_nbytes(8 * sizeof(float));
  EXPECT_FALSE(cache.storage_alias(tensor.storage(), tensor.storage().data()));
}

TEST(AliasCache, ATensorWithOtherGeometryOrBitsGetsANewAlias) {
  AliasCache cache;
  at::Tensor tensor = at::randn({4, 8}, at::kComplexFloat);
  const Cached cached = keep(cache, tensor);
  tensor.transpose_(0, 1);
  EXPECT_FALSE(cache.tensor_alias(tensor, cached.storage).defined()) << "strides";
  tensor.transpose_(0, 1);
  EXPECT_TRUE(cache.tensor_alias(tensor, cached.storage).defined());
  tensor.as_strided_({4, 7}, {8, 1}, 1);
  EXPECT_FALSE(cache.tensor_alias(tensor, cached.storage).defined()) << "sizes and offset";
  tensor.as_strided_({4, 8}, {8, 1}, 0);
  tensor._set_conj(true);
  EXPECT_FALSE(cache.tensor_alias(tensor, cached.storage).defined()) << "conj bit";
  tensor._set_conj(false);
  tensor._set_neg(true);
  EXPECT_FALSE(cache.tensor_alias(tensor, cached.storage).defined()) << "neg bit";
  tensor._set_neg(false);
  EXPECT_TRUE(cache.tensor_alias(tensor, cached.storage).defined());
}

TEST(AliasCache, ATensorOfAnotherDtypeGetsANewAlias) {
  AliasCache cache;
  const at::Tensor tensor = at::randn({8});
  const Cached cached = keep(cache, tensor);
  // One TensorImpl whose dtype changes: what `t.data = other` does.
  at::Tensor retyped = tensor;
  retyped.set_data(at::empty({8}, at::kInt).set_(tensor.storage(), 0, {8}, {1}));
  EXPECT_FALSE(cache.tensor_alias(retyped, cached.storage).defined());
}

TEST(AliasCache, AnAliasOverAnotherAliasStorageIsNotGivenOut) {
  AliasCache cache;
  const at::Tensor tensor = at::randn({8});
  keep(cache, tensor);
  // The storage's entry was replaced (its memory changed and came back, say):
  // the tensor's alias lies over the old alias storage and must be remade.
  const c10::Storage replacement = stand_in_alias_storage(tensor);
  cache.keep_storage_alias(tensor.storage(), tensor.storage().data(), replacement);
  EXPECT_FALSE(cache.tensor_alias(tensor, replacement).defined());
}

TEST(AliasCache, ViewsOfOneStorageShareItsAliasStorage) {
  AliasCache cache;
  const at::Tensor base = at::randn({6, 8});
  const at::Tensor row = base[1];
  const at::Tensor column = base.select(1, 3);
  const Cached cached = keep(cache, row);
  const c10::Storage storage = cache.storage_alias(column.storage(), column.storage().data());
  ASSERT_TRUE(storage);
  EXPECT_EQ(storage.unsafeGetStorageImpl(), cached.storage.unsafeGetStorageImpl());
  EXPECT_FALSE(cache.tensor_alias(column, storage).defined()) << "the column is another tensor";
}

TEST(AliasCache, AFreedTensorsAddressIsNotReusedWhileItsEntryLives) {
  AliasCache cache;
  std::unordered_set<const c10::TensorImpl*> freed;
  // Fewer tensors than the smallest sweep: every entry stays.
  for (int i = 0; i < 1000; ++i) {
    const at::Tensor temporary = at::randn({4});
    // The entry's weak reference keeps the freed TensorImpl's memory, so no
    // later tensor can be allocated at an address an entry names.
    ASSERT_EQ(freed.count(temporary.unsafeGetTensorImpl()), 0u) << "address reused at " << i;
    keep(cache, temporary);
    freed.insert(temporary.unsafeGetTensorImpl());
  }
  EXPECT_EQ(cache.num_tensor_entries(), 1000u);
}

TEST(AliasCache, EntriesOfFreedTensorsAreSwept) {
  AliasCache cache;
  const at::Tensor kept = at::randn({4});
  keep(cache, kept);
  for (int i = 0; i < 5000; ++i) {
    keep(cache, at::randn({4}));
  }
  // Swept whenever a map doubled since its last sweep: never above twice the
  // live entries plus the smallest sweep size, however many tensors died.
  EXPECT_LT(cache.num_tensor_entries(), 2048u + 2);
  EXPECT_LT(cache.num_storage_entries(), 2048u + 2);
  const c10::Storage storage = cache.storage_alias(kept.storage(), kept.storage().data());
  ASSERT_TRUE(storage) << "a live tensor's entries stay";
  EXPECT_TRUE(cache.tensor_alias(kept, storage).defined());
}

TEST(AliasCache, EachThreadHasItsOwnCache) {
  AliasCache* here = &AliasCache::of_this_thread();
  AliasCache* there = nullptr;
  std::thread([&] { there = &AliasCache::of_this_thread(); }).join();
  EXPECT_NE(here, there);
  EXPECT_EQ(here, &AliasCache::of_this_thread());
}

TEST(PointerIndex, FindsWhatWasInsertedThroughGrowth) {
  PointerIndex index;
  std::vector<int> objects(1000);
  for (size_t i = 0; i < objects.size(); ++i) {
    index.insert(&objects[i], i);  // grows past the first table several times
  }
  for (size_t i = 0; i < objects.size(); ++i) {
    ASSERT_EQ(index.find(&objects[i]), std::optional<size_t>(i));
  }
  int other = 0;
  EXPECT_EQ(index.find(&other), std::nullopt);
  EXPECT_EQ(PointerIndex().find(&other), std::nullopt) << "an empty index";
}

TEST(PointerIndex, ReserveKeepsWhatIsThere) {
  PointerIndex index;
  int a = 0, b = 0;
  index.insert(&a, 7);
  index.reserve(500);
  index.insert(&b, 8);
  EXPECT_EQ(index.find(&a), std::optional<size_t>(7));
  EXPECT_EQ(index.find(&b), std::optional<size_t>(8));
}

}  // namespace
}  // namespace cudadev
