// A kernel runtime whose kernels are Python (devbridge.launch.python_kernel_runtime):
// for a target with no instruction set, whose binary is a description that
// Python code runs (simdev's Triton target runs Triton's interpreter so).
//
// Loading a binary hands it to the runtime's Python `load` callable, which
// returns an id, and loads a fresh copy of the trampoline library
// (simdev_python_trampoline.cpp) through the simdev kernel runtime, set up
// to run that id; launching is the simdev runtime's own launch, so the
// launcher, its packing, the streams and the allocator are exactly the GPU
// path's. Each program runs on the stream's worker as one call of the
// runtime's `run` callable, which takes the GIL for that call only (with a
// thread state it keeps, see WorkerThreadState).
// The y# format below takes a Py_ssize_t: PY_SSIZE_T_CLEAN is defined for the
// whole module (CMakeLists.txt).
#include <Python.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "devbridge/error.h"
#include "launch/adapter_error.h"
#include "launch/kernel_runtimes.h"
#include "python/py_kernel_runtime.h"

namespace devbridge {
namespace launch {

std::string FetchPythonError() {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  PyObject* text = value ? PyObject_Str(value) : nullptr;
  const char* utf8 = text ? PyUnicode_AsUTF8(text) : nullptr;
  std::string message = std::string(type ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "error") + ": " +
                        (utf8 ? utf8 : "?");
  Py_XDECREF(text);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  PyErr_Clear();
  return message;
}

namespace {

// Set at interpreter exit (an atexit hook, while Python still runs): from
// then on queued programs are skipped instead of taking the GIL of a Python
// that is finalizing (a thread doing that is terminated in the middle of the
// simdev worker's loop).
std::atomic<bool> g_python_exiting{false};

struct PythonRuntime {
  std::string name;
  const DevbridgeKernelRuntime* simdev = nullptr;
  std::string trampoline;  // the trampoline library's bytes
  PyObject* load = nullptr;  // strong references, kept for the process
  PyObject* run = nullptr;
  DevbridgeKernelRuntime table{};
  std::mutex mutex;
  std::map<void*, uint64_t> kernel_of_module;
};

struct Setup {  // simdev_python_trampoline.cpp's Setup
  const void* runtime;
  uint64_t kernel_id;
  int (*run)(const void*, uint64_t, const uint32_t*, const uint32_t*, int, void**, const size_t*, int);
};

// Calls callable(*args) with the GIL; returns a new reference, or nullptr
// with the Python error described in *message.
PyObject* CallPython(PyObject* callable, PyObject* args, std::string* message) {
  PyObject* result = PyObject_CallObject(callable, args);
  if (result == nullptr) *message = FetchPythonError();
  return result;
}

// The Python thread state of a stream worker, made for its first program and
// kept for the thread's life; the GIL is taken and dropped around each program
// (PyEval_RestoreThread / PyEval_SaveThread). A fresh thread state per
// program (PyGILState_Ensure/Release on a thread Python does not know) would
// cost its creation and teardown every program, and would make each retake
// of the GIL count as a switch to another thread: CPython asks the holder to
// drop the GIL only after a thread waited a whole switch interval with no
// switch in between (take_gil, CPython's Python/ceval_gil.c), so a host thread
// waiting to enqueue never got to ask while the worker ran short programs,
// and got the GIL only by winning the race at a program boundary.
//
// When a worker thread ends, its state cannot be deleted there (that needs
// the GIL, and the thread ending the stream may hold it while it joins the
// worker): it is handed to g_orphans and deleted by the next program to take
// the GIL, on any worker.
std::mutex g_orphans_mutex;
std::vector<PyThreadState*>* g_orphans = new std::vector<PyThreadState*>();  // process lifetime

struct WorkerThreadState {
  PyThreadState* state = nullptr;
  ~WorkerThreadState() {
    if (state == nullptr) return;
    std::lock_guard<std::mutex> lock(g_orphans_mutex);
    g_orphans->push_back(state);
  }
};
thread_local WorkerThreadState t_worker;

// Takes the GIL on this thread with its kept thread state.
void EnterPython() {
  if (t_worker.state == nullptr) {
    (void)PyGILState_Ensure();  // never released: the state outlives this program
    t_worker.state = PyThreadState_Get();
  } else {
    PyEval_RestoreThread(t_worker.state);
  }
  std::vector<PyThreadState*> orphans;
  {
    std::lock_guard<std::mutex> lock(g_orphans_mutex);
    orphans.swap(*g_orphans);
  }
  for (PyThreadState* orphan : orphans) {  // of threads that ended: none is current anywhere
    PyThreadState_Clear(orphan);
    PyThreadState_Delete(orphan);
  }
}

// The trampoline's runner: one program of one Python kernel of `runtime`.
int RunProgram(const void* runtime, uint64_t kernel_id, const uint32_t* program_id, const uint32_t* grid, int device,
               void** args, const size_t* arg_sizes, int num_args) {
  const auto& r = *static_cast<const PythonRuntime*>(runtime);
  if (g_python_exiting.load(std::memory_order_acquire) || !Py_IsInitialized()) return 91;
  EnterPython();
  int status = 0;
  // Each parameter in an 8-byte slot (no Triton-layout parameter is wider).
  std::vector<uint64_t> slots(static_cast<size_t>(num_args), 0);
  for (int i = 0; i < num_args; ++i) {
    std::memcpy(&slots[static_cast<size_t>(i)], args[i], arg_sizes[i] < 8 ? arg_sizes[i] : 8);
  }
  PyObject* payload = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(slots.data()),
                                                static_cast<Py_ssize_t>(slots.size() * 8));
  PyObject* call = payload ? Py_BuildValue("(K(III)(III)iN)", static_cast<unsigned long long>(kernel_id),
                                           program_id[0], program_id[1], program_id[2], grid[0], grid[1], grid[2],
                                           device, payload)
                           : nullptr;
  std::string message;
  PyObject* result = call ? CallPython(r.run, call, &message) : nullptr;
  Py_XDECREF(call);
  if (result == nullptr) {
    // `run` raised: say so on stderr (simdev reports the failure as
    // sdErrorLaunchFailure at the stream's next synchronization).
    if (message.empty()) message = "could not call it";
    PySys_WriteStderr("devbridge: a Python kernel of the %s kernel runtime failed on simdev:%d: %.2000s\n",
                      r.name.c_str(), device, message.c_str());
    status = 1;
  } else {
    status = PyLong_Check(result) ? static_cast<int>(PyLong_AsLong(result)) : 1;
    Py_DECREF(result);
    PyErr_Clear();
  }
  (void)PyEval_SaveThread();
  return status;
}

int Load(void* self, int32_t device_id, const void* image, size_t image_size, const char* kernel_name,
         uint32_t shared_bytes, DevbridgeLoadedKernel* out) {
  auto& r = *static_cast<PythonRuntime*>(self);
  return AdapterCall([&] {
    uint64_t kernel_id = 0;
    {
      const PyGILState_STATE gil = PyGILState_Ensure();
      std::string message;
      PyObject* args = Py_BuildValue("(y#)", static_cast<const char*>(image), static_cast<Py_ssize_t>(image_size));
      PyObject* id = args ? CallPython(r.load, args, &message) : nullptr;
      Py_XDECREF(args);
      if (id != nullptr) {
        kernel_id = PyLong_AsUnsignedLongLong(id);
        Py_DECREF(id);
        PyErr_Clear();
      }
      PyGILState_Release(gil);
      if (kernel_id == 0) {
        throw std::runtime_error("the Python kernel runtime's load refused the binary: " +
                                 (message.empty() ? std::string("it returned no nonzero id") : message));
      }
    }
    (void)device_id;
    (void)shared_bytes;
    (void)kernel_name;  // the trampoline's entry point is always devbridge_interpret
    const Setup setup{&r, kernel_id, &RunProgram};
    LoadSimdevModuleWithSetup(r.simdev, r.trampoline.data(), r.trampoline.size(), "devbridge_interpret",
                              "devbridge_interpret_setup", &setup, out);
    std::lock_guard<std::mutex> lock(r.mutex);
    r.kernel_of_module[out->module] = kernel_id;
  });
}

int Unload(void* self, void* module) {
  auto& r = *static_cast<PythonRuntime*>(self);
  return AdapterCall([&] {
    uint64_t kernel_id = 0;
    {
      std::lock_guard<std::mutex> lock(r.mutex);
      auto it = r.kernel_of_module.find(module);
      if (it != r.kernel_of_module.end()) {
        kernel_id = it->second;
        r.kernel_of_module.erase(it);
      }
    }
    CheckRuntimeStatus(*r.simdev, r.simdev->unload(r.simdev->self, module), "unloading a Python kernel");
    // The description stays registered: launches queued before the unload
    // still run, and they look it up by id.
    (void)kernel_id;
  });
}

int Launch(void* self, int32_t device_id, void* function, const DevbridgeLaunchConfig* config) {
  auto& r = *static_cast<PythonRuntime*>(self);
  return r.simdev->launch(r.simdev->self, device_id, function, config);
}

int PointerDevice(void* self, uint64_t address, int32_t* out_device_id) {
  auto& r = *static_cast<PythonRuntime*>(self);
  return r.simdev->pointer_device(r.simdev->self, address, out_device_id);
}

int DeviceProperties(void* self, int32_t device_id, DevbridgeDeviceProperties* out) {
  auto& r = *static_cast<PythonRuntime*>(self);
  return r.simdev->device_properties(r.simdev->self, device_id, out);
}

const char* LastError(void*) { return AdapterLastError().c_str(); }

}  // namespace

void StopPythonKernelsAtExit() noexcept { g_python_exiting.store(true, std::memory_order_release); }

const DevbridgeKernelRuntime* PythonKernelRuntime(const std::string& name, const std::string& simdev_library,
                                                  const std::string& trampoline_path, PyObject* load,
                                                  PyObject* run) {
  if (name.empty()) throw Error(ErrorKind::kValue, "devbridge: a Python kernel runtime needs a name");
  if (!PyCallable_Check(load) || !PyCallable_Check(run)) {
    throw Error(ErrorKind::kType, "devbridge: a Python kernel runtime's load and run must be callable");
  }
  std::ifstream in(trampoline_path, std::ios::binary);
  std::string trampoline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) trampoline.clear();
  if (trampoline.empty()) {
    throw Error(ErrorKind::kRuntime, "devbridge: cannot read the Python kernel trampoline '" + trampoline_path +
                                         "'; reinstall devbridge");
  }
  // Never destroyed: launches may run during process exit.
  auto* runtime = new PythonRuntime();
  try {
    runtime->simdev = SimdevKernelRuntime(simdev_library);
  } catch (...) {
    delete runtime;
    throw;
  }
  runtime->name = name;
  runtime->trampoline = std::move(trampoline);
  Py_INCREF(load);
  Py_INCREF(run);
  runtime->load = load;
  runtime->run = run;
  runtime->table = MakeKernelRuntime(runtime->name.c_str(), runtime, &Load, &Unload, &Launch, &PointerDevice,
                                     &LastError, &DeviceProperties);
  return &runtime->table;
}

}  // namespace launch
}  // namespace devbridge
