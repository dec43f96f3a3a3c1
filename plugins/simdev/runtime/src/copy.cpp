// Stream-ordered memory operations: copies and memset. Pointers are checked
// when the operation is queued, so a bad pointer fails at the call that
// passed it, not later on a worker.
#include <cstring>

#include "error.h"
#include "memory.h"
#include "stream.h"

namespace simdev {
namespace {

void require_host_pointer(const void* ptr, const char* role) {
  if (ptr == nullptr) throw error(sdErrorInvalidValue, role, " is NULL");
}

void enqueue_copy(void* dst, const void* src, size_t size, sdMemcpyKind kind, Stream& stream) {
  const int device = stream.device();
  switch (kind) {
    case sdMemcpyHostToDevice:
      if (size == 0) return;
      require_device_range(dst, size, device, "destination");
      require_host_pointer(src, "source (host)");
      break;
    case sdMemcpyDeviceToHost:
      if (size == 0) return;
      require_host_pointer(dst, "destination (host)");
      require_device_range(src, size, device, "source");
      break;
    case sdMemcpyDeviceToDevice:  // either side may be on any device
      if (size == 0) return;
      require_device_range(dst, size, -1, "destination");
      require_device_range(src, size, -1, "source");
      break;
    case sdMemcpyHostToHost:
      if (size == 0) return;
      require_host_pointer(dst, "destination (host)");
      require_host_pointer(src, "source (host)");
      break;
    default:
      throw error(sdErrorInvalidValue, "kind ", static_cast<int>(kind),
                  " is not an sdMemcpyKind; use sdMemcpyHostToDevice, DeviceToHost, DeviceToDevice or HostToHost");
  }
  // memmove: a device-to-device copy within one allocation may overlap.
  stream.enqueue({true, [dst, src, size]() -> std::string {
                    std::memmove(dst, src, size);
                    return {};
                  }});
}

}  // namespace
}  // namespace simdev

using simdev::api_call;
using simdev::error;

extern "C" {

SIMDEV_API sdError_t sdMemcpyAsync(void* dst, const void* src, size_t size, sdMemcpyKind kind,
                                   sdStream_t stream) {
  return api_call("sdMemcpyAsync", [&] { simdev::enqueue_copy(dst, src, size, kind, *simdev::find_stream(stream)); });
}

SIMDEV_API sdError_t sdMemcpy(void* dst, const void* src, size_t size, sdMemcpyKind kind, sdStream_t stream) {
  return api_call("sdMemcpy", [&] {
    auto s = simdev::find_stream(stream);
    if (s->on_worker_thread()) {
      throw error(sdErrorDeadlock, "called from a host function or kernel running on ", s->describe(),
                  " itself; a blocking copy would wait for itself forever, use sdMemcpyAsync");
    }
    s->refuse_if_capturing("sdMemcpy (a copy that waits for its stream)");
    simdev::enqueue_copy(dst, src, size, kind, *s);
    s->synchronize();
    s->report_failure();
  });
}

SIMDEV_API sdError_t sdMemsetAsync(void* dst, int value, size_t size, sdStream_t stream) {
  return api_call("sdMemsetAsync", [&] {
    auto s = simdev::find_stream(stream);
    if (size == 0) return;
    simdev::require_device_range(dst, size, s->device(), "destination");
    s->enqueue({true, [dst, value, size]() -> std::string {
                  std::memset(dst, value, size);
                  return {};
                }});
  });
}

}  // extern "C"
