// ATen's PrivateUse1 hooks for cudadev: availability, devices, pinned host
// memory, random generators and storage resizing, as ATen and torch's Python
// layer ask for them (lazy init, Tensor.pin_memory(), is_pinned(),
// UntypedStorage.resize_(), torch.Generator(device='cudadev'), ...).

#include <ATen/core/CachingHostAllocator.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>

#include "cuda_check.h"
#include "device.h"
#include "storage_resize.h"

namespace cudadev {
namespace {

class CudadevHooks final : public at::PrivateUse1HooksInterface {
 public:
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }

  // cudadev's random operators run torch's CUDA kernels, which draw from the
  // CUDA generator of the same GPU; handing out that generator keeps
  // torch.manual_seed and explicit generators meaningful for cudadev tensors.
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return at::cuda::detail::getDefaultCUDAGenerator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index = -1) const override {
    return at::cuda::detail::createCUDAGenerator(device_index);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    cudaPointerAttributes attributes{};
    CUDADEV_CHECK(cudaPointerGetAttributes(&attributes, data));
    TORCH_CHECK(attributes.type == cudaMemoryTypeDevice,
                "cudadev: the pointer is not CUDA device memory, so it cannot back a cudadev "
                "tensor; pass device memory, or give from_blob an explicit device.");
    return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(attributes.device));
  }

  // Pinned memory is CUDA's: the same page-locked host memory serves cudadev
  // and torch.cuda copies.
  bool isPinnedPtr(const void* data) const override { return is_pinned_host_pointer(data); }
  at::Allocator* getPinnedMemoryAllocator() const override {
    return at::getHostAllocator(at::kCUDA);
  }

  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    return c10::cuda::hasPrimaryContext(device_index);
  }

  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const c10::DeviceIndex previous = current_device();
    if (device >= 0 && device != previous) {
      set_device(device);
    }
    return previous;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_nbytes) const override {
    resize_storage_bytes(storage.unsafeGetStorageImpl(), new_nbytes);
  }
};

const bool registered = [] {
  // Leaked: ATen keeps the pointer for the life of the process.
  at::RegisterPrivateUse1HooksInterface(new CudadevHooks());
  return true;
}();

}  // namespace
}  // namespace cudadev
