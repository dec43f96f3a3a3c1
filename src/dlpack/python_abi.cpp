#include "dlpack/python_abi.h"

#include <Python.h>

#include <string>

#include "devbridge/error.h"
#include "devbridge/runtime.h"

namespace devbridge {

PyObject* PythonExceptionType(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::kValue: return PyExc_ValueError;
    case ErrorKind::kType: return PyExc_TypeError;
    case ErrorKind::kBuffer: return PyExc_BufferError;
    case ErrorKind::kMemory: return PyExc_MemoryError;
    case ErrorKind::kNotImplemented: return PyExc_NotImplementedError;
    case ErrorKind::kRuntime: break;
  }
  return PyExc_RuntimeError;
}

void RaiseCurrentExceptionInPython() noexcept {
  std::string message;
  const ErrorKind kind = DescribeCurrentException(&message);
  try {
    SetLastError(message);
  } catch (...) {
  }
  if (!Py_IsInitialized()) return;
  // current_work_stream and the allocator may run on threads without the GIL.
  const PyGILState_STATE gil = PyGILState_Ensure();
  PyErr_SetString(PythonExceptionType(kind), message.c_str());
  PyGILState_Release(gil);
}

}  // namespace devbridge
