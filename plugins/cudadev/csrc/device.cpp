#include "device.h"

#include <algorithm>

#include <cuda_runtime_api.h>

#include "cuda_check.h"

namespace cudadev {

c10::DeviceIndex device_count() noexcept {
  // Counted once: CUDA cannot gain or lose visible devices in a process.
  static const c10::DeviceIndex count = []() noexcept {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      return c10::DeviceIndex{0};
    }
    return static_cast<c10::DeviceIndex>(std::min<int>(n, kMaxDevices));
  }();
  return count;
}

void check_device_index(c10::DeviceIndex idx) {
  const c10::DeviceIndex n = device_count();
  TORCH_CHECK(n > 0,
              "cudadev: no CUDA GPU is visible to this process, so there is no "
              "cudadev device. cudadev needs a CUDA GPU (check nvidia-smi and "
              "CUDA_VISIBLE_DEVICES).");
  TORCH_CHECK(idx >= 0 && idx < n, "cudadev: device index ", static_cast<int>(idx),
              " is out of range; this process sees ", static_cast<int>(n),
              " cudadev device(s), cudadev:0 to cudadev:", static_cast<int>(n - 1),
              " (one per visible CUDA GPU).");
}

c10::DeviceIndex resolve_device_index(c10::DeviceIndex idx) {
  if (idx < 0) {
    idx = current_device();
  }
  check_device_index(idx);
  return idx;
}

c10::DeviceIndex current_device() {
  int idx = 0;
  CUDADEV_CHECK(cudaGetDevice(&idx));
  return static_cast<c10::DeviceIndex>(idx);
}

void set_device(c10::DeviceIndex idx) {
  check_device_index(idx);
  int now = -1;
  // Skipping a redundant cudaSetDevice avoids creating a context on a device
  // the thread never uses.
  if (cudaGetDevice(&now) == cudaSuccess && now == idx) {
    return;
  }
  (void)cudaGetLastError();
  CUDADEV_CHECK(cudaSetDevice(idx));
}

int exchange_device_noexcept(int idx) noexcept {
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) {
    (void)cudaGetLastError();
    previous = -1;
  }
  if (previous != idx && cudaSetDevice(idx) != cudaSuccess) {
    (void)cudaGetLastError();
  }
  return previous;
}

bool is_pinned_host_pointer(const void* ptr) noexcept {
  if (ptr == nullptr) {
    return false;
  }
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

ScopedDevice::ScopedDevice(c10::DeviceIndex idx) : previous_(current_device()), changed_(false) {
  if (previous_ != idx) {
    set_device(idx);
    changed_ = true;
  }
}

ScopedDevice::~ScopedDevice() {
  if (changed_ && cudaSetDevice(previous_) != cudaSuccess) {
    (void)cudaGetLastError();
  }
}

}  // namespace cudadev
