// The runtime table reports failures as -1 plus a per-thread message, like
// errno/dlerror, so kernel-side C code needs neither exceptions nor Python.
#include "devbridge/runtime.h"

namespace devbridge {
namespace {
thread_local std::string t_last_error;
}  // namespace

void SetLastError(const std::string& message) { t_last_error = message; }

const char* GetLastError() noexcept { return t_last_error.c_str(); }

}  // namespace devbridge
