#include "Error.h"

namespace simdev {
namespace {
// Per host thread, like errno: a failure on one thread never clobbers the
// message another thread is about to read.
thread_local std::string last_error;
}  // namespace

sdError_t fail(const char* function, sdError_t code, const char* message) noexcept {
  try {
    last_error.assign(function).append(": ").append(message);
  } catch (...) {
    // Formatting the message itself ran out of memory; keep the code at least.
    last_error.clear();
  }
  return code;
}

}  // namespace simdev

extern "C" {

SIMDEV_API const char* sdGetLastErrorString(void) { return simdev::last_error.c_str(); }

SIMDEV_API const char* sdGetErrorName(sdError_t error) {
  switch (error) {
    case sdSuccess: return "sdSuccess";
    case sdErrorNotReady: return "sdErrorNotReady";
    case sdErrorInvalidValue: return "sdErrorInvalidValue";
    case sdErrorInvalidDevice: return "sdErrorInvalidDevice";
    case sdErrorInvalidDevicePointer: return "sdErrorInvalidDevicePointer";
    case sdErrorMemoryAllocation: return "sdErrorMemoryAllocation";
    case sdErrorInvalidStream: return "sdErrorInvalidStream";
    case sdErrorInvalidEvent: return "sdErrorInvalidEvent";
    case sdErrorTimingDisabled: return "sdErrorTimingDisabled";
    case sdErrorInvalidModule: return "sdErrorInvalidModule";
    case sdErrorNotFound: return "sdErrorNotFound";
    case sdErrorLaunchFailure: return "sdErrorLaunchFailure";
    case sdErrorDeadlock: return "sdErrorDeadlock";
    case sdErrorStreamCaptureUnsupported: return "sdErrorStreamCaptureUnsupported";
    case sdErrorStreamCaptureInvalidated: return "sdErrorStreamCaptureInvalidated";
    case sdErrorInvalidGraph: return "sdErrorInvalidGraph";
    case sdErrorUnknown: return "sdErrorUnknown";
  }
  return "sdErrorUnrecognized";
}

}  // extern "C"
