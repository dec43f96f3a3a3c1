#include "SimdevCheck.h"

#include <sstream>

namespace torch_simdev {

std::string describeRuntimeError(const char* call, sdError_t error) {
  std::ostringstream out;
  out << "simdev runtime call " << call << " failed with " << sdGetErrorName(error) << ": "
      << sdGetLastErrorString();
  return out.str();
}

}  // namespace torch_simdev
