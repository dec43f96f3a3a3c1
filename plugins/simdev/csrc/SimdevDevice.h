// simdev devices as c10 sees them: the count, index validation and the
// calling thread's current device (kept by the runtime, per host thread).
#pragma once

#include <c10/core/Device.h>

namespace torch_simdev {

// Number of simdev devices (SIMDEV_DEVICE_COUNT); 0 if the runtime cannot
// start (its error is raised by the next call that needs a device).
c10::DeviceIndex deviceCount() noexcept;

// Raises a clear error unless 0 <= index < deviceCount().
void checkDeviceIndex(c10::DeviceIndex index);

// The calling thread's current simdev device.
c10::DeviceIndex currentDevice();
void setCurrentDevice(c10::DeviceIndex index);

// `index`, or the current device when `index` is -1 (c10's "no index");
// validated.
c10::DeviceIndex resolveDeviceIndex(c10::DeviceIndex index);

// The c10 device of simdev device `index`.
inline c10::Device simdevDevice(c10::DeviceIndex index) {
  return c10::Device(c10::DeviceType::PrivateUse1, index);
}

}  // namespace torch_simdev
