#include "launch/kernel_runtimes.h"

#include <cstddef>
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
  t.layouts = 1u << kDevbridgeLayoutTriton;
  return t;
}

namespace {
// Whether a table's producer knew the minor-1 fields (its size covers them).
bool HasMinor1(const DevbridgeKernelRuntime& runtime) noexcept {
  return runtime.minor >= 1 && runtime.size >= offsetof(DevbridgeKernelRuntime, hardware_sync_address) +
                                                   sizeof(runtime.hardware_sync_address);
}
}  // namespace

void FillInterpretedDeviceProperties(DevbridgeDeviceProperties* out) noexcept {
  out->arch = 0;
  out->warp_size = 32;
  out->multiprocessor_count = 1;
  out->max_shared_mem = 1 << 30;
  out->max_num_regs = 1 << 30;
  out->max_threads_per_block = 1 << 30;
}

uint32_t RuntimeLayouts(const DevbridgeKernelRuntime& runtime) noexcept {
  const uint32_t layouts = HasMinor1(runtime) ? runtime.layouts : 0u;
  return layouts == 0 ? (1u << kDevbridgeLayoutTriton) : layouts;
}

decltype(DevbridgeKernelRuntime::fill_async) RuntimeFillAsync(const DevbridgeKernelRuntime& runtime) noexcept {
  return HasMinor1(runtime) ? runtime.fill_async : nullptr;
}

decltype(DevbridgeKernelRuntime::hardware_sync_address) RuntimeHardwareSyncAddress(
    const DevbridgeKernelRuntime& runtime) noexcept {
  return HasMinor1(runtime) ? runtime.hardware_sync_address : nullptr;
}

void ValidateKernelRuntime(const DevbridgeKernelRuntime* runtime) {
  if (runtime == nullptr) throw Error(ErrorKind::kValue, "devbridge: the kernel runtime table is NULL");
  if (runtime->major != DEVBRIDGE_LAUNCH_API_MAJOR) {
    throw Error(ErrorKind::kValue,
                "devbridge: the kernel runtime table has major version " + std::to_string(runtime->major) +
                    ", this devbridge speaks " + std::to_string(DEVBRIDGE_LAUNCH_API_MAJOR) +
                    "; rebuild the plugin against this devbridge's c_launch_api.h");
  }
  // 1.0 ends with device_properties: the smallest table accepted.
  constexpr size_t kMinor0Size =
      offsetof(DevbridgeKernelRuntime, device_properties) + sizeof(DevbridgeKernelRuntime::device_properties);
  const size_t expected = runtime->minor >= 1 ? sizeof(DevbridgeKernelRuntime) : kMinor0Size;
  if (runtime->size < expected) {
    throw Error(ErrorKind::kValue, "devbridge: the kernel runtime table's size field (" +
                                       std::to_string(runtime->size) + ") is smaller than its version's (" +
                                       std::to_string(expected) + ")");
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
