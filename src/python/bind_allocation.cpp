// plugin_empty_strided(size, stride, dtype): the allocation line of
// torch.compile's generated wrapper for a plugin device.
//
// Inductor's wrapper allocates cuda buffers through a C fast path
// (torch._C._dynamo.guards._empty_strided_cuda) and every other device
// through torch.empty_strided(..., device=...), whose Python argument
// parsing costs more than the allocation itself on a fast allocator. This
// is the same call without the parsing: at::empty_strided on the calling
// thread's current PrivateUse1 device, through the dispatcher, so a plugin
// whose storage is its own (its empty_strided kernel) is served as before.
// Like cuda's fast path (at::detail::empty_strided_cuda) it is invisible to
// Python dispatch modes: the mode AOTAutograd's runtime puts around a
// graph's first call would otherwise take the allocation through
// torch.ops.aten.empty_strided, where a plugin's out-of-memory becomes a
// bare MemoryError. Errors reach Python as torch's own bindings raise them
// (HANDLE_TH_ERRORS): a plugin's c10::OutOfMemoryError is
// torch.OutOfMemoryError with its message, which batch-size finders catch.
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <ATen/ops/empty_strided.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/SmallVector.h>

#include "devbridge/runtime.h"
#include "python/bindings.h"

namespace devbridge {
namespace python {
namespace {

bool ParseInts(PyObject* sequence, const char* what, c10::SmallVector<int64_t, 8>* out) {
  if (!PyTuple_Check(sequence) && !PyList_Check(sequence)) {
    PyErr_Format(PyExc_TypeError, "plugin_empty_strided: %s must be a tuple of ints, got %s", what,
                 Py_TYPE(sequence)->tp_name);
    return false;
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(sequence);
  PyObject** items = PySequence_Fast_ITEMS(sequence);
  out->resize(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    const long long value = PyLong_AsLongLong(items[i]);
    if (value == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "plugin_empty_strided: %s[%zd] must be an int, got %s", what, i,
                   Py_TYPE(items[i])->tp_name);
      return false;
    }
    (*out)[static_cast<size_t>(i)] = value;
  }
  return true;
}

PyObject* PluginEmptyStrided(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "plugin_empty_strided(size, stride, dtype) takes 3 arguments");
    return nullptr;
  }
  c10::SmallVector<int64_t, 8> size, stride;
  if (!ParseInts(args[0], "size", &size) || !ParseInts(args[1], "stride", &stride)) return nullptr;
  if (size.size() != stride.size()) {
    PyErr_Format(PyExc_ValueError, "plugin_empty_strided: size has %zu dimensions but stride %zu", size.size(),
                 stride.size());
    return nullptr;
  }
  if (!THPDtype_Check(args[2])) {
    PyErr_Format(PyExc_TypeError, "plugin_empty_strided: dtype must be a torch.dtype, got %s",
                 Py_TYPE(args[2])->tp_name);
    return nullptr;
  }
  const c10::ScalarType dtype = reinterpret_cast<THPDtype*>(args[2])->scalar_type;
  HANDLE_TH_ERRORS
  const c10::impl::ExcludeDispatchKeyGuard no_python_modes(
      c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
  at::Tensor tensor;
  {
    // Without the GIL, as torch.empty_strided allocates: an allocator that
    // waits for queued work (a caching allocator freeing its cache before it
    // reports out-of-memory) must not wait for a stream whose work needs the
    // GIL, as interpreted Triton kernels do.
    pybind11::gil_scoped_release no_gil;
    const c10::DeviceIndex index = DeviceRuntime::For(c10::DeviceType::PrivateUse1).CurrentDevice();
    tensor = at::empty_strided(size, stride, at::TensorOptions().dtype(dtype).device(c10::DeviceType::PrivateUse1, index));
  }
  return THPVariable_Wrap(std::move(tensor));
  END_HANDLE_TH_ERRORS
}

PyMethodDef kAllocation[] = {
    {"plugin_empty_strided", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&PluginEmptyStrided)),
     METH_FASTCALL,
     "plugin_empty_strided(size, stride, dtype): an uninitialised tensor on the current PrivateUse1 device "
     "(at::empty_strided through the dispatcher), without torch.empty_strided's argument parsing."},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

void BindAllocation(pybind11::module_& m) {
  for (PyMethodDef* def = kAllocation; def->ml_name != nullptr; ++def) {
    PyObject* function = PyCFunction_NewEx(def, nullptr, m.ptr());
    if (function == nullptr || PyModule_AddObject(m.ptr(), def->ml_name, function) != 0) {
      Py_XDECREF(function);
      throw pybind11::error_already_set();
    }
  }
}

}  // namespace python
}  // namespace devbridge
