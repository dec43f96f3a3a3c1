// Bindings for the runtime: DeviceRuntime queries, stream resolvers, options,
// the runtime table capsule.
#include <c10/core/DeviceType.h>

#include <cstdint>
#include <memory>

#include "devbridge/c_runtime_api.h"
#include "devbridge/runtime.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace devbridge {
namespace python {
namespace {

// A Python callable resolver: (device_index, stream_id) -> int handle. The
// slow fallback for plugins that can only answer from Python; it takes the
// GIL on every query.
struct PythonResolver {
  py::object callable;
};

int CallPythonResolver(void* context, int32_t device_index, int64_t stream_id, void** out_stream) {
  try {
    py::gil_scoped_acquire gil;
    try {
      py::object result = static_cast<PythonResolver*>(context)->callable(device_index, stream_id);
      void* handle = PyLong_AsVoidPtr(result.ptr());
      if (handle == nullptr && PyErr_Occurred()) throw py::error_already_set();
      *out_stream = handle;
      return 0;
    } catch (py::error_already_set& error) {
      // Reported through the runtime's error (the caller names the device);
      // the Python error itself is consumed here, under the GIL.
      SetLastError(std::string("the Python resolver raised ") + error.what());
      return -1;
    }
  } catch (...) {
    std::string message;
    DescribeCurrentException(&message);
    SetLastError(message);
    return -1;
  }
}

void RegisterCapsuleResolver(const py::capsule& capsule, const std::string& device_type) {
  StreamResolver resolver;
  resolver.c_function = reinterpret_cast<DevbridgeStreamResolver>(
      CapsulePointer(capsule, DEVBRIDGE_STREAM_RESOLVER_CAPSULE_NAME, "a C stream resolver"));
  resolver.description = "C function from a devbridge_stream_resolver capsule";
  RegisterStreamResolver(ParseDeviceType(device_type), std::move(resolver));
}

void RegisterCallableResolver(const py::object& callable, const std::string& device_type) {
  if (!PyCallable_Check(callable.ptr())) {
    throw Error(ErrorKind::kType, "devbridge: a stream resolver must be a callable "
                                  "(device_index, stream_id) -> int or a PyCapsule named '" +
                                      std::string(DEVBRIDGE_STREAM_RESOLVER_CAPSULE_NAME) + "'");
  }
  StreamResolver resolver;
  // Never freed: retired resolvers may still be running on another thread
  // (see registries.cpp); one small object per registration.
  resolver.context = new PythonResolver{callable};
  resolver.callback = &CallPythonResolver;
  resolver.description =
      "Python callable " + py::str(py::repr(callable)).cast<std::string>();
  RegisterStreamResolver(ParseDeviceType(device_type), std::move(resolver));
}

void RegisterSubmitHook(const py::object& capsule, const std::string& device_type) {
  DevbridgeSubmitFn hook = nullptr;
  if (!capsule.is_none()) {
    hook = reinterpret_cast<DevbridgeSubmitFn>(
        CapsulePointer(capsule, DEVBRIDGE_SUBMIT_HOOK_CAPSULE_NAME, "a submit hook"));
  }
  SetSubmitHook(ParseDeviceType(device_type), hook);
}

// The C function inside `capsule` (named `name`), or NULL for None.
template <class Fn>
Fn FunctionFromCapsule(const py::object& capsule, const char* name, const char* what) {
  if (capsule.is_none()) return nullptr;
  return reinterpret_cast<Fn>(CapsulePointer(capsule, name, what));
}

void RegisterCurrentStreamQuery(const py::object& capsule, const std::string& device_type) {
  SetCurrentStreamQuery(ParseDeviceType(device_type),
                        FunctionFromCapsule<DevbridgeCurrentStreamFn>(
                            capsule, DEVBRIDGE_CURRENT_STREAM_CAPSULE_NAME, "a current-stream query"));
}

void RegisterExternalStreamHook(const py::object& capsule, const std::string& device_type) {
  SetExternalStreamHook(ParseDeviceType(device_type),
                        FunctionFromCapsule<DevbridgeExternalStreamFn>(
                            capsule, DEVBRIDGE_EXTERNAL_STREAM_CAPSULE_NAME, "an external-stream hook"));
}

const DeviceRuntime& Runtime(const std::string& device_type) {
  return DeviceRuntime::For(ParseDeviceType(device_type));
}

}  // namespace

void BindRuntime(py::module_& m) {
  m.attr("RUNTIME_API") = py::capsule(const_cast<DevbridgeRuntimeAPI*>(RuntimeAPI()),
                                      DEVBRIDGE_RUNTIME_API_CAPSULE_NAME);

  m.def(
      "native_stream_source",
      [](const std::string& device_type, int index) {
        return std::string(ToString(
            Runtime(device_type).NativeStreamSourceOf(static_cast<c10::DeviceIndex>(index))));
      },
      py::arg("device_type"), py::arg("index"),
      "Where current_stream's answer comes from: guard, resolver, current-stream-query, missing, "
      "no-streams, no-backend.");
  m.def(
      "_stream_native_handle",
      [](const std::string& device_type, int index, int64_t stream_id) {
        const DeviceRuntime& runtime = Runtime(device_type);
        const c10::Device device(runtime.type(), static_cast<c10::DeviceIndex>(index));
        return reinterpret_cast<uintptr_t>(
            runtime.NativeHandle(c10::Stream(c10::Stream::UNSAFE, device, stream_id)));
      },
      py::arg("device_type"), py::arg("index"), py::arg("stream_id"),
      "Native handle of the stream (device_type:index, stream_id): resolver, else guard.");
  m.def(
      "device_count", [](const std::string& device_type) { return Runtime(device_type).DeviceCount(); },
      py::arg("device_type"));
  m.def(
      "current_device",
      [](const std::string& device_type) {
        const DeviceRuntime& runtime = Runtime(device_type);
        return runtime.type() == c10::DeviceType::CPU ? 0 : int(runtime.CurrentDevice());
      },
      py::arg("device_type"));
  m.def(
      "set_current_device",
      [](const std::string& device_type, int index) {
        const DeviceRuntime& runtime = Runtime(device_type);
        if (runtime.type() == c10::DeviceType::CPU) return;
        runtime.SetCurrentDevice(static_cast<c10::DeviceIndex>(index));
      },
      py::arg("device_type"), py::arg("index"),
      "Make device_type:index the calling thread's current device of its type.");
  m.def("plugin_name", []() -> py::object {
    if (!c10::is_privateuse1_backend_registered()) return py::none();
    return py::str(c10::get_privateuse1_backend());
  });

  m.def("_register_stream_resolver_capsule", &RegisterCapsuleResolver);
  m.def("_register_stream_resolver_callable", &RegisterCallableResolver);
  m.def("_unregister_stream_resolver",
        [](const std::string& device_type) { UnregisterStreamResolver(ParseDeviceType(device_type)); });
  m.def("_register_submit_hook", &RegisterSubmitHook);
  m.def("_register_current_stream_query", &RegisterCurrentStreamQuery);
  m.def("_register_external_stream_hook", &RegisterExternalStreamHook);
  m.def("_has_current_stream_query", [](const std::string& device_type) {
    return GetCurrentStreamQuery(ParseDeviceType(device_type)) != nullptr;
  });
  m.def(
      "_current_stream_query",
      [](const std::string& device_type) -> py::object {
        const DevbridgeCurrentStreamFn query = GetCurrentStreamQuery(ParseDeviceType(device_type));
        if (query == nullptr) return py::none();
        return py::capsule(reinterpret_cast<void*>(query), DEVBRIDGE_CURRENT_STREAM_CAPSULE_NAME);
      },
      "The registered current-stream query as a capsule (to register it again), or None.");
  m.def("_has_external_stream_hook", [](const std::string& device_type) {
    return GetExternalStreamHook(ParseDeviceType(device_type)) != nullptr;
  });

  m.def(
      "_set_options",
      [](bool allow_null_stream, bool accept_ascend, bool export_ascend) {
        Options options;
        options.allow_null_stream = allow_null_stream;
        options.accept_ascend_device_type = accept_ascend;
        options.export_ascend_device_type = export_ascend;
        SetOptions(options);
      },
      py::arg("allow_null_stream"), py::arg("accept_ascend_device_type"),
      py::arg("export_ascend_device_type"));
  m.def("_get_options", [] {
    const Options options = GetOptions();
    py::dict result;
    result["allow_null_stream"] = options.allow_null_stream;
    result["accept_ascend_device_type"] = options.accept_ascend_device_type;
    result["export_ascend_device_type"] = options.export_ascend_device_type;
    return result;
  });
}

}  // namespace python
}  // namespace devbridge
