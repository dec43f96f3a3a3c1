// The operators cudadev implements itself: making tensors, views over them,
// resizing and re-pointing them, record_stream. These decide which memory a
// tensor has, so they cannot go through CUDA kernels (fallback.cpp); copies
// are in copy.cpp.

#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <typeinfo>

#include "allocator.h"
#include "argument_devices.h"
#include "device.h"
#include "storage_resize.h"

namespace cudadev {
namespace {

constexpr auto kCudadev = c10::DeviceType::PrivateUse1;

c10::DeviceIndex device_index_of(const std::optional<c10::Device>& device) {
  if (!device.has_value()) {
    return resolve_device_index(-1);
  }
  TORCH_CHECK(device->type() == kCudadev, "cudadev: asked to create a tensor on ", *device,
              " through cudadev's factory");
  return resolve_device_index(device->index());
}

void check_factory_options(const std::optional<c10::Layout>& layout,
                           const std::optional<bool>& pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::kStrided,
              "cudadev: only strided tensors are supported, got layout ", *layout);
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory),
              "cudadev: pin_memory applies to CPU tensors only; create the tensor on the CPU "
              "with pin_memory=True and copy it with .to('cudadev', non_blocking=True).");
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout,
                               std::optional<c10::Device> device, std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  check_factory_options(layout, pin_memory);
  ScopedDevice on(device_index_of(device));  // the allocator allocates on the current device
  return at::detail::empty_generic(size, &allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  check_factory_options(layout, pin_memory);
  ScopedDevice on(device_index_of(device));
  return at::detail::empty_strided_generic(size, stride, &allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

// Views only change geometry over the same storage; ATen's device-generic
// implementations do exactly that.
at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) {
  return at::native::view(self, size);
}

at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

// Same semantics as torch.cuda's resize_: new geometry first, then grow the
// storage if it is too small (contents kept, new bytes uninitialised).
const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  if (!impl->sizes().equals(size)) {
    impl->set_sizes_contiguous(size);
    ensure_storage_bytes(impl->unsafe_storage().unsafeGetStorageImpl(),
                         at::detail::computeStorageNbytesContiguous(
                             size, self.dtype().itemsize(), impl->storage_offset()));
  }
  if (memory_format.has_value()) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve,
                "cudadev: resize_ does not support memory format ", *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_storage_offset(at::Tensor& self, c10::Storage source, int64_t storage_offset,
                               c10::IntArrayRef size, c10::IntArrayRef stride) {
  // checkSetStorage would refuse a storage of another device too, but
  // without naming the argument.
  TORCH_CHECK(source.device() == self.device(), "cudadev: aten::set_ got source on ",
              source.device(), " and self on ", self.device(),
              "; a tensor's storage must be on its own device. Move the data there first: .to('",
              self.device(), "').");
  // Checks geometry and device, and points self at `source`.
  at::native::checkSetStorage(self, source, storage_offset, size, stride);
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_storage_offset(storage_offset);
  const size_t itemsize = self.dtype().itemsize();
  size_t needed = 0;
  if (stride.data() != nullptr) {
    impl->set_sizes_and_strides(size, stride);
    needed = at::detail::computeStorageNbytes(size, stride, itemsize, storage_offset);
  } else {
    impl->set_sizes_contiguous(size);
    needed = at::detail::computeStorageNbytesContiguous(size, itemsize, storage_offset);
  }
  ensure_storage_bytes(impl->unsafe_storage().unsafeGetStorageImpl(), needed);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source) {
  const size_t itemsize = self.dtype().itemsize();
  TORCH_CHECK(source.nbytes() % itemsize == 0, "cudadev: set_ got a storage of ",
              source.nbytes(), " bytes, not a multiple of the element size ", itemsize, " of ",
              self.dtype());
  const auto numel = static_cast<int64_t>(source.nbytes() / itemsize);
  return self.set_(std::move(source), 0, {numel}, {});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  // Routed here when either is a cudadev tensor; checkSetStorage would refuse
  // a mix too, but without naming the argument.
  common_cudadev_device("aten::set_.source_Tensor", {{"self", &self}, {"source", &source}});
  if (self.unsafeGetTensorImpl() == source.unsafeGetTensorImpl()) {
    return self;
  }
  return self.set_(source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  ScopedDevice on(resolve_device_index(self.device().index()));
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, &allocator(), /*resizable=*/true);
  return self.set_(std::move(empty), 0, {0}, {});
}

void record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kCudadev,
              "cudadev: record_stream of a cudadev tensor needs a cudadev stream, got a stream "
              "of device type ", stream.device_type());
  allocator().recordStream(self.storage().data_ptr(), stream);
}

// Whether `param.data = other` may move one of these tensors into the other's
// TensorImpl (aten::_has_compatible_shallow_copy_type, which
// torch.nn.Module.to() asks for every parameter). torch's own answer
// (c10/core/TensorImpl.h, has_compatible_shallow_copy_type) knows dense CPU,
// CUDA and a few others but not PrivateUse1, whose plugin is to give its own.
// Answered no, Module.to("cudadev") wraps each moved parameter in a new
// Parameter object, module by module, so a parameter two modules share (a
// language model's tied embedding and output weights) becomes two: another
// model, with twice the optimizer work for that weight. cudadev tensors are
// plain dense TensorImpls, as CPU and CUDA ones are.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  const auto plain_dense = [](const at::Tensor& tensor) {
    const c10::DeviceType type = tensor.device().type();
    return typeid(*tensor.unsafeGetTensorImpl()) == typeid(c10::TensorImpl) &&
           tensor.layout() == c10::kStrided &&
           (type == kCudadev || type == c10::DeviceType::CPU || type == c10::DeviceType::CUDA);
  };
  return plain_dense(self) && plain_dense(from);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage_offset));
  m.impl("set_.source_Storage", TORCH_FN(set_storage));
  m.impl("set_.source_Tensor", TORCH_FN(set_tensor));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("record_stream", TORCH_FN(record_stream));
}

}  // namespace cudadev
