#include "launch/kernel_runtimes.h"

#include <string>

#include "devbridge/error.h"
#include "launch/adapter_error.h"

namespace devbridge {
namespace launch {

std::string& AdapterLastError() noexcept {
  thread_local std::string message;
  return message;
}

DevbridgeKernelRuntime MakeKernelRuntime(const char* name, void* self, decltype(DevbridgeKernelRuntime::load) load,
                                         decltype(DevbridgeKernelRuntime::unload) unload,
                                         decltype(DevbridgeKernelRuntime::launch) launch,
                                         decltype(DevbridgeKernelRuntime::pointer_device) pointer_device,
                                         decltype(DevbridgeKernelRuntime::get_last_error) get_last_error,
                                         decltype(DevbridgeKernelRuntime::device_properties) device_properties) {
  DevbridgeKernelRuntime t{};
  t.major = DEVBRIDGE_LAUNCH_API_MAJOR;
  t.minor = DEVBRIDGE_LAUNCH_API_MINOR;
  t.size = sizeof(DevbridgeKernelRuntime);
  t.name = name;
  t.self = self;
  t.load = load;
  t.unload = unload;
  t.launch = launch;
  t.pointer_device = pointer_device;
  t.get_last_error = get_last_error;
  t.device_properties = device_properties;
  return t;
}

void ValidateKernelRuntime(const DevbridgeKernelRuntime* runtime) {
  if (runtime == nullptr) throw Error(ErrorKind::kValue, "devbridge: the kernel runtime table is NULL");
  if (runtime->major != DEVBRIDGE_LAUNCH_API_MAJOR) {
    throw Error(ErrorKind::kValue,
                "devbridge: the kernel runtime table has major version " + std::to_string(runtime->major) +
                    ", this devbridge speaks " + std::to_string(DEVBRIDGE_LAUNCH_API_MAJOR) +
                    "; rebuild the plugin against this devbridge's c_launch_api.h");
  }
  if (runtime->size < sizeof(DevbridgeKernelRuntime)) {  // 1.0 is the smallest table
    throw Error(ErrorKind::kValue, "devbridge: the kernel runtime table's size field (" +
                                       std::to_string(runtime->size) + ") is smaller than its version's (" +
                                       std::to_string(sizeof(DevbridgeKernelRuntime)) + ")");
  }
  const char* missing = runtime->load == nullptr     ? "load"
                        : runtime->unload == nullptr ? "unload"
                        : runtime->launch == nullptr ? "launch"
                        : runtime->get_last_error == nullptr ? "get_last_error"
                        : runtime->device_properties == nullptr ? "device_properties"
                                                                : nullptr;
  if (missing != nullptr) {
    throw Error(ErrorKind::kValue, std::string("devbridge: the kernel runtime table '") +
                                       (runtime->name ? runtime->name : "<unnamed>") + "' has no " +
                                       missing + " function; only pointer_device may be NULL");
  }
}

void CheckRuntimeStatus(const DevbridgeKernelRuntime& runtime, int status, const char* what) {
  if (status == 0) return;
  const char* message = runtime.get_last_error(runtime.self);
  throw Error(ErrorKind::kRuntime, std::string("devbridge: ") + what + " failed on the " +
                                       (runtime.name ? runtime.name : "<unnamed>") +
                                       " kernel runtime: " + (message && *message ? message : "no message"));
}

}  // namespace launch
}  // namespace devbridge
