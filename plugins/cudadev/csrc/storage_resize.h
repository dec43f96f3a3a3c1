#pragma once
// Growing and resizing the storage of cudadev tensors.

#include <c10/core/StorageImpl.h>

namespace cudadev {

// Resizes a cudadev storage to exactly new_nbytes with fresh memory from the
// cudadev allocator, keeping the first min(old, new) bytes. The copy runs on
// the current cudadev stream of the storage's device, and the old memory is
// recorded on that stream so that its free waits for the copy.
void resize_storage_bytes(c10::StorageImpl* storage, size_t new_nbytes);

// Grows the storage to at least min_nbytes (no-op when it is large enough).
void ensure_storage_bytes(c10::StorageImpl* storage, size_t min_nbytes);

}  // namespace cudadev
