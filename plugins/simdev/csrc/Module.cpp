// torch_simdev._C: Python bindings only. Loading this module registers the
// backend (guard, allocator, hooks, operators) through static initializers
// in the other files; the functions here back the torch.simdev module.
#include <pybind11/pybind11.h>

#include <simdev/runtime.h>

#include <c10/util/Exception.h>
#include <torch/csrc/Exceptions.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include "GilReleased.h"
#include "SimdevAllocator.h"
#include "SimdevCheck.h"
#include "SimdevDevice.h"
#include "SimdevGraph.h"
#include "SimdevGuard.h"
#include "SimdevStream.h"
#include "SimdevStreamHooks.h"
#include "distributed/Bindings.h"
#include "ops/HostWork.h"

namespace py = pybind11;

namespace torch_simdev {
namespace {

py::dict memoryStats(c10::DeviceIndex device) {
  const auto stats = allocator().getDeviceStats(resolveDeviceIndex(device));
  constexpr size_t all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  py::dict out;
  out["allocated_bytes"] = stats.allocated_bytes[all].current;
  out["allocated_bytes_peak"] = stats.allocated_bytes[all].peak;
  out["reserved_bytes"] = stats.reserved_bytes[all].current;
  out["reserved_bytes_peak"] = stats.reserved_bytes[all].peak;
  out["requested_bytes"] = stats.requested_bytes[all].current;
  out["allocations"] = stats.allocation[all].current;
  out["segments"] = stats.segment[all].current;
  out["num_alloc_retries"] = stats.num_alloc_retries;
  out["num_ooms"] = stats.num_ooms;
  out["num_device_alloc"] = stats.num_device_alloc;
  out["num_device_free"] = stats.num_device_free;
  return out;
}

py::tuple memGetInfo(c10::DeviceIndex device) {
  size_t used = 0;
  size_t capacity = 0;
  SIMDEV_CHECK(sdMemGetInfo(resolveDeviceIndex(device), &used, &capacity));
  return py::make_tuple(used, capacity);
}

void synchronize(c10::DeviceIndex device) {
  device = resolveDeviceIndex(device);
  GilReleasedIfHeld no_gil;  // queued work may need it (GilReleased.h)
  SIMDEV_CHECK(sdDeviceSynchronize(device));
}

void setOpDelayUs(int64_t microseconds) {
  TORCH_CHECK(microseconds >= 0 && microseconds <= UINT32_MAX, "op delay must be in [0, ", UINT32_MAX,
              "] microseconds, got ", microseconds);
  SIMDEV_CHECK(sdSetOpDelay(static_cast<uint32_t>(microseconds)));
}

uint32_t getOpDelayUs() {
  uint32_t microseconds = 0;
  SIMDEV_CHECK(sdGetOpDelay(&microseconds));
  return microseconds;
}

uintptr_t currentStreamHandle(c10::DeviceIndex device) {
  return reinterpret_cast<uintptr_t>(currentNativeStream(device));
}

// Test helper: queues host work that keeps the current stream busy for
// `microseconds`, so a test can prove that later calls do not wait for it.
void enqueueSleep(int64_t microseconds, c10::DeviceIndex device) {
  TORCH_CHECK(microseconds >= 0, "sleep duration must be non-negative, got ", microseconds);
  enqueueHostWork(currentNativeStream(device), "_enqueue_sleep",
                  [microseconds] { std::this_thread::sleep_for(std::chrono::microseconds(microseconds)); });
}

// Test helper: queues host work that fails, to exercise error reporting.
void enqueueFailure(const std::string& message, c10::DeviceIndex device) {
  enqueueHostWork(currentNativeStream(device), "_enqueue_failure",
                  [message] { TORCH_CHECK(false, message); });
}

// Fault injection (torch.simdev.inject_fault): "allocation" arms the
// allocator, "kernel" the runtime (kernel grids and operators' host work).
void injectFault(const std::string& kind, int64_t nth) {
  TORCH_CHECK_VALUE(nth >= 0, "simdev: inject_fault's nth must be >= 0 (1: the next one, 0: disarm), got ", nth);
  if (kind == "allocation") {
    allocator().injectAllocationFault(static_cast<uint64_t>(nth));
  } else if (kind == "kernel") {
    SIMDEV_CHECK(sdInjectKernelFault(static_cast<uint64_t>(nth)));
  } else {
    TORCH_CHECK_VALUE(false, "simdev: inject_fault's kind must be 'allocation' or 'kernel', got '", kind, "'");
  }
}

// {"allocation": n, "kernel": n}: the faults injected so far in this process.
py::dict injectedFaults() {
  uint64_t kernel = 0;
  SIMDEV_CHECK(sdGetInjectedKernelFaults(&kernel));
  py::dict counts;
  counts["allocation"] = allocator().injectedAllocationFaults();
  counts["kernel"] = kernel;
  return counts;
}

// The StreamId of a live simdev stream created outside torch (sdStreamCreate).
int64_t externalStreamId(c10::DeviceIndex device, uintptr_t handle) {
  device = resolveDeviceIndex(device);
  c10::StreamId id = 0;
  TORCH_CHECK(streamIdOf(device, reinterpret_cast<sdStream_t>(handle), &id), "simdev: ",
              reinterpret_cast<void*>(handle), " is not a live stream of simdev:", static_cast<int>(device),
              "; pass an sdStream_t of that device (from sdStreamCreate)");
  return id;
}

// A PyCapsule holding a C function pointer under the name devbridge reads.
template <class Fn>
py::capsule functionCapsule(Fn fn, const char* name) {
  return py::capsule(reinterpret_cast<void*>(fn), name);
}

}  // namespace
}  // namespace torch_simdev

PYBIND11_MODULE(_C, m) {
  using namespace torch_simdev;
  m.doc() = "simdev PyTorch backend (PrivateUse1); use it through torch.simdev";

  // c10 errors become the Python exceptions torch's own functions raise:
  // torch.AcceleratorError for a failed runtime call (a device fault among
  // them), torch.OutOfMemoryError, RuntimeError; with the message, the C++
  // backtrace only under TORCH_SHOW_CPP_STACKTRACES=1.
  py::register_local_exception_translator([](std::exception_ptr error) {
    if (error) torch::translate_exception_to_python(error);
  });

  m.attr("runtime_version") = py::make_tuple(SIMDEV_RUNTIME_VERSION_MAJOR, SIMDEV_RUNTIME_VERSION_MINOR);
  m.def("device_count", [] { return static_cast<int>(deviceCount()); });
  m.def("current_device", [] { return static_cast<int>(currentDevice()); });
  m.def("set_device", [](int device) { setCurrentDevice(static_cast<c10::DeviceIndex>(device)); });
  m.def("synchronize", [](int device) { synchronize(static_cast<c10::DeviceIndex>(device)); },
        py::arg("device") = -1);
  m.def("set_op_delay_us", &setOpDelayUs, py::arg("microseconds"));
  m.def("get_op_delay_us", &getOpDelayUs);
  m.def("memory_stats", [](int device) { return memoryStats(static_cast<c10::DeviceIndex>(device)); },
        py::arg("device") = -1);
  m.def("reset_peak_memory_stats",
        [](int device) { allocator().resetPeakStats(resolveDeviceIndex(static_cast<c10::DeviceIndex>(device))); },
        py::arg("device") = -1);
  m.def("empty_cache", [] {
    py::gil_scoped_release no_gil;
    allocator().emptyCache();
  });
  m.def("mem_get_info", [](int device) { return memGetInfo(static_cast<c10::DeviceIndex>(device)); },
        py::arg("device") = -1, "(bytes in use, capacity) of the device, as the runtime accounts them");
  m.def("current_stream_handle",
        [](int device) { return currentStreamHandle(static_cast<c10::DeviceIndex>(device)); },
        py::arg("device") = -1, "the sdStream_t of the current stream, as an int");
  m.def("external_stream_id",
        [](int device, uintptr_t handle) { return externalStreamId(static_cast<c10::DeviceIndex>(device), handle); },
        py::arg("device"), py::arg("handle"));
  m.def("guard_has_native_handle", &guardOverridesNativeHandle,
        "False when the guard was registered without getStreamNativeHandle (SIMDEV_NATIVE_HANDLE=0)");
  // devbridge's stream hooks (devbridge/c_runtime_api.h), for devbridge.register_*.
  m.def("current_stream_query",
        [] { return functionCapsule(&currentStreamQuery, "devbridge_current_stream"); });
  m.def("external_stream_hook",
        [] { return functionCapsule(&externalStreamHook, "devbridge_external_stream"); });
  m.def("stream_resolver", [] { return functionCapsule(&streamResolver, "devbridge_stream_resolver"); });
  // devbridge's graph table (devbridge/c_graph_api.h), for devbridge.graphs.register_graph_api.
  m.def("graph_api", [] { return py::capsule(const_cast<void*>(graphApiTable()), "devbridge_graph_api"); });
  m.def("_enqueue_sleep",
        [](int64_t us, int device) { enqueueSleep(us, static_cast<c10::DeviceIndex>(device)); },
        py::arg("microseconds"), py::arg("device") = -1);
  bindDistributed(m);  // torch_simdev._C._distributed (torch_simdev/distributed.py)
  m.def("inject_fault", &injectFault, py::arg("kind"), py::arg("nth"));
  m.def("injected_faults", &injectedFaults);
  m.def("_set_work_failure_message", [](const std::string& message) {
    SIMDEV_CHECK(sdSetWorkFailureMessage(message.c_str()));
  });
  m.def("_enqueue_failure",
        [](const std::string& message, int device) {
          enqueueFailure(message, static_cast<c10::DeviceIndex>(device));
        },
        py::arg("message"), py::arg("device") = -1);
}
