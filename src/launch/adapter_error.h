// How the kernel-runtime adapters keep the C ABI's error contract: every
// entry point runs its body through AdapterCall, which turns a C++ exception
// into -1 plus a message in the adapter's thread-local last error.
#pragma once

#include <exception>
#include <new>
#include <string>

namespace devbridge {
namespace launch {

// The calling thread's last adapter error (one slot for all adapters: a
// caller reads it right after the failing call, on the same thread).
std::string& AdapterLastError() noexcept;

template <class Body>
int AdapterCall(Body&& body) noexcept {
  try {
    body();
    return 0;
  } catch (const std::exception& e) {
    try {
      AdapterLastError() = e.what();
    } catch (...) {
    }
    return -1;
  } catch (...) {
    try {
      AdapterLastError() = "unknown C++ exception";
    } catch (...) {
    }
    return -1;
  }
}

}  // namespace launch
}  // namespace devbridge
