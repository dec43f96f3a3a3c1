// Creating simdev tensors and changing their metadata: the minimal operator
// set every PrivateUse1 backend needs (allocation, views, resize_, set_,
// item()). None of these queue work except when a storage has to grow.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <typeinfo>

#include "SimdevAllocator.h"
#include "SimdevDevice.h"
#include "ops/ArgumentDevices.h"
#include "ops/StorageResize.h"

namespace torch_simdev {
namespace {

constexpr c10::DispatchKeySet kSimdevKeys{c10::DispatchKey::PrivateUse1};

// The simdev device a factory call targets; validates the index (simdev:7 on
// a two-device process gets a clear error here, before anything allocates).
c10::Device targetDevice(std::optional<c10::Device> device) {
  const c10::DeviceIndex index = resolveDeviceIndex(device.has_value() ? device->index() : -1);
  return c10::Device(c10::DeviceType::PrivateUse1, index);
}

void checkFactoryOptions(std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(!layout.has_value() || *layout == c10::Layout::Strided,
              "simdev supports only strided (dense) tensors, got layout ", *layout);
  TORCH_CHECK(!pin_memory.value_or(false),
              "pin_memory=True applies to CPU tensors copied to a device, not to simdev tensors; drop it");
}

at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  checkFactoryOptions(layout, pin_memory);
  const c10::Device target = targetDevice(device);
  c10::DeviceGuard guard(target);  // the allocator serves the current device
  return at::detail::empty_generic(size, &allocator(), kSimdevKeys,
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  checkFactoryOptions(layout, pin_memory);
  const c10::Device target = targetDevice(device);
  c10::DeviceGuard guard(target);
  return at::detail::empty_strided_generic(size, stride, &allocator(), kSimdevKeys,
                                           c10::dtype_or_default(dtype));
}

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  resizeTensor(self, size, memory_format);
  return self;
}

// set_ to a storage (`op` names the overload in errors), which must be on
// self's device, as ATen's checkSetStorage requires of every backend.
at::Tensor& setStorage(const char* op, at::Tensor& self, c10::Storage source, int64_t storage_offset,
                       at::IntArrayRef size, at::IntArrayRef stride) {
  checkStorageDevice(op, self, source);
  // An omitted stride (the schema's default []) means contiguous.
  if (stride.empty()) stride = at::IntArrayRef();
  at::native::checkSetStorage(self, source, storage_offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(storage_offset);
  if (stride.data() != nullptr) {
    setSizesAndStrides(self, size, stride);
  } else {
    resizeTensor(self, size, std::nullopt);
  }
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t storage_offset, at::IntArrayRef size,
                        at::IntArrayRef stride) {
  return setStorage("aten::set_.source_Storage_storage_offset", self, std::move(source), storage_offset, size,
                    stride);
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  const int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return setStorage("aten::set_.source_Storage", self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  // Routed here when either is a simdev tensor: a CPU self with a simdev
  // source too, which CUDA refuses as well.
  commonSimdevDevice("aten::set_.source_Tensor", {{"self", &self, /*written=*/true}, {"source", &source}},
                     CpuScalars::kRefused);
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "set_: expected a source of dtype ",
              self.scalar_type(), " like the tensor being set, got ", source.scalar_type(),
              "; convert it with .to(dtype) first");
  if (self.is_same(source)) return self;
  return setStorage("aten::set_.source_Tensor", self, source.storage(), source.storage_offset(), source.sizes(),
                    source.strides());
}

// set_() with no source: an empty tensor with a fresh, empty storage.
at::Tensor& set_empty(at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, &allocator(), /*resizable=*/true);
  return setStorage("aten::set_", self, std::move(empty), 0, {0}, {});
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  // A synchronous device-to-host copy of the one element (waits for the
  // work that produces it, like CUDA's .item()).
  at::Tensor host = at::empty(self.sizes(), self.options().device(at::kCPU));
  host.copy_(self, /*non_blocking=*/false);
  return at::_local_scalar_dense(host);
}

// Whether `param.data = other` may move one of these tensors into the other's
// TensorImpl (aten::_has_compatible_shallow_copy_type, which
// torch.nn.Module.to() asks for every parameter). torch's own answer
// (c10/core/TensorImpl.h) knows dense CPU, CUDA and a few others but not
// PrivateUse1, whose plugin is to give its own. Answered no,
// Module.to("simdev") wraps each moved parameter in a new Parameter object,
// module by module, so a parameter two modules share (tied embedding and
// output weights) becomes two. simdev tensors are plain dense TensorImpls.
bool hasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from) {
  const auto plainDense = [](const at::Tensor& tensor) {
    const c10::DeviceType type = tensor.device().type();
    return typeid(*tensor.unsafeGetTensorImpl()) == typeid(c10::TensorImpl) &&
           tensor.layout() == c10::kStrided &&
           (type == c10::DeviceType::PrivateUse1 || type == c10::DeviceType::CPU ||
            type == c10::DeviceType::CUDA);
  };
  return plainDense(self) && plainDense(from);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(hasCompatibleShallowCopyType));
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
}

}  // namespace torch_simdev
