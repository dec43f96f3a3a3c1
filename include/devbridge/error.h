// devbridge's C++ error type.
//
// Every failure devbridge detects itself is thrown as devbridge::Error, whose
// kind says which Python exception it becomes at a C ABI boundary (the DLPack
// table sets a Python exception; the runtime table stores the message for
// get_last_error). Exceptions from c10/ATen are classified the same way by
// DescribeCurrentException, so both boundaries report identically.
#pragma once

#include <stdexcept>
#include <string>

namespace devbridge {

enum class ErrorKind {
  kValue,           // bad argument value (NULL pointer, negative size, ...)
  kType,            // wrong kind of object
  kBuffer,          // the data cannot be described in DLPack / by a torch tensor
  kRuntime,         // the backend failed or lacks a capability
  kMemory,          // an allocation failed
  kNotImplemented,  // a backend hook exists in c10 but this backend lacks it
};

// Name of the Python built-in exception for `kind` ("ValueError", ...). Also
// the `kind` string DLPack's SetError callback receives.
const char* PythonExceptionName(ErrorKind kind) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

// Classifies the exception currently being handled (call only inside a catch
// block): devbridge::Error keeps its kind; c10's typed errors map to their
// Python counterparts (c10::BufferError -> kBuffer, ...); anything else is
// kRuntime. `*message` gets the text without C++ backtrace. Never throws.
ErrorKind DescribeCurrentException(std::string* message) noexcept;

}  // namespace devbridge
