// torch_cudadev._C: the Python bindings of cudadev's runtime (the device
// module torch.cudadev is built on them). Loading this module also runs the
// static registrations of the other files: guard, allocator, hooks, kernels.

#include <pybind11/pybind11.h>

#include <cstdint>

#include <c10/util/Exception.h>
#include <torch/csrc/Exceptions.h>
#include <cuda_runtime_api.h>

#include "allocator.h"
#include "cuda_check.h"
#include "device.h"
#include "distributed.h"
#include "graphs.h"
#include "spin_kernel.h"
#include "streams.h"

namespace py = pybind11;

namespace cudadev {
namespace {

constexpr auto kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

int64_t allocated_bytes(int device, bool peak) {
  const auto stats = allocator().getDeviceStats(resolve_device_index(device));
  return peak ? stats.allocated_bytes[kAll].peak : stats.allocated_bytes[kAll].current;
}

void synchronize(int device) {
  ScopedDevice on(resolve_device_index(device));
  CUDADEV_CHECK(cudaDeviceSynchronize());
}

void sleep_on_current_stream(double milliseconds, int device) {
  TORCH_CHECK(milliseconds >= 0 && milliseconds <= 60000,
              "cudadev: _sleep_on_current_stream takes 0 to 60000 ms, got ", milliseconds);
  const c10::DeviceIndex idx = resolve_device_index(device);
  ScopedDevice on(idx);
  int clock_khz = 0;
  CUDADEV_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, idx));
  // Cycles at the peak clock: at a lower clock the spin only lasts longer,
  // which is what an ordering test wants.
  const auto cycles = static_cast<long long>(milliseconds * clock_khz);
  CUDADEV_CHECK(launch_spin_kernel(cycles, current_native_stream(idx)));
}

uintptr_t current_stream_handle(int device) {
  return reinterpret_cast<uintptr_t>(current_native_stream(resolve_device_index(device)));
}

}  // namespace
}  // namespace cudadev

PYBIND11_MODULE(_C, m) {
  using namespace cudadev;
  m.doc() = "cudadev runtime bindings; use torch.cudadev instead of this module";

  // c10 errors as torch's own bindings raise them (torch.AcceleratorError
  // for a failed CUDA call, torch.OutOfMemoryError, RuntimeError, ...), with
  // their message, without the C++ backtrace. Module-local, so torch's own
  // error translation is left alone.
  py::register_local_exception_translator([](std::exception_ptr error) {
    if (error) torch::translate_exception_to_python(error);
  });

  bind_distributed(m);  // torch_cudadev._C._distributed (torch_cudadev/distributed.py)
  m.def("_device_count", [] { return static_cast<int>(device_count()); });
  m.def("_current_device", [] { return static_cast<int>(current_device()); });
  m.def("_set_device", [](int device) { set_device(static_cast<c10::DeviceIndex>(device)); });
  m.def("_exchange_device", [](int device) {
    const int previous = current_device();
    if (device >= 0 && device != previous) {
      set_device(static_cast<c10::DeviceIndex>(device));
    }
    return previous;
  });
  m.def("_synchronize", &synchronize, py::arg("device") = -1,
        py::call_guard<py::gil_scoped_release>());
  m.def("_empty_cache", [] { allocator().emptyCache(); },
        py::call_guard<py::gil_scoped_release>());
  m.def("_memory_allocated", [](int device) { return allocated_bytes(device, false); },
        py::arg("device") = -1);
  m.def("_max_memory_allocated", [](int device) { return allocated_bytes(device, true); },
        py::arg("device") = -1);
  m.def("_reset_peak_memory_stats",
        [](int device) { allocator().resetPeakStats(resolve_device_index(device)); },
        py::arg("device") = -1);
  m.def("_sleep_on_current_stream", &sleep_on_current_stream, py::arg("milliseconds"),
        py::arg("device") = -1);
  m.def("_current_stream_handle", &current_stream_handle, py::arg("device") = -1);
  m.def("_default_stream_is_null_stream", &default_stream_is_null_stream);
  // devbridge's stream hooks (devbridge/c_runtime_api.h), for devbridge.register_*.
  m.def("current_stream_query", [] {
    return py::capsule(reinterpret_cast<void*>(&current_stream_query), "devbridge_current_stream");
  });
  m.def("external_stream_hook", [] {
    return py::capsule(reinterpret_cast<void*>(&external_stream_hook), "devbridge_external_stream");
  });
  // devbridge's graph table (devbridge/c_graph_api.h), for devbridge.graphs.register_graph_api.
  m.def("graph_api", [] { return py::capsule(graph_api(), "devbridge_graph_api"); });
  // The StreamId under which cudadev knows a CUDA stream of `device` (its own or
  // an external one), for torch.Stream(stream_id=...).
  m.def(
      "_stream_id_of",
      [](int device, uintptr_t handle) {
        int64_t id = 0;
        TORCH_CHECK(external_stream_hook(device, reinterpret_cast<void*>(handle), &id) == 0,
                    "cudadev: ", reinterpret_cast<void*>(handle), " is not a CUDA stream of cudadev:",
                    device);
        return id;
      },
      py::arg("device"), py::arg("handle"));
  // torch.Stream(stream_id=..., device_index=..., device_type=...) takes the
  // c10::DeviceType value.
  m.def("_privateuse1_device_type",
        [] { return static_cast<int>(c10::DeviceType::PrivateUse1); });
}
