// Devices: the count, the calling thread's current device, device-wide sync.
#include <vector>

#include "Config.h"
#include "Error.h"
#include "Stream.h"

namespace simdev {
namespace {
// Per host thread, like CUDA's current device; every thread starts on 0.
thread_local int current_device = 0;
}  // namespace
}  // namespace simdev

using simdev::apiCall;
using simdev::error;

extern "C" {

SIMDEV_API sdError_t sdGetDeviceCount(int* out_count) {
  return apiCall("sdGetDeviceCount", [&] {
    simdev::requireOutput(out_count, "out_count");
    *out_count = simdev::config().device_count;
  });
}

SIMDEV_API sdError_t sdSetDevice(int device) {
  return apiCall("sdSetDevice", [&] {
    simdev::requireDevice(device);
    simdev::current_device = device;
  });
}

SIMDEV_API sdError_t sdGetDevice(int* out_device) {
  return apiCall("sdGetDevice", [&] {
    simdev::requireOutput(out_device, "out_device");
    simdev::config();  // a malformed environment fails here too, not silently
    *out_device = simdev::current_device;
  });
}

SIMDEV_API sdError_t sdDeviceSynchronize(int device) {
  return apiCall("sdDeviceSynchronize", [&] {
    simdev::requireDevice(device);
    const auto streams = simdev::streamsOfDevice(device);
    for (const auto& stream : streams) {
      if (stream->onWorkerThread()) {
        throw error(sdErrorDeadlock, "called from a host function or kernel running on ", stream->describe(),
                    ", which belongs to device ", device, "; it would wait for itself forever");
      }
    }
    for (const auto& stream : streams) stream->refuseIfCapturing("sdDeviceSynchronize");
    for (const auto& stream : streams) stream->synchronize();
    // Report the first failure; the other streams keep theirs for their own sync.
    for (const auto& stream : streams) stream->reportFailure();
  });
}

}  // extern "C"
