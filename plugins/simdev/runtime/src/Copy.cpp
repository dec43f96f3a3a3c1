// Stream-ordered memory operations: copies and memset. Pointers are checked
// when the operation is queued, so a bad pointer fails at the call that
// passed it, not later on a worker.
#include <cstring>

#include "Error.h"
#include "Memory.h"
#include "Stream.h"

namespace simdev {
namespace {

void requireHostPointer(const void* ptr, const char* role) {
  if (ptr == nullptr) throw error(sdErrorInvalidValue, role, " is NULL");
}

void enqueueCopy(void* dst, const void* src, size_t size, sdMemcpyKind kind, Stream& stream) {
  const int device = stream.device();
  switch (kind) {
    case sdMemcpyHostToDevice:
      if (size == 0) return;
      requireDeviceRange(dst, size, device, "destination");
      requireHostPointer(src, "source (host)");
      break;
    case sdMemcpyDeviceToHost:
      if (size == 0) return;
      requireHostPointer(dst, "destination (host)");
      requireDeviceRange(src, size, device, "source");
      break;
    case sdMemcpyDeviceToDevice:  // either side may be on any device
      if (size == 0) return;
      requireDeviceRange(dst, size, -1, "destination");
      requireDeviceRange(src, size, -1, "source");
      break;
    case sdMemcpyHostToHost:
      if (size == 0) return;
      requireHostPointer(dst, "destination (host)");
      requireHostPointer(src, "source (host)");
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

using simdev::apiCall;
using simdev::error;

extern "C" {

SIMDEV_API sdError_t sdMemcpyAsync(void* dst, const void* src, size_t size, sdMemcpyKind kind,
                                   sdStream_t stream) {
  return apiCall("sdMemcpyAsync", [&] { simdev::enqueueCopy(dst, src, size, kind, *simdev::findStream(stream)); });
}

SIMDEV_API sdError_t sdMemcpy(void* dst, const void* src, size_t size, sdMemcpyKind kind, sdStream_t stream) {
  return apiCall("sdMemcpy", [&] {
    auto s = simdev::findStream(stream);
    if (s->onWorkerThread()) {
      throw error(sdErrorDeadlock, "called from a host function or kernel running on ", s->describe(),
                  " itself; a blocking copy would wait for itself forever, use sdMemcpyAsync");
    }
    s->refuseIfCapturing("sdMemcpy (a copy that waits for its stream)");
    simdev::enqueueCopy(dst, src, size, kind, *s);
    s->synchronize();
    s->reportFailure();
  });
}

SIMDEV_API sdError_t sdMemsetAsync(void* dst, int value, size_t size, sdStream_t stream) {
  return apiCall("sdMemsetAsync", [&] {
    auto s = simdev::findStream(stream);
    if (size == 0) return;
    simdev::requireDeviceRange(dst, size, s->device(), "destination");
    s->enqueue({true, [dst, value, size]() -> std::string {
                  std::memset(dst, value, size);
                  return {};
                }});
  });
}

}  // extern "C"
