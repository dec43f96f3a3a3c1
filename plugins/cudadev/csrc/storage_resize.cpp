#include "storage_resize.h"

#include <algorithm>

#include <cuda_runtime_api.h>

#include "allocator.h"
#include "cuda_check.h"
#include "device.h"
#include "streams.h"

namespace cudadev {

void resize_storage_bytes(c10::StorageImpl* storage, size_t new_nbytes) {
  TORCH_CHECK(storage != nullptr, "cudadev: cannot resize a tensor without storage");
  TORCH_CHECK(storage->device_type() == c10::DeviceType::PrivateUse1,
              "cudadev: resize_storage_bytes got a storage on ", storage->device());
  TORCH_CHECK(storage->resizable(),
              "cudadev: trying to resize storage that is not resizable (it wraps memory "
              "cudadev does not own, e.g. from from_blob); copy the tensor first.");
  const c10::DeviceIndex idx = resolve_device_index(storage->device().index());
  ScopedDevice on(idx);  // the allocator allocates on the current device

  c10::DataPtr fresh = allocator().allocate(new_nbytes);
  const size_t keep = std::min(storage->nbytes(), new_nbytes);
  if (keep > 0 && storage->data() != nullptr) {
    const c10::Stream stream = current_stream(idx);
    CUDADEV_CHECK(cudaMemcpyAsync(fresh.get(), storage->data(), keep, cudaMemcpyDeviceToDevice,
                                  native_stream(stream)));
    allocator().recordStream(storage->data_ptr(), stream);
  }
  storage->set_data_ptr_noswap(std::move(fresh));
  storage->set_nbytes(new_nbytes);
}

void ensure_storage_bytes(c10::StorageImpl* storage, size_t min_nbytes) {
  if (storage->nbytes() < min_nbytes) {
    resize_storage_bytes(storage, min_nbytes);
  }
}

}  // namespace cudadev
