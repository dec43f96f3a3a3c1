// Bindings for the DLPack exchange table: our capsule, and the delegate
// (PyTorch's original table) that install() hands over.
#include "devbridge/dlpack_exchange.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace devbridge {
namespace python {
namespace {

// DLPack's capsule name for a DLPackExchangeAPI*.
constexpr const char* kExchangeCapsuleName = "dlpack_exchange_api";

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
