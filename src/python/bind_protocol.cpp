// Bindings behind devbridge's Python DLPack protocol for plugin tensors
// (python/devbridge/_protocol.py): capsules, DLPack devices, and ordering a
// consumer's stream after the producer's current stream.
#include <Python.h>

#include "devbridge/dlpack_exchange.h"
#include "devbridge/runtime.h"
#include "dlpack/capsules.h"
#include "dlpack/python_abi.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace devbridge {
namespace python {
namespace {

// PythonErrorAlreadySet means "the Python error is set": hand it to pybind11.
template <class Body>
auto KeepingPythonErrors(Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const PythonErrorAlreadySet&) {
    throw py::error_already_set();
  }
}

py::tuple AsTuple(const DLDevice& device) {
  return py::make_tuple(static_cast<int>(device.device_type), device.device_id);
}

// The consumer's stream after it was made to wait for the producer's current
// stream: None names the device's default stream (DLPack: "the legacy
// default stream"), an int a native stream. Returns the consumer's c10
// stream as (stream_id, device_index, device_type), from which Python builds
// the torch.Stream a copy then runs on.
py::tuple OrderConsumerStream(const std::string& device_type, int index, const py::object& stream) {
  const DeviceRuntime& runtime = DeviceRuntime::For(ParseDeviceType(device_type));
  const auto device_index = static_cast<c10::DeviceIndex>(index);
  c10::Stream consumer = runtime.CurrentStream(device_index);
  if (stream.is_none()) {
    consumer = runtime.DefaultStream(device_index);
  } else {
    void* native = PyLong_AsVoidPtr(stream.ptr());
    if (native == nullptr && PyErr_Occurred()) throw py::error_already_set();
    consumer = runtime.StreamFromNative(device_index, native);
  }
  runtime.WaitForCurrentStream(consumer);
  return py::make_tuple(consumer.id(), static_cast<int>(consumer.device_index()),
                        static_cast<int>(consumer.device_type()));
}

}  // namespace

void BindProtocol(py::module_& m) {
  m.def(
      "_dlpack_capsule",
      [](const at::Tensor& tensor, bool versioned, bool copied, bool read_only) {
        return KeepingPythonErrors([&] {
          return py::reinterpret_steal<py::object>(MakeDLPackCapsule(tensor, versioned, copied, read_only));
        });
      },
      py::arg("tensor"), py::arg("versioned"), py::arg("copied"), py::arg("read_only") = false,
      "A 'dltensor_versioned' (or legacy 'dltensor') capsule owning an export of tensor; read_only sets "
      "DLPACK_FLAG_BITMASK_READ_ONLY (versioned only).");
  m.def(
      "_from_dlpack_capsule",
      [](const py::object& capsule) {
        return KeepingPythonErrors([&] { return ConsumeDLPackCapsule(capsule.ptr()); });
      },
      py::arg("capsule"), "Import an unused DLPack capsule (either kind) and mark it used.");
  m.def(
      "_dlpack_capsule_device",
      [](const py::object& capsule) {
        return KeepingPythonErrors([&] { return AsTuple(DLPackCapsuleDevice(capsule.ptr())); });
      },
      py::arg("capsule"), "(device_type, device_id) of an unused DLPack capsule.");
  m.def(
      "_dl_device", [](const at::Tensor& tensor) { return AsTuple(ToDLDevice(tensor.device())); },
      py::arg("tensor"), "The DLPack (device_type, device_id) devbridge exports tensor with.");
  m.def("_order_consumer_stream", &OrderConsumerStream, py::arg("device_type"), py::arg("index"),
        py::arg("stream"),
        "Make the consumer's stream (None: default; int: native handle) wait for the current "
        "stream; returns (stream_id, device_index, device_type) of that stream.");
}

}  // namespace python
}  // namespace devbridge
