#pragma once
// cudadev devices are the process's visible CUDA GPUs, one to one: cudadev:i
// is CUDA device i. The current device is CUDA's per-thread current device,
// shared with torch.cuda on purpose: it is the same hardware, and a separate
// notion would make every CUDA call inside cudadev need a device switch.

#include <c10/core/Device.h>

namespace cudadev {

// Upper bound on devices the per-device tables hold (DeviceIndex is int8).
constexpr c10::DeviceIndex kMaxDevices = 64;

// Visible CUDA GPUs (CUDA_VISIBLE_DEVICES applies); 0 when there is no driver
// or no GPU. Never throws: c10's deviceCount() must not.
c10::DeviceIndex device_count() noexcept;

// Raises an error naming the valid range when idx is not a cudadev device.
void check_device_index(c10::DeviceIndex idx);

// -1 (no index given) means the current device; the result is checked.
c10::DeviceIndex resolve_device_index(c10::DeviceIndex idx);

c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex idx);

// Sets the current device without throwing; returns the previous device, or
// -1 when it cannot be read. For destructors and deleters.
int exchange_device_noexcept(int idx) noexcept;

// True when ptr is page-locked host memory that CUDA knows about (so an
// asynchronous copy to or from it really is asynchronous).
bool is_pinned_host_pointer(const void* ptr) noexcept;

// Makes idx the current device for the scope, restoring the previous one.
class ScopedDevice {
 public:
  explicit ScopedDevice(c10::DeviceIndex idx);
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_;
  bool changed_;
};

}  // namespace cudadev
