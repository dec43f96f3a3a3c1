// at::PrivateUse1HooksInterface for simdev: what generic ATen code asks a
// PrivateUse1 backend (is it there, how many devices, which device owns a
// pointer, storage resize, pinned memory, generators).
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>

#include "SimdevCheck.h"
#include "SimdevDevice.h"
#include "ops/StorageResize.h"

namespace torch_simdev {
namespace {

struct SimdevHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return deviceCount() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex /*device_index*/) const override {
    // simdev devices need no initialization: always "initialized".
    return true;
  }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override { return torch_simdev::deviceCount(); }
  void setCurrentDevice(c10::DeviceIndex device) const override { torch_simdev::setCurrentDevice(device); }
  c10::DeviceIndex getCurrentDevice() const override { return currentDevice(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const c10::DeviceIndex previous = currentDevice();
    if (device != previous) torch_simdev::setCurrentDevice(device);
    return previous;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override { return exchangeDevice(device); }

  at::Device getDeviceFromPtr(void* data) const override {
    int device = 0;
    SIMDEV_CHECK(sdPointerGetDevice(data, &device));
    return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device));
  }

  // simdev has no random generator of its own: random operators run through
  // the CPU fallback and draw from the CPU default generator, so
  // torch.manual_seed() seeds them. The "default generator" of every simdev
  // device is therefore that CPU generator.
  const at::Generator& getDefaultGenerator(c10::DeviceIndex /*device_index*/) const override {
    return at::detail::getDefaultCPUGenerator();
  }
  at::Generator getNewGenerator(c10::DeviceIndex /*device_index*/) const override {
    TORCH_CHECK(false,
                "simdev has no device random generator: random operators on simdev tensors use the CPU "
                "default generator (seed it with torch.manual_seed); create a torch.Generator() without "
                "device=\"simdev\" and generate on the CPU, then move the result with .to(\"simdev\")");
  }

  // Host memory is ordinary pageable CPU memory; there is no pinned kind.
  bool isPinnedPtr(const void* /*data*/) const override { return false; }
  c10::Allocator* getPinnedMemoryAllocator() const override { return c10::GetCPUAllocator(); }

  // UntypedStorage.resize_() on a simdev storage.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resizeStorageBytes(storage, newsize);
  }
};

// Registered while the extension loads (static initialization), before
// torch_simdev renames PrivateUse1 to "simdev".
[[maybe_unused]] const bool registered = [] {
  at::RegisterPrivateUse1HooksInterface(new SimdevHooks());
  return true;
}();

}  // namespace
}  // namespace torch_simdev
