// Growing and reshaping simdev storages, in stream order.
//
// ATen's CPU resize path copies the old bytes with a synchronous memcpy,
// which on simdev would race with queued work that is still writing them.
// Here the copy is queued on the current stream instead, and the old memory
// is kept alive until that copy has run.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace torch_simdev {

// Gives `storage` exactly `nbytes` (keeping the first min(old, new) bytes).
void resizeStorageBytes(const c10::Storage& storage, size_t nbytes);

// Grows `storage` to at least `nbytes`; never shrinks.
void ensureStorageBytes(const c10::Storage& storage, size_t nbytes);

// Sets sizes and strides of `tensor` (keeping its storage offset), growing
// the storage if the new layout needs more bytes.
void setSizesAndStrides(const at::Tensor& tensor, at::IntArrayRef sizes, at::IntArrayRef strides);

// Tensor.resize_ semantics: contiguous (or `memory_format`) layout of `sizes`.
void resizeTensor(const at::Tensor& tensor, at::IntArrayRef sizes,
                  std::optional<c10::MemoryFormat> memory_format);

}  // namespace torch_simdev
