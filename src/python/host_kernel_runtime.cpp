// The host kernel runtime (devbridge.launch.host_kernel_runtime; the "host"
// spec is this runtime running the interpreter Triton target): kernels whose
// programs are Python calls, for any PrivateUse1 plugin whose tensors live in
// host memory. It needs nothing of the plugin but its c10 device guard
// (through devbridge's DeviceRuntime: getStream, the stream's native handle,
// synchronizeStream); no runtime library is opened.
//
// Loading a binary hands it to the runtime's Python `load` callable, which
// returns a nonzero id; the id is the module and function handle. A launch
// must be on the plugin's current stream (what Triton and Inductor launch on):
// it waits for the work queued there, then runs every program of the grid on
// the calling thread, each as one call of the runtime's `run` callable, under
// the GIL (the launcher calls `launch` without it). The launch returns once
// the kernel ran, so whatever is queued on the stream later comes after it:
// ordered on the stream, by being synchronous. A failure of `run` fails the
// launch itself, with the Python error's text (get_last_error), and skips the
// rest of the grid. A launch on a stream that is being captured (devbridge.graphs,
// torch.compile's reduce-overhead) is refused: the kernel would run now, on
// this thread, and a graph would not record it.
#include <Python.h>

#include <ATen/dlpack.h>
#include <c10/core/DeviceType.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "devbridge/c_graph_api.h"
#include "devbridge/error.h"
#include "devbridge/runtime.h"
#include "graphs/graph_registry.h"
#include "launch/adapter_error.h"
#include "launch/kernel_runtimes.h"
#include "python/py_kernel_runtime.h"

namespace devbridge {
namespace launch {
// A namespace of its own: in a unity batch, py_kernel_runtime.cpp's
// anonymous Load, Launch, ... share the translation unit.
namespace host_runtime {
namespace {

struct HostRuntime {
  std::string name;
  PyObject* load = nullptr;  // strong references, kept for the process
  PyObject* run = nullptr;
  DevbridgeKernelRuntime table{};
};

const DeviceRuntime& Plugin() { return DeviceRuntime::For(c10::DeviceType::PrivateUse1); }

std::string Hex(const void* pointer) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%llx",
                static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(pointer)));
  return text;
}

// Holds the GIL for a scope, from any thread (the launcher releases it
// around launch; a direct caller may hold it already).
class Gil {
 public:
  Gil() : state_(PyGILState_Ensure()) {}
  ~Gil() { PyGILState_Release(state_); }
  Gil(const Gil&) = delete;
  Gil& operator=(const Gil&) = delete;

 private:
  PyGILState_STATE state_;
};

void CheckPythonAlive(const HostRuntime& r) {
#if PY_VERSION_HEX >= 0x030D0000
  const bool finalizing = Py_IsFinalizing();
#else
  const bool finalizing = _Py_IsFinalizing();
#endif
  if (!Py_IsInitialized() || finalizing) {
    throw std::runtime_error("the " + r.name + " kernel runtime runs Python kernels, and Python is exiting");
  }
}

int Load(void* self, int32_t device_id, const void* image, size_t image_size, const char* kernel_name,
         uint32_t shared_bytes, DevbridgeLoadedKernel* out) {
  auto& r = *static_cast<HostRuntime*>(self);
  return AdapterCall([&] {
    (void)device_id;
    (void)shared_bytes;  // programs are host calls: no shared memory to reserve
    (void)kernel_name;
    CheckPythonAlive(r);
    uint64_t kernel_id = 0;
    std::string message;
    {
      Gil gil;
      PyObject* id = PyObject_CallFunction(r.load, "y#", static_cast<const char*>(image),
                                           static_cast<Py_ssize_t>(image_size));
      if (id == nullptr) {
        message = FetchPythonError();
      } else {
        kernel_id = PyLong_Check(id) ? PyLong_AsUnsignedLongLong(id) : 0;
        if (PyErr_Occurred()) {
          kernel_id = 0;
          PyErr_Clear();
        }
        Py_DECREF(id);
      }
    }
    if (kernel_id == 0) {
      throw std::runtime_error("the " + r.name + " kernel runtime's load refused the binary: " +
                               (message.empty() ? std::string("it returned no nonzero int id") : message));
    }
    // The id is the handle: nothing is allocated, so nothing is freed, and a
    // launch racing an unload never reads freed memory.
    out->module = reinterpret_cast<void*>(static_cast<uintptr_t>(kernel_id));
    out->function = out->module;
    out->num_regs = 0;
    out->num_spills = 0;
    out->max_threads = 1 << 30;
  });
}

int Unload(void*, void*) {
  // The binary stays registered with `load`'s owner (the interpreter keeps
  // its descriptions by id); nothing of the runtime's own to release.
  return 0;
}

// The current c10 stream of the plugin's device `device_id`, checked to be
// the one the launch names.
c10::Stream LaunchStream(const HostRuntime& r, int32_t device_id, void* native) {
  const DeviceRuntime& plugin = Plugin();
  const auto index = static_cast<c10::DeviceIndex>(device_id);
  void* current = plugin.CurrentNativeStream(index);
  if (current != native) {
    const std::string where = plugin.Name() + ":" + std::to_string(device_id);
    throw std::runtime_error(
        "the " + r.name + " kernel runtime launches on the current stream only: this launch is on stream " +
        Hex(native) + ", and the current stream of " + where + " is " + Hex(current) +
        " (it runs the kernel on the launching thread once the work queued on the current stream is done, "
        "which orders it on that stream alone); make the stream current first (with torch.Stream(...) as a "
        "context manager, or torch.accelerator.set_stream)");
  }
  return plugin.CurrentStream(index);
}

// Refuses a launch on a capturing stream. Checked before the stream is
// synchronized: a plugin whose capture refuses host synchronisation would
// otherwise fail there without saying why, and one whose capture allows it
// would record a graph without the kernel (a replay would skip it silently).
void CheckNotCapturing(const HostRuntime& r, int32_t device_id, void* native) {
  const int32_t status = graphs::CaptureStatus(static_cast<int32_t>(kDLExtDev), device_id, native);
  if (status == kDevbridgeCaptureNone) return;
  throw std::runtime_error(
      "the " + r.name + " kernel runtime cannot launch on stream " + Hex(native) + " of " + Plugin().Name() + ":" +
      std::to_string(device_id) + ", which is being captured into a graph: it runs the kernel right away, on the "
      "launching thread, so a graph could not record it. Launch the kernel outside the capture (torch.compile "
      "without mode='reduce-overhead'), or declare a kernel runtime that queues kernels on the plugin's streams "
      "(declare_hardware(..., kernel_runtime=<its DevbridgeKernelRuntime capsule>), docs/plugin-authors.md §6)");
}

// Runs every program of the launch with the GIL held; "" or the failure.
std::string RunPrograms(const HostRuntime& r, uint64_t kernel_id, int32_t device_id,
                        const DevbridgeLaunchConfig& config) {
  // Each parameter in an 8-byte slot (no Triton-layout parameter is wider),
  // as the Python kernel runtime delivers them.
  std::vector<uint64_t> slots(config.num_params, 0);
  for (uint32_t i = 0; i < config.num_params; ++i) {
    const size_t size = config.param_sizes[i] < 8 ? config.param_sizes[i] : 8;
    std::memcpy(&slots[i], config.params[i], size);
  }
  Gil gil;
  PyObject* payload = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(slots.data()),
                                                static_cast<Py_ssize_t>(slots.size() * 8));
  if (payload == nullptr) return FetchPythonError();
  std::string failure;
  const uint32_t* grid = config.grid;
  for (uint32_t z = 0; z < grid[2] && failure.empty(); ++z) {
    for (uint32_t y = 0; y < grid[1] && failure.empty(); ++y) {
      for (uint32_t x = 0; x < grid[0] && failure.empty(); ++x) {
        PyObject* result = PyObject_CallFunction(r.run, "K(III)(III)iO", static_cast<unsigned long long>(kernel_id),
                                                 x, y, z, grid[0], grid[1], grid[2], static_cast<int>(device_id),
                                                 payload);
        if (result == nullptr) {
          failure = FetchPythonError();
          break;
        }
        const long status = PyLong_Check(result) ? PyLong_AsLong(result) : -1;
        Py_DECREF(result);
        PyErr_Clear();
        if (status != 0) {
          failure = "program (" + std::to_string(x) + ", " + std::to_string(y) + ", " + std::to_string(z) +
                    ") returned " + std::to_string(status) + " (0 means done)";
        }
      }
    }
  }
  Py_DECREF(payload);
  return failure;
}

int Launch(void* self, int32_t device_id, void* function, const DevbridgeLaunchConfig* config) {
  auto& r = *static_cast<HostRuntime*>(self);
  return AdapterCall([&] {
    if (config->layout != kDevbridgeLayoutTriton) {
      throw std::runtime_error("the " + r.name + " kernel runtime launches Triton-layout kernels only");
    }
    const c10::Stream stream = LaunchStream(r, device_id, config->stream);
    CheckNotCapturing(r, device_id, config->stream);
    // The work queued before the kernel is done before it runs (the GIL is
    // not held here: that work may need it).
    Plugin().Synchronize(stream);
    CheckPythonAlive(r);
    const uint64_t kernel_id = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(function));
    const std::string failure = RunPrograms(r, kernel_id, device_id, *config);
    if (!failure.empty()) {
      throw std::runtime_error("a kernel of the " + r.name + " kernel runtime failed on " + Plugin().Name() + ":" +
                               std::to_string(device_id) + ": " + failure);
    }
  });
}

int DeviceProperties(void* self, int32_t device_id, DevbridgeDeviceProperties* out) {
  return AdapterCall([&] {
    const int count = Plugin().DeviceCount();
    if (device_id < 0 || device_id >= count) {
      throw std::runtime_error(Plugin().Name() + " device " + std::to_string(device_id) + " does not exist (" +
                               std::to_string(count) + " devices)");
    }
    FillInterpretedDeviceProperties(out);  // as simdev's own target answers
  });
}

const char* LastError(void*) { return AdapterLastError().c_str(); }

}  // namespace
}  // namespace host_runtime

const DevbridgeKernelRuntime* HostKernelRuntime(const std::string& name, PyObject* load, PyObject* run) {
  using namespace host_runtime;  // NOLINT(build/namespaces)
  if (name.empty()) throw Error(ErrorKind::kValue, "devbridge: a host kernel runtime needs a name");
  if (!PyCallable_Check(load) || !PyCallable_Check(run)) {
    throw Error(ErrorKind::kType, "devbridge: a host kernel runtime's load and run must be callable");
  }
  // Never destroyed: a capsule of it may be held anywhere.
  auto* runtime = new HostRuntime();
  runtime->name = name;
  Py_INCREF(load);
  Py_INCREF(run);
  runtime->load = load;
  runtime->run = run;
  runtime->table = MakeKernelRuntime(runtime->name.c_str(), runtime, &Load, &Unload, &Launch,
                                     /*pointer_device=*/nullptr, &LastError, &DeviceProperties);
  runtime->table.layouts = 1u << kDevbridgeLayoutTriton;
  return &runtime->table;
}

}  // namespace launch
}  // namespace devbridge
