#include "devbridge/error.h"

#include <c10/util/Exception.h>

#include <new>

namespace devbridge {

const char* PythonExceptionName(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::kValue: return "ValueError";
    case ErrorKind::kType: return "TypeError";
    case ErrorKind::kBuffer: return "BufferError";
    case ErrorKind::kMemory: return "MemoryError";
    case ErrorKind::kNotImplemented: return "NotImplementedError";
    case ErrorKind::kRuntime: break;
  }
  return "RuntimeError";
}

ErrorKind DescribeCurrentException(std::string* message) noexcept {
  // Copying the message can itself throw bad_alloc; then the caller gets a
  // fixed text rather than an exception escaping a noexcept function.
  try {
    try {
      throw;
    } catch (const Error& e) {
      *message = e.what();
      return e.kind();
    } catch (const c10::BufferError& e) {
      *message = e.what_without_backtrace();
      return ErrorKind::kBuffer;
    } catch (const c10::ValueError& e) {
      *message = e.what_without_backtrace();
      return ErrorKind::kValue;
    } catch (const c10::TypeError& e) {
      *message = e.what_without_backtrace();
      return ErrorKind::kType;
    } catch (const c10::NotImplementedError& e) {
      *message = e.what_without_backtrace();
      return ErrorKind::kNotImplemented;
    } catch (const c10::OutOfMemoryError& e) {
      *message = e.what_without_backtrace();
      return ErrorKind::kMemory;
    } catch (const c10::Error& e) {
      *message = e.what_without_backtrace();
      return ErrorKind::kRuntime;
    } catch (const std::bad_alloc&) {
      *message = "devbridge: out of host memory";
      return ErrorKind::kMemory;
    } catch (const std::exception& e) {
      *message = e.what();
      return ErrorKind::kRuntime;
    } catch (...) {
      *message = "devbridge: unknown C++ exception";
      return ErrorKind::kRuntime;
    }
  } catch (...) {
    return ErrorKind::kMemory;
  }
}

}  // namespace devbridge
