// Bindings for the DLPack exchange table: our capsule, and the delegate
// (PyTorch's original table) that install() hands over.
#include <chrono>

#include "devbridge/dlpack_exchange.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace devbridge {
namespace python {
namespace {

// DLPack's capsule name for a DLPackExchangeAPI*.
constexpr const char* kExchangeCapsuleName = "dlpack_exchange_api";

// Nanoseconds per current_work_stream call of `api`, timed in a C loop (what
// a C consumer pays per kernel call; `devbridge check` reports it). Raises
// the table's error if a call fails.
double TimeCurrentWorkStream(const py::object& capsule, int32_t device_type, int32_t device_id,
                             int64_t iterations) {
  const auto* api = static_cast<const DLPackExchangeAPI*>(
      CapsulePointer(capsule, kExchangeCapsuleName, "the exchange table"));
  if (iterations <= 0) throw py::value_error("iterations must be positive");
  const auto type = static_cast<DLDeviceType>(device_type);
  void* stream = nullptr;
  if (api->current_work_stream(type, device_id, &stream) != 0) throw py::error_already_set();
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iterations; ++i) {
    if (api->current_work_stream(type, device_id, &stream) != 0) throw py::error_already_set();
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()) /
         static_cast<double>(iterations);
}

}  // namespace

void BindDLPack(py::module_& m) {
  // One capsule object for the process, so `is` identifies our table. No
  // destructor: the table is static.
  m.attr("EXCHANGE_API") =
      py::capsule(const_cast<DLPackExchangeAPI*>(ExchangeAPI()), kExchangeCapsuleName);

  m.def(
      "_set_delegate_exchange_api",
      [](const py::object& capsule) {
        const DLPackExchangeAPI* api = nullptr;
        if (!capsule.is_none()) {
          api = static_cast<const DLPackExchangeAPI*>(
              CapsulePointer(capsule, kExchangeCapsuleName, "the previous exchange table"));
        }
        SetDelegateExchangeAPI(api);
      },
      py::arg("capsule"),
      "Table that answers current_work_stream for device types devbridge does not own.");
  m.def("_time_current_work_stream", &TimeCurrentWorkStream, py::arg("capsule"),
        py::arg("device_type"), py::arg("device_id"), py::arg("iterations"),
        "ns per current_work_stream call, timed in C (for devbridge check).");
  m.def("_delegate_exchange_api_address",
        [] { return reinterpret_cast<uintptr_t>(DelegateExchangeAPI()); });
  m.def(
      "_capsule_address",
      [](const py::object& capsule, const std::string& name) {
        return reinterpret_cast<uintptr_t>(CapsulePointer(capsule, name.c_str(), "the capsule"));
      },
      py::arg("capsule"), py::arg("name"));
}

}  // namespace python
}  // namespace devbridge
