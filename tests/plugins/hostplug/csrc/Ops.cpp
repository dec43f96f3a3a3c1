// The operators a PrivateUse1 backend must implement itself (allocation,
// views, resize, copies to and from the CPU) plus fill_ (the write the
// ordering tests queue); every other operator goes through Fallback.cpp.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cstring>

#include "Ops.h"
#include "Runtime.h"

namespace hostplug {

at::Tensor hostAlias(const at::Tensor& t) {
  if (!isDevice(t)) return t.defined() && t.dim() == 0 ? t.clone() : t;
  const auto options = at::TensorOptions().dtype(t.scalar_type());
  if (t.numel() == 0) return at::empty_strided(t.sizes(), t.strides(), options);
  at::Tensor alias = at::for_blob(t.data_ptr(), t.sizes())
                         .strides(t.strides())
                         .deleter([storage = t.storage()](void*) {})  // the storage lives as long as the alias
                         .options(options)
                         .make_tensor();
  if (t.is_conj()) alias._set_conj(true);
  if (t.is_neg()) alias._set_neg(true);
  return alias;
}

void resizeStorage(const c10::Storage& storage, size_t nbytes) {
  TORCH_CHECK(storage.resizable(), "hostplug: this storage cannot be resized");
  c10::DeviceGuard guard(storage.device());
  auto old = std::make_shared<c10::DataPtr>(storage.set_data_ptr(storage.allocator()->allocate(nbytes)));
  const size_t keep = std::min(storage.nbytes(), nbytes);
  storage.set_nbytes(nbytes);
  void* fresh = storage.mutable_data();
  // Queued after the work that wrote the old block, before any that reads the
  // new one; it holds both blocks until it has run.
  enqueueOperator(storage.device().index(), [old, storage, fresh, keep] {
    if (keep > 0) std::memcpy(fresh, old->get(), keep);
  });
}

void setSizesAndStrides(const at::Tensor& t, at::IntArrayRef sizes, at::IntArrayRef strides) {
  t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides);
  if (t.numel() == 0) return;
  const size_t needed = at::detail::computeStorageNbytes(sizes, strides, t.itemsize(), t.storage_offset());
  if (needed > t.storage().nbytes()) resizeStorage(t.storage(), needed);
}

namespace {

constexpr c10::DispatchKeySet kKeys{c10::DispatchKey::PrivateUse1};

c10::Device targetDevice(std::optional<c10::Device> device) {
  const c10::DeviceIndex index = device.has_value() && device->has_index() ? device->index() : currentDevice();
  checkDevice(index);
  return c10::Device(c10::DeviceType::PrivateUse1, index);
}

at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> /*layout*/, std::optional<c10::Device> device,
                               std::optional<bool> /*pin_memory*/, std::optional<c10::MemoryFormat> memory_format) {
  c10::DeviceGuard guard(targetDevice(device));  // the allocator serves the current device
  return at::detail::empty_generic(size, c10::GetAllocator(c10::DeviceType::PrivateUse1), kKeys,
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> /*layout*/, std::optional<c10::Device> device,
                         std::optional<bool> /*pin_memory*/) {
  c10::DeviceGuard guard(targetDevice(device));
  return at::detail::empty_strided_generic(size, stride, c10::GetAllocator(c10::DeviceType::PrivateUse1), kKeys,
                                           c10::dtype_or_default(dtype));
}

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  at::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (memory_format.has_value() && *memory_format != c10::MemoryFormat::Preserve) {
    impl->empty_tensor_restride(*memory_format);
  }
  setSizesAndStrides(self, self.sizes(), self.strides());  // grows the storage if needed
  return self;
}

// Copies run on the device side's current stream (the destination's between
// two hostplug tensors). Across two devices the destination's stream first
// waits for the source's, and the source's then waits for the copy, so work
// queued later on either side sees it. A copy to or from the CPU waits for the
// stream unless non_blocking (then the CPU tensor must stay untouched until
// the stream has reached the copy, as with CUDA's pinned memory).
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  for (const at::Tensor* t : {&self, &dst}) {
    TORCH_CHECK(isDevice(*t) || t->is_cpu(), "hostplug copies to and from the CPU only, got a ", t->device(),
                " tensor");
  }
  if (dst.numel() == 0) return dst;
  const c10::DeviceIndex device = isDevice(dst) ? dst.device().index() : self.device().index();
  const bool other_device = isDevice(self) && isDevice(dst) && self.device() != dst.device();
  if (other_device) waitForMarker(currentStream(device), recordMarker(currentStream(self.device().index())));
  // A CPU destination is written in place (hostAlias would copy a 0-dim one).
  at::Tensor to = isDevice(dst) ? hostAlias(dst) : dst;
  enqueueOperator(device, [to, from = hostAlias(self)]() mutable { to.copy_(from); });
  if (other_device) waitForMarker(currentStream(self.device().index()), recordMarker(currentStream(device)));
  if (!non_blocking && !(isDevice(self) && isDevice(dst))) currentStream(device).synchronize();
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) {
    if (isDevice(dst)) {
      resize_(dst, self.sizes(), std::nullopt);
    } else {
      dst.resize_(self.sizes());
    }
  }
  return copy_from(self, dst, /*non_blocking=*/false);
}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() > 0) {
    enqueueOperator(self.device().index(), [alias = hostAlias(self), value]() mutable { alias.fill_(value); });
  }
  return self;
}

// Module.to() moves parameters in place only where this says yes; torch's
// built-in answer does not know PrivateUse1 (tied weights would come apart).
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  const auto dense = [](const at::Tensor& t) {
    return t.layout() == at::kStrided && !t.is_quantized() && !t.is_nested() &&
           (t.device().type() == c10::DeviceType::CPU || isDevice(t));
  };
  return dense(self) && dense(from);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("fill_.Scalar", TORCH_FN(fill_scalar));
  // Nothing to record: queued work holds its storages (Memory.cpp).
  m.impl("record_stream", [](at::Tensor&, c10::Stream) {});
}

}  // namespace hostplug
