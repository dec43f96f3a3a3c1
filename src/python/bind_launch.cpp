// Bindings for the launcher: the Launcher type, kernel runtimes, loading and
// releasing binaries.
#include <ATen/dlpack.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "devbridge/c_launch_api.h"
#include "devbridge/dlpack_exchange.h"
#include "devbridge/error.h"
#include "launch/kernel_runtimes.h"
#include "launch/loaded_kernels.h"
#include "python/py_kernel_runtime.h"
#include "python/py_launcher.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace devbridge {
namespace python {
namespace {

py::capsule RuntimeCapsule(const DevbridgeKernelRuntime* runtime) {
  return py::capsule(const_cast<DevbridgeKernelRuntime*>(runtime), DEVBRIDGE_KERNEL_RUNTIME_CAPSULE_NAME);
}

const DevbridgeKernelRuntime* ValidRuntime(const py::handle& capsule) {
  auto* runtime = static_cast<const DevbridgeKernelRuntime*>(
      CapsulePointer(capsule, DEVBRIDGE_KERNEL_RUNTIME_CAPSULE_NAME, "a kernel runtime"));
  launch::ValidateKernelRuntime(runtime);
  return runtime;
}

py::dict DeviceProperties(const py::capsule& capsule, int index) {
  const DevbridgeKernelRuntime* runtime = ValidRuntime(capsule);
  DevbridgeDeviceProperties properties{};
  int status = 0;
  {
    py::gil_scoped_release release;
    status = runtime->device_properties(runtime->self, index, &properties);
  }
  launch::CheckRuntimeStatus(*runtime, status, ("reading the properties of device " + std::to_string(index)).c_str());
  py::dict result;
  result["arch"] = properties.arch;
  result["warp_size"] = properties.warp_size;
  result["multiprocessor_count"] = properties.multiprocessor_count;
  result["max_shared_mem"] = properties.max_shared_mem;
  result["max_num_regs"] = properties.max_num_regs;
  result["max_threads_per_block"] = properties.max_threads_per_block;
  return result;
}

uint64_t HardwareSyncAddress(const py::capsule& capsule, int index) {
  const DevbridgeKernelRuntime* runtime = ValidRuntime(capsule);
  auto sync_address = launch::RuntimeHardwareSyncAddress(*runtime);
  if (sync_address == nullptr) {
    throw Error(ErrorKind::kValue, std::string("devbridge: the ") + runtime->name +
                                       " kernel runtime has no hardware sync address");
  }
  uint64_t address = 0;
  launch::CheckRuntimeStatus(*runtime, sync_address(runtime->self, index, &address),
                             "reading the hardware sync address");
  return address;
}

std::string AscendSocName() {
  try {
    return launch::AscendSocName();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kRuntime, std::string("devbridge: ") + e.what());
  }
}

py::tuple LoadKernel(const py::capsule& runtime_capsule, const std::string& device_type, int index,
                     const py::bytes& image, const std::string& name, uint32_t shared_bytes) {
  const DevbridgeKernelRuntime* runtime = ValidRuntime(runtime_capsule);
  if (index < 0 || index > 127) {
    throw Error(ErrorKind::kValue, "devbridge: device index " + std::to_string(index) + " is out of range");
  }
  const c10::Device device(ParseDeviceType(device_type), static_cast<c10::DeviceIndex>(index));
  const DLDevice dl = ToDLDevice(device);
  const std::string bytes = image;  // one copy; the runtime copies it again on load
  uint64_t handle = 0;
  {
    py::gil_scoped_release release;  // module loads can take milliseconds
    handle = launch::LoadKernel(runtime, dl.device_type, dl.device_id, device.str(), bytes.data(),
                                bytes.size(), name, shared_bytes);
  }
  auto kernel = launch::FindKernel(handle);
  return py::make_tuple(handle, handle, kernel->handles.num_regs, kernel->handles.num_spills,
                        kernel->handles.max_threads);
}

py::tuple NativeHandles(uint64_t handle) {
  auto kernel = launch::FindKernel(handle);
  if (!kernel) throw Error(ErrorKind::kValue, "devbridge: no loaded kernel has handle " + std::to_string(handle));
  return py::make_tuple(reinterpret_cast<uintptr_t>(kernel->handles.module),
                        reinterpret_cast<uintptr_t>(kernel->handles.function));
}

}  // namespace

void BindLaunch(py::module_& m) {
  PyTypeObject* type = launch::LauncherType();
  if (type == nullptr) throw py::error_already_set();
  Py_INCREF(type);
  if (PyModule_AddObject(m.ptr(), "Launcher", reinterpret_cast<PyObject*>(type)) != 0) {
    Py_DECREF(type);
    throw py::error_already_set();
  }
  for (PyMethodDef* def = launch::HotPathFunctions(); def->ml_name != nullptr; ++def) {
    PyObject* function = PyCFunction_NewEx(def, nullptr, m.ptr());
    if (function == nullptr || PyModule_AddObject(m.ptr(), def->ml_name, function) != 0) {
      Py_XDECREF(function);
      throw py::error_already_set();
    }
  }
  m.attr("LAUNCH_API_VERSION") = py::make_tuple(DEVBRIDGE_LAUNCH_API_MAJOR, DEVBRIDGE_LAUNCH_API_MINOR);
  m.def("_set_hook_chain_type", [](const py::object& t) { launch::SetHookChainType(t.is_none() ? nullptr : t.ptr()); });
  m.def("cuda_kernel_runtime", [] { return RuntimeCapsule(launch::CudaKernelRuntime()); },
        "The CUDA kernel runtime (libcuda.so.1 opened on first use).");
  m.def(
      "simdev_kernel_runtime",
      [](const std::string& library) { return RuntimeCapsule(launch::SimdevKernelRuntime(library)); },
      py::arg("library"), "The simdev kernel runtime behind the simdev library at `library`.");
  m.def(
      "python_kernel_runtime",
      [](const std::string& name, const std::string& library, const std::string& trampoline, const py::object& load,
         const py::object& run) {
        return RuntimeCapsule(launch::PythonKernelRuntime(name, library, trampoline, load.ptr(), run.ptr()));
      },
      py::arg("name"), py::arg("library"), py::arg("trampoline"), py::arg("load"), py::arg("run"),
      "A kernel runtime whose kernels are Python: load(image) -> id, run(id, program, grid, device, payload) "
      "per program, on simdev's streams (devbridge.launch.python_kernel_runtime).");
  m.def(
      "host_kernel_runtime",
      [](const std::string& name, const py::object& load, const py::object& run) {
        return RuntimeCapsule(launch::HostKernelRuntime(name, load.ptr(), run.ptr()));
      },
      py::arg("name"), py::arg("load"), py::arg("run"),
      "A kernel runtime whose kernels are Python run on the launching thread after the plugin's current stream "
      "is synchronized: load(image) -> id, run(id, program, grid, device, payload) per program "
      "(devbridge.launch.host_kernel_runtime).");
  m.def("ascend_kernel_runtime", [] { return RuntimeCapsule(launch::AscendKernelRuntime()); },
        "The Ascend kernel runtime (CANN's libascendcl.so opened on first use).");
  m.def("ascend_soc_name", &AscendSocName, "The NPU's SoC name (aclrtGetSocName); needs CANN.");
  m.def(
      "kernel_runtime_layouts",
      [](const py::capsule& capsule) { return launch::RuntimeLayouts(*ValidRuntime(capsule)); },
      py::arg("runtime"), "Bit (1 << layout) for every parameter layout the runtime launches.");
  m.def("kernel_runtime_hardware_sync_address", &HardwareSyncAddress, py::arg("runtime"), py::arg("index"),
        "The runtime's hardware sync address of device `index` (the Ascend layout's ffts_addr).");
  m.def("_stop_python_kernels_at_exit", [] { launch::StopPythonKernelsAtExit(); });
  m.def(
      "kernel_runtime_name",
      [](const py::capsule& capsule) { return std::string(ValidRuntime(capsule)->name); },
      py::arg("runtime"), "The name of a kernel runtime table (validated).");
  m.def("kernel_runtime_device_properties", &DeviceProperties, py::arg("runtime"), py::arg("index"),
        "The DevbridgeDeviceProperties of device `index`, as a dict.");
  m.def("load_kernel", &LoadKernel, py::arg("runtime"), py::arg("device_type"), py::arg("index"),
        py::arg("image"), py::arg("name"), py::arg("shared"));
  m.def("release_kernel", [](uint64_t handle) { return launch::ReleaseKernel(handle); }, py::arg("handle"));
  m.def(
      "kernel_is_loaded", [](uint64_t handle) { return launch::FindKernel(handle) != nullptr; }, py::arg("handle"),
      "Whether `handle` is a live kernel devbridge loaded (Triton 3.8 unloads kernels through whichever driver "
      "is active: python/devbridge/_triton_api.py, route_kernel_unloads).");
  m.def("kernel_native_handles", &NativeHandles, py::arg("handle"));
}

}  // namespace python
}  // namespace devbridge
