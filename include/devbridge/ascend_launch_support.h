/*!
 * \file devbridge/ascend_launch_support.h
 * \brief What the launcher C++ that triton-ascend / FlagTree generate calls
 *  when devbridge's `torch_plugin` registry policy supplies its host-runtime
 *  snippets (python/devbridge/triton/ascend/strategies.py): workspace and
 *  sync-block lock from the framework allocator, and the launch itself, all
 *  through devbridge's C runtime table (c_runtime_api.h). No torch, ATen or
 *  vendor header; the only library the launcher needs is CANN's.
 *
 * Lifetime: a LaunchScope lives for one `_launch` call. The blocks it hands
 * out return to the framework allocator when it ends, after the launch was
 * enqueued on the stream (the allocator's stream order keeps them from being
 * reused before the kernel ran: the contract of a tensor freed right after
 * a launch). The launch runs inline on the calling thread.
 *
 * Errors set a Python exception (the generated launcher holds the GIL and
 * returns NULL from `launch` when one is set).
 */
#ifndef DEVBRIDGE_ASCEND_LAUNCH_SUPPORT_H_
#define DEVBRIDGE_ASCEND_LAUNCH_SUPPORT_H_

#include <Python.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "devbridge/c_runtime_api.h"

namespace devbridge_ascend {

constexpr int32_t kDLExtDev = 12;  // the PrivateUse1 plugin's DLPack device type

/*! \brief devbridge's runtime table, from `devbridge.runtime_api()` (needs the GIL). */
inline const DevbridgeRuntimeAPI* RuntimeTable() {
  static const DevbridgeRuntimeAPI* table = nullptr;
  if (table != nullptr) return table;
  PyObject* module = PyImport_ImportModule("devbridge");
  if (module == nullptr) return nullptr;
  PyObject* capsule = PyObject_CallMethod(module, "runtime_api", nullptr);
  Py_DECREF(module);
  if (capsule == nullptr) return nullptr;
  auto* found = static_cast<const DevbridgeRuntimeAPI*>(PyCapsule_GetPointer(capsule, DEVBRIDGE_RUNTIME_API_CAPSULE_NAME));
  Py_DECREF(capsule);  // the table is static in devbridge: the pointer outlives the capsule
  if (found != nullptr && found->header.major != DEVBRIDGE_RUNTIME_API_MAJOR) {
    PyErr_Format(PyExc_RuntimeError,
                 "devbridge: the runtime table has major version %u, this launcher was built for %u; "
                 "clear the Triton cache (TRITON_CACHE_DIR) so the launcher is rebuilt",
                 found->header.major, static_cast<unsigned>(DEVBRIDGE_RUNTIME_API_MAJOR));
    return nullptr;
  }
  table = found;
  return table;
}

class LaunchScope {
 public:
  LaunchScope() : table_(RuntimeTable()) {
    if (table_ != nullptr && table_->get_current_device(kDLExtDev, &device_) != 0) {
      PyErr_Format(PyExc_RuntimeError, "devbridge: reading the plugin's current device failed: %s",
                   table_->get_last_error());
      table_ = nullptr;
    }
  }
  LaunchScope(const LaunchScope&) = delete;
  LaunchScope& operator=(const LaunchScope&) = delete;
  ~LaunchScope() {
    if (table_ == nullptr) return;
    for (void* token : tokens_) (void)table_->scratch_free(token);
  }

  /*! \brief False when the table or the device could not be had (a Python error is set). */
  bool ok() const { return table_ != nullptr; }

  /*!
   * \brief `bytes` of device memory from the framework allocator on the current
   *  stream, which must be `stream`; NULL with a Python error set otherwise.
   */
  void* allocate(uint64_t bytes, void* stream) {
    if (table_ == nullptr) return nullptr;
    void* current = nullptr;
    if (table_->current_stream(kDLExtDev, device_, &current) != 0) {
      PyErr_Format(PyExc_RuntimeError, "devbridge: reading the current stream failed: %s", table_->get_last_error());
      return nullptr;
    }
    if (current != stream) {
      PyErr_Format(PyExc_ValueError,
                   "devbridge: the Ascend kernel's workspace and lock come from the plugin's allocator on the "
                   "current stream (%p), but the kernel launches on stream %p; make the launch stream current "
                   "(`with torch.Stream(...)`) before launching",
                   current, stream);
      return nullptr;
    }
    void* pointer = nullptr;
    void* token = nullptr;
    if (table_->scratch_alloc(kDLExtDev, device_, static_cast<size_t>(bytes), &pointer, &token) != 0) {
      PyErr_Format(PyExc_RuntimeError, "devbridge: allocating %llu bytes for an Ascend kernel failed: %s",
                   static_cast<unsigned long long>(bytes), table_->get_last_error());
      return nullptr;
    }
    tokens_.push_back(token);
    return pointer;
  }

  /*!
   * \brief Runs the launch body (the generated `launch_call`) on this thread
   *  and turns a non-zero runtime status into a Python RuntimeError. No
   *  synchronization: errors are those of the enqueue.
   */
  template <class Body>
  void run(Body&& body, const char* kernel_name) {
    const auto status = body();
    if (status != 0 && !PyErr_Occurred()) {
      PyErr_Format(PyExc_RuntimeError, "devbridge: launching Ascend kernel '%s' failed with CANN runtime error %d",
                   kernel_name, static_cast<int>(status));
    }
  }

 private:
  const DevbridgeRuntimeAPI* table_;
  int32_t device_ = 0;
  std::vector<void*> tokens_;
};

}  // namespace devbridge_ascend

#endif  // DEVBRIDGE_ASCEND_LAUNCH_SUPPORT_H_
