#include "ops/StorageResize.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <memory>

#include "SimdevCheck.h"
#include "SimdevStream.h"
#include "ops/HostWork.h"

namespace torch_simdev {

void resizeStorageBytes(const c10::Storage& storage, size_t nbytes) {
  TORCH_CHECK(storage.resizable(),
              "trying to resize a simdev storage that is not resizable (it wraps memory "
              "the allocator does not own); copy the tensor with .clone() first");
  const c10::Device device = storage.device();
  c10::DeviceGuard guard(device);
  const size_t old_nbytes = storage.nbytes();
  c10::DataPtr fresh = storage.allocator()->allocate(nbytes);
  const size_t keep = std::min(old_nbytes, nbytes);
  const sdStream_t stream = currentNativeStream(device.index());
  if (keep > 0) {
    SIMDEV_CHECK(sdMemcpyAsync(fresh.get(), storage.data(), keep, sdMemcpyDeviceToDevice, stream));
  }
  auto old = std::make_shared<c10::DataPtr>(storage.set_data_ptr(std::move(fresh)));
  storage.set_nbytes(nbytes);
  if (old->get() != nullptr) {
    // Freed only after the copy above (and all earlier work on this stream) ran.
    enqueueHostWork(stream, "resize (release old storage)", [old] {});
  }
}

void ensureStorageBytes(const c10::Storage& storage, size_t nbytes) {
  if (nbytes > storage.nbytes()) resizeStorageBytes(storage, nbytes);
}

void setSizesAndStrides(const at::Tensor& tensor, at::IntArrayRef sizes, at::IntArrayRef strides) {
  c10::TensorImpl* impl = tensor.unsafeGetTensorImpl();
  impl->set_sizes_and_strides(sizes, strides);
  if (tensor.numel() == 0) return;  // an empty tensor needs no bytes, whatever its offset
  ensureStorageBytes(tensor.storage(), at::detail::computeStorageNbytes(sizes, strides, tensor.itemsize(),
                                                                        tensor.storage_offset()));
}

void resizeTensor(const at::Tensor& tensor, at::IntArrayRef sizes,
                  std::optional<c10::MemoryFormat> memory_format) {
  for (int64_t size : sizes) {
    TORCH_CHECK(size >= 0, "resize_: sizes must be non-negative, got ", sizes);
  }
  c10::TensorImpl* impl = tensor.unsafeGetTensorImpl();
  if (impl->sizes() != sizes) impl->set_sizes_contiguous(sizes);
  if (memory_format.has_value()) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve,
                "resize_: unsupported memory format Preserve; pass a concrete one");
    impl->empty_tensor_restride(*memory_format);
  }
  if (tensor.numel() == 0) return;
  ensureStorageBytes(tensor.storage(), at::detail::computeStorageNbytes(tensor.sizes(), tensor.strides(),
                                                                        tensor.itemsize(),
                                                                        tensor.storage_offset()));
}

}  // namespace torch_simdev
