// How the DLPack table's entry points report errors: -1 with a Python
// exception set (the DLPack header's contract), never a C++ exception.
#pragma once

#include <Python.h>

#include "devbridge/error.h"

namespace devbridge {

// The Python built-in exception for an ErrorKind (RuntimeError by default).
// Shared by the table's entry points and the _C bindings' translator, so a
// devbridge error raises the same exception type on both paths.
PyObject* PythonExceptionType(ErrorKind kind) noexcept;

// Thrown after a Python API call failed and already set the Python error;
// the guard then keeps that error instead of replacing it.
struct PythonErrorAlreadySet {};

// Sets the Python exception for the C++ exception being handled (call inside
// a catch block), taking the GIL if this thread lacks it. Also stores the
// message as the thread's last error, which is all it does when no Python
// interpreter runs (C++ tests). Never throws.
void RaiseCurrentExceptionInPython() noexcept;

// Runs `body`; returns 0, or -1 with the error reported as above.
template <class Body>
int RunGuardedPython(Body&& body) noexcept {
  try {
    body();
    return 0;
  } catch (const PythonErrorAlreadySet&) {
    return -1;
  } catch (...) {
    RaiseCurrentExceptionInPython();
    return -1;
  }
}

}  // namespace devbridge
