#pragma once

#include <pybind11/pybind11.h>

namespace torch_simdev {

// Adds the `_distributed` submodule to torch_simdev._C.
void bindDistributed(pybind11::module& parent);

}  // namespace torch_simdev
