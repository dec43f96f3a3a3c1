#include "SimdevDevice.h"

#include "SimdevCheck.h"

namespace torch_simdev {

c10::DeviceIndex deviceCount() noexcept {
  // The runtime reads SIMDEV_DEVICE_COUNT once, so the answer never changes.
  static const c10::DeviceIndex count = [] {
    int n = 0;
    if (sdGetDeviceCount(&n) != sdSuccess) return c10::DeviceIndex{0};
    return static_cast<c10::DeviceIndex>(n);
  }();
  return count;
}

void checkDeviceIndex(c10::DeviceIndex index) {
  const c10::DeviceIndex count = deviceCount();
  if (count == 0) {
    int ignored = 0;
    SIMDEV_CHECK(sdGetDeviceCount(&ignored));  // reports why the runtime has no devices
  }
  TORCH_CHECK(index >= 0 && index < count, "simdev:", static_cast<int>(index),
              " is not a valid device: this process has ", static_cast<int>(count),
              " simdev device", count == 1 ? "" : "s", " (simdev:0 .. simdev:",
              static_cast<int>(count - 1),
              "). Use one of those, or start the process with SIMDEV_DEVICE_COUNT set "
              "to the number of devices you need.");
}

c10::DeviceIndex currentDevice() {
  int device = 0;
  SIMDEV_CHECK(sdGetDevice(&device));
  return static_cast<c10::DeviceIndex>(device);
}

void setCurrentDevice(c10::DeviceIndex index) {
  checkDeviceIndex(index);
  SIMDEV_CHECK(sdSetDevice(index));
}

c10::DeviceIndex resolveDeviceIndex(c10::DeviceIndex index) {
  if (index == -1) return currentDevice();
  checkDeviceIndex(index);
  return index;
}

}  // namespace torch_simdev
