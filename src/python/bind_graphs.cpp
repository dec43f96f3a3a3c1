// Bindings for graph capture (devbridge.graphs): registering a plugin's graph
// table (include/devbridge/c_graph_api.h) and checked calls into it. Handles
// cross into Python as integers; python/devbridge/graphs.py owns their life
// cycle. The GIL is released around every call into the plugin: a capture's
// end or a graph's destruction may drop recorded work, and with it tensors.
#include <ATen/dlpack.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "devbridge/c_graph_api.h"
#include "devbridge/error.h"
#include "devbridge/runtime.h"
#include "graphs/graph_registry.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace devbridge {
namespace python {
namespace {

// Graph tables serve the PrivateUse1 plugin, registered under kDLExtDev.
constexpr int32_t kSlot = static_cast<int32_t>(kDLExtDev);

std::string PluginDevice(const std::string& device_type) {
  if (ParseDeviceType(device_type) != c10::DeviceType::PrivateUse1) {
    throw Error(ErrorKind::kValue, "devbridge: graph capture through devbridge serves the PrivateUse1 plugin ('" +
                                       DeviceRuntime::For(c10::DeviceType::PrivateUse1).Name() + "'), not '" +
                                       device_type + "'; for cuda use torch.cuda.CUDAGraph");
  }
  return DeviceRuntime::For(c10::DeviceType::PrivateUse1).Name();
}

const DevbridgeGraphAPI& Table(const std::string& device_type) {
  return graphs::Require(kSlot, PluginDevice(device_type));
}

void* AsHandle(uintptr_t value) { return reinterpret_cast<void*>(value); }
uintptr_t AsInt(void* handle) { return reinterpret_cast<uintptr_t>(handle); }

std::string On(const std::string& device_type, int index, uintptr_t stream) {
  char handle[32];
  std::snprintf(handle, sizeof(handle), "0x%llx", static_cast<unsigned long long>(stream));
  return PluginDevice(device_type) + ":" + std::to_string(index) + " (stream " + handle + ")";
}

}  // namespace

void BindGraphs(py::module_& m) {
  m.def(
      "_register_graph_api",
      [](const py::object& capsule, const std::string& device_type) {
        const std::string device = PluginDevice(device_type);
        if (capsule.is_none()) {
          graphs::Unregister(kSlot);
          return;
        }
        const auto* api = static_cast<const DevbridgeGraphAPI*>(
            CapsulePointer(capsule, DEVBRIDGE_GRAPH_API_CAPSULE_NAME, "a graph table"));
        graphs::Register(kSlot, api, device);
      },
      py::arg("capsule"), py::arg("device_type"));
  m.def("_has_graph_api", [](const std::string& device_type) {
    PluginDevice(device_type);
    return graphs::Find(kSlot) != nullptr;
  });
  m.def("_graph_api_name", [](const std::string& device_type) { return std::string(Table(device_type).name); });
  m.def("_graph_capture_begin", [](const std::string& device_type, int index, uintptr_t stream) {
    const DevbridgeGraphAPI& api = Table(device_type);
    int status;
    {
      py::gil_scoped_release no_gil;
      status = api.capture_begin(api.self, index, AsHandle(stream));
    }
    graphs::Check(api, status, "beginning a capture on " + On(device_type, index, stream));
  });
  m.def("_graph_capture_end", [](const std::string& device_type, int index, uintptr_t stream) {
    const DevbridgeGraphAPI& api = Table(device_type);
    void* graph = nullptr;
    int status;
    {
      py::gil_scoped_release no_gil;
      status = api.capture_end(api.self, index, AsHandle(stream), &graph);
    }
    graphs::Check(api, status, "ending the capture on " + On(device_type, index, stream));
    return AsInt(graph);
  });
  m.def("_graph_instantiate", [](const std::string& device_type, uintptr_t graph) {
    const DevbridgeGraphAPI& api = Table(device_type);
    void* exec = nullptr;
    int status;
    {
      py::gil_scoped_release no_gil;
      status = api.instantiate(api.self, AsHandle(graph), &exec);
    }
    graphs::Check(api, status, "instantiating a graph of " + PluginDevice(device_type));
    return AsInt(exec);
  });
  m.def("_graph_replay", [](const std::string& device_type, uintptr_t exec, int index, uintptr_t stream) {
    const DevbridgeGraphAPI& api = Table(device_type);
    int status;
    {
      py::gil_scoped_release no_gil;
      status = api.replay(api.self, AsHandle(exec), index, AsHandle(stream));
    }
    graphs::Check(api, status, "replaying a graph on " + On(device_type, index, stream));
  });
  m.def("_graph_destroy", [](const std::string& device_type, uintptr_t graph) {
    const DevbridgeGraphAPI& api = Table(device_type);
    int status;
    {
      py::gil_scoped_release no_gil;
      status = api.graph_destroy(api.self, AsHandle(graph));
    }
    graphs::Check(api, status, "destroying a graph of " + PluginDevice(device_type));
  });
  m.def("_graph_exec_destroy", [](const std::string& device_type, uintptr_t exec) {
    const DevbridgeGraphAPI& api = Table(device_type);
    int status;
    {
      py::gil_scoped_release no_gil;
      status = api.exec_destroy(api.self, AsHandle(exec));
    }
    graphs::Check(api, status, "destroying an executable graph of " + PluginDevice(device_type));
  });
  m.def("_graph_capture_status", [](const std::string& device_type, int index, uintptr_t stream) {
    PluginDevice(device_type);
    return graphs::CaptureStatus(kSlot, index, AsHandle(stream));
  });
}

}  // namespace python
}  // namespace devbridge
