// Errors inside the runtime are C++ exceptions (simdev::Error); every C entry
// point runs its body through apiCall(), which converts any exception into an
// sdError_t plus the calling thread's last-error message. Nothing escapes the
// C boundary.
#ifndef SIMDEV_SRC_ERROR_H_
#define SIMDEV_SRC_ERROR_H_

#include <simdev/runtime.h>

#include <exception>
#include <new>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

namespace simdev {

class Error : public std::exception {
 public:
  Error(sdError_t code, std::string message) : code_(code), message_(std::move(message)) {}
  sdError_t code() const noexcept { return code_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  sdError_t code_;
  std::string message_;
};

// Builds an Error whose message is the concatenation of `parts` (streamed).
template <typename... Parts>
Error error(sdError_t code, const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  return Error(code, message.str());
}

// Stores "<function>: <message>" as the thread's last error and returns `code`.
sdError_t fail(const char* function, sdError_t code, const char* message) noexcept;

// Throws sdErrorInvalidValue unless `out` is non-NULL; `name` is the parameter.
inline void requireOutput(const void* out, const char* name) {
  if (out == nullptr) {
    throw error(sdErrorInvalidValue, name, " is NULL; pass the address where the result should be stored");
  }
}

// Runs `body` and maps its outcome to an sdError_t. `body` returns void
// (success) or an sdError_t status that is not an error (sdErrorNotReady),
// which is returned without touching the last-error message.
template <typename Body>
sdError_t apiCall(const char* function, Body&& body) noexcept {
  try {
    if constexpr (std::is_void_v<decltype(body())>) {
      body();
      return sdSuccess;
    } else {
      return body();
    }
  } catch (const Error& e) {
    return fail(function, e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return fail(function, sdErrorMemoryAllocation, "the host ran out of memory");
  } catch (const std::exception& e) {
    return fail(function, sdErrorUnknown, e.what());
  } catch (...) {
    return fail(function, sdErrorUnknown, "an unknown C++ exception was thrown");
  }
}

}  // namespace simdev

#endif  // SIMDEV_SRC_ERROR_H_
