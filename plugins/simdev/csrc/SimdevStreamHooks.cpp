#include "SimdevStreamHooks.h"

#include "SimdevStream.h"

namespace torch_simdev {

int currentStreamQuery(int32_t device, void** out_stream) noexcept {
  // devbridge passes only indices it checked; the bound still keeps a buggy
  // caller from meaning "the current device" (-1) or reading past the table.
  if (device < 0 || device >= kMaxDevices) return -1;
  try {
    *out_stream = currentNativeStream(static_cast<c10::DeviceIndex>(device));
    return 0;
  } catch (...) {
    return -1;
  }
}

int externalStreamHook(int32_t device, void* stream, int64_t* out_stream_id) noexcept {
  if (device < 0 || device >= kMaxDevices) return -1;
  c10::StreamId id = 0;
  if (!streamIdOf(static_cast<c10::DeviceIndex>(device), static_cast<sdStream_t>(stream), &id)) return -1;
  *out_stream_id = id;
  return 0;
}

int streamResolver(int32_t device, int64_t stream_id, void** out_stream) noexcept {
  if (device < 0 || device >= kMaxDevices) return -1;
  try {
    const c10::Device simdev(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device));
    *out_stream = nativeStream(c10::Stream(c10::Stream::UNSAFE, simdev, stream_id));
    return 0;
  } catch (...) {
    return -1;
  }
}

}  // namespace torch_simdev
