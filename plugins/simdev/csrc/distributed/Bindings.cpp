// torch_simdev._C._distributed: the Python face of simdev's collective
// backend. torch_simdev/distributed.py registers it with torch.distributed.
#include "distributed/Bindings.h"

#include <torch/csrc/utils/pybind.h>

#include <chrono>

#include "distributed/SimdevBackend.h"

namespace py = pybind11;

namespace torch_simdev {

void bindDistributed(py::module& parent) {
  // A torch built without distributed support (USE_DISTRIBUTED=0) has no
  // c10d module: simdev then has no collective backend, like the torch.
  py::object c10d;
  try {
    c10d = py::module::import("torch._C._distributed_c10d");
  } catch (const py::error_already_set&) {
    PyErr_Clear();
    return;
  }
  py::module distributed = parent.def_submodule(
      "_distributed", "simdev's collective backend (Gloo over simdev memory, in stream order)");
  // A subclass of torch's c10d Backend, so that a ProcessGroup takes it as
  // the backend of the simdev device type.
  py::object backend_base = c10d.attr("Backend");
  py::class_<SimdevBackend, c10::intrusive_ptr<SimdevBackend>>(distributed, "SimdevBackend", backend_base)
      .def(py::init([](const c10::intrusive_ptr<c10d::Backend>& gloo, int64_t timeout_ms) {
             return c10::make_intrusive<SimdevBackend>(gloo, std::chrono::milliseconds(timeout_ms));
           }),
           py::arg("gloo"), py::arg("timeout_ms"),
           "Wraps `gloo` (a torch.distributed.ProcessGroupGloo of the same store, rank and size).")
      .def_property_readonly("collectives_issued", &SimdevBackend::collectivesIssued,
                             "How many collectives this group has issued and handed to Gloo (tests).");
  distributed.attr("BACKEND_NAME") = SimdevBackend::kName;
}

}  // namespace torch_simdev
