// Devices: the count, the calling thread's current device, device-wide sync.
#include <vector>

#include "config.h"
#include "error.h"
#include "stream.h"

namespace simdev {
namespace {
// Per host thread, like CUDA's current device; every thread starts on 0.
thread_local int current_device = 0;
}  // namespace
}  // namespace simdev

using simdev::api_call;
using simdev::error;

extern "C" {

SIMDEV_API sdError_t sdGetDeviceCount(int* out_count) {
  return api_call("sdGetDeviceCount", [&] {
    simdev::require_output(out_count, "out_count");
    *out_count = simdev::config().device_count;
  });
}

SIMDEV_API sdError_t sdSetDevice(int device) {
  return api_call("sdSetDevice", [&] {
    simdev::require_device(device);
    simdev::current_device = device;
  });
}

SIMDEV_API sdError_t sdGetDevice(int* out_device) {
  return api_call("sdGetDevice", [&] {
    simdev::require_output(out_device, "out_device");
    simdev::config();  // a malformed environment fails here too, not silently
    *out_device = simdev::current_device;
  });
}

SIMDEV_API sdError_t sdDeviceSynchronize(int device) {
  return api_call("sdDeviceSynchronize", [&] {
    simdev::require_device(device);
    const auto streams = simdev::streams_of_device(device);
    for (const auto& stream : streams) {
      if (stream->on_worker_thread()) {
        throw error(sdErrorDeadlock, "called from a host function or kernel running on ", stream->describe(),
                    ", which belongs to device ", device, "; it would wait for itself forever");
      }
    }
    for (const auto& stream : streams) stream->refuse_if_capturing("sdDeviceSynchronize");
    for (const auto& stream : streams) stream->synchronize();
    // Report the first failure; the other streams keep theirs for their own sync.
    for (const auto& stream : streams) stream->report_failure();
  });
}

}  // extern "C"
