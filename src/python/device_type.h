// The device-type argument of devbridge._C's functions, parsed once for all
// of them (pybind11 bindings and the METH_FASTCALL hot path alike).
#pragma once

#include <c10/core/DeviceType.h>

#include <string>

namespace devbridge {
namespace python {

// "privateuseone", the plugin's own name ("simdev"), "cpu", "cuda", ... as
// torch.device understands them (the Python layer normalises first). Throws
// devbridge::Error (kValue) naming the accepted spellings otherwise.
c10::DeviceType ParseDeviceType(const std::string& device_type);

}  // namespace python
}  // namespace devbridge
