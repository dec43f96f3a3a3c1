// The "simdev-interpreter" kernel runtime: simdev's Triton target.
//
// A binary of this target is a description of a Triton kernel for Triton's
// interpreter (devbridge/triton/_interpreter.py writes and reads it). Loading
// one registers it with the Python side and loads a fresh copy of the
// trampoline library (simdev_interpreter_trampoline.cpp) through the simdev
// kernel runtime, set up to run that kernel; launching is the simdev
// runtime's own launch, so the launcher, its packing, the streams and the
// allocator under test are exactly the GPU path's. Each program runs on the
// stream's worker, which takes the GIL for that call only (with a thread
// state it keeps, see WorkerThreadState).
#define PY_SSIZE_T_CLEAN  // the y# format below takes a Py_ssize_t
#include <Python.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "devbridge/error.h"
#include "launch/adapter_error.h"
#include "launch/kernel_runtimes.h"
#include "python/py_interpreter_runtime.h"

namespace devbridge {
namespace launch {
namespace {

constexpr const char* kModule = "devbridge.triton._interpreter";

// Set at interpreter exit (an atexit hook, while Python still runs): from
// then on queued programs are skipped instead of taking the GIL of a Python
// that is finalizing (a thread doing that is terminated in the middle of the
// simdev worker's loop).
std::atomic<bool> g_python_exiting{false};

struct InterpreterRuntime {
  const DevbridgeKernelRuntime* simdev = nullptr;
  std::string trampoline;  // the trampoline library's bytes
  DevbridgeKernelRuntime table{};
  std::mutex mutex;
  std::map<void*, uint64_t> kernel_of_module;
};

struct Setup {  // simdev_interpreter_trampoline.cpp's Setup
  uint64_t kernel_id;
  int (*run)(uint64_t, const uint32_t*, const uint32_t*, int, void**, const size_t*, int);
};

// Calls devbridge.triton._interpreter.<function>(*args) with the GIL; returns
// a new reference, or nullptr with the Python error described in *message.
PyObject* CallInterpreter(const char* function, PyObject* args, std::string* message) {
  PyObject* module = PyImport_ImportModule(kModule);
  PyObject* result = nullptr;
  if (module != nullptr) {
    PyObject* callable = PyObject_GetAttrString(module, function);
    if (callable != nullptr) {
      result = PyObject_CallObject(callable, args);
      Py_DECREF(callable);
    }
    Py_DECREF(module);
  }
  if (result == nullptr) {
    PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    PyObject* text = value ? PyObject_Str(value) : nullptr;
    const char* utf8 = text ? PyUnicode_AsUTF8(text) : nullptr;
    *message = std::string(type ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "error") + ": " +
               (utf8 ? utf8 : "?");
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    PyErr_Clear();
  }
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

// The trampoline's runner: one program of one interpreted kernel.
int RunProgram(uint64_t kernel_id, const uint32_t* program_id, const uint32_t* grid, int device, void** args,
               const size_t* arg_sizes, int num_args) {
  if (g_python_exiting.load(std::memory_order_acquire) || !Py_IsInitialized()) return 91;
  EnterPython();
  int status = 0;
  // Each parameter in an 8-byte slot (no parameter of this target is wider).
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
  PyObject* result = call ? CallInterpreter("run_program", call, &message) : nullptr;
  Py_XDECREF(call);
  if (result == nullptr) {
    // The kernel raised: say so on stderr (simdev reports the failure as
    // sdErrorLaunchFailure at the stream's next synchronization).
    if (message.empty()) message = "could not call the interpreter";
    PySys_WriteStderr("devbridge: an interpreted Triton kernel failed on simdev:%d: %.2000s\n", device,
                      message.c_str());
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
  auto& r = *static_cast<InterpreterRuntime*>(self);
  return AdapterCall([&] {
    uint64_t kernel_id = 0;
    {
      const PyGILState_STATE gil = PyGILState_Ensure();
      std::string message;
      PyObject* args = Py_BuildValue("(y#)", static_cast<const char*>(image), static_cast<Py_ssize_t>(image_size));
      PyObject* id = args ? CallInterpreter("register", args, &message) : nullptr;
      Py_XDECREF(args);
      if (id != nullptr) {
        kernel_id = PyLong_AsUnsignedLongLong(id);
        Py_DECREF(id);
        PyErr_Clear();
      }
      PyGILState_Release(gil);
      if (kernel_id == 0) {
        throw std::runtime_error("the interpreter refused the binary: " +
                                 (message.empty() ? std::string("could not call it") : message));
      }
    }
    (void)device_id;
    (void)shared_bytes;
    (void)kernel_name;  // the trampoline's entry point is always devbridge_interpret
    const Setup setup{kernel_id, &RunProgram};
    LoadSimdevModuleWithSetup(r.simdev, r.trampoline.data(), r.trampoline.size(), "devbridge_interpret",
                              "devbridge_interpreter_setup", &setup, out);
    std::lock_guard<std::mutex> lock(r.mutex);
    r.kernel_of_module[out->module] = kernel_id;
  });
}

int Unload(void* self, void* module) {
  auto& r = *static_cast<InterpreterRuntime*>(self);
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
    CheckRuntimeStatus(*r.simdev, r.simdev->unload(r.simdev->self, module), "unloading an interpreted kernel");
    // The description stays registered: launches queued before the unload
    // still run, and they look it up by id.
    (void)kernel_id;
  });
}

int Launch(void* self, int32_t device_id, void* function, const DevbridgeLaunchConfig* config) {
  auto& r = *static_cast<InterpreterRuntime*>(self);
  return r.simdev->launch(r.simdev->self, device_id, function, config);
}

int PointerDevice(void* self, uint64_t address, int32_t* out_device_id) {
  auto& r = *static_cast<InterpreterRuntime*>(self);
  return r.simdev->pointer_device(r.simdev->self, address, out_device_id);
}

int DeviceProperties(void* self, int32_t device_id, DevbridgeDeviceProperties* out) {
  auto& r = *static_cast<InterpreterRuntime*>(self);
  return r.simdev->device_properties(r.simdev->self, device_id, out);
}

const char* LastError(void*) { return AdapterLastError().c_str(); }

}  // namespace

void StopInterpretedKernelsAtExit() noexcept { g_python_exiting.store(true, std::memory_order_release); }

const DevbridgeKernelRuntime* SimdevInterpreterKernelRuntime(const std::string& simdev_library,
                                                             const std::string& trampoline_path) {
  static std::mutex mutex;
  static auto* runtimes = new std::map<std::string, std::unique_ptr<InterpreterRuntime>>();  // process lifetime
  std::lock_guard<std::mutex> lock(mutex);
  const std::string key = simdev_library + '\n' + trampoline_path;
  auto it = runtimes->find(key);
  if (it != runtimes->end()) return &it->second->table;
  std::ifstream in(trampoline_path, std::ios::binary);
  std::string trampoline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) trampoline.clear();
  if (trampoline.empty()) {
    throw Error(ErrorKind::kRuntime, "devbridge: cannot read the simdev interpreter trampoline '" +
                                         trampoline_path + "'; reinstall devbridge");
  }
  auto runtime = std::make_unique<InterpreterRuntime>();
  runtime->simdev = SimdevKernelRuntime(simdev_library);
  runtime->trampoline = std::move(trampoline);
  runtime->table = MakeKernelRuntime("simdev-interpreter", runtime.get(), &Load, &Unload, &Launch, &PointerDevice,
                                     &LastError, &DeviceProperties);
  return &runtimes->emplace(key, std::move(runtime)).first->second->table;
}

}  // namespace launch
}  // namespace devbridge
