/*
 * Timing loops for the DLPack C exchange table, compiled at run time by
 * bench/dlpack_exchange.py and called through ctypes.PyDLL (so the GIL is
 * held, as it is for a real consumer such as TVM-FFI's argument setter).
 *
 * Each bench_* function calls one table function `iters` times in a tight C
 * loop and returns nanoseconds per call, so what is measured is the table,
 * not ctypes: one ctypes call is amortised over the whole loop. On failure a
 * function returns a negative number with a Python exception set; PyDLL turns
 * that into the exception.
 *
 * Only <Python.h> and DLPack's C header (PyTorch ships it as ATen/dlpack.h)
 * are needed: a consumer sees nothing but the table.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <ATen/dlpack.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The table functions report failure with a Python exception already set;
 * make sure one is, so PyDLL raises instead of returning a bogus time. */
static double fail(const char* what) {
  if (!PyErr_Occurred()) {
    PyErr_Format(PyExc_RuntimeError, "%s failed without setting a Python exception", what);
  }
  return -1.0;
}

/* managed_tensor_from_py_object_no_sync, then the deleter it handed out. */
double bench_export_owning(const DLPackExchangeAPI* api, PyObject* tensor, int64_t iters) {
  DLManagedTensorVersioned* managed = NULL;
  double start = now_ns();
  for (int64_t i = 0; i < iters; ++i) {
    if (api->managed_tensor_from_py_object_no_sync(tensor, &managed) != 0) {
      return fail("managed_tensor_from_py_object_no_sync");
    }
    if (managed->deleter != NULL) managed->deleter(managed);
  }
  return (now_ns() - start) / (double)iters;
}

/* dltensor_from_py_object_no_sync into a stack DLTensor (no allocation). */
double bench_export_non_owning(const DLPackExchangeAPI* api, PyObject* tensor, int64_t iters) {
  if (api->dltensor_from_py_object_no_sync == NULL) {
    PyErr_SetString(PyExc_NotImplementedError, "the table has no dltensor_from_py_object_no_sync");
    return -1.0;
  }
  DLTensor view;
  double start = now_ns();
  for (int64_t i = 0; i < iters; ++i) {
    if (api->dltensor_from_py_object_no_sync(tensor, &view) != 0) {
      return fail("dltensor_from_py_object_no_sync");
    }
  }
  return (now_ns() - start) / (double)iters;
}

/*
 * managed_tensor_to_py_object_no_sync on `batch` managed tensors exported
 * beforehand (outside the timed region), then releasing the `batch` Python
 * tensors it returned (Py_DECREF, which runs the DLPack deleter).
 * out_release_ns receives the release cost per tensor.
 */
double bench_import(const DLPackExchangeAPI* api, PyObject* tensor, int64_t batch,
                    double* out_release_ns) {
  DLManagedTensorVersioned** managed = calloc((size_t)batch, sizeof(*managed));
  PyObject** imported = calloc((size_t)batch, sizeof(*imported));
  double result = -1.0;
  int64_t exported = 0, done = 0;
  if (managed == NULL || imported == NULL) {
    PyErr_NoMemory();
    goto cleanup;
  }
  for (; exported < batch; ++exported) {
    if (api->managed_tensor_from_py_object_no_sync(tensor, &managed[exported]) != 0) {
      fail("managed_tensor_from_py_object_no_sync");
      goto cleanup;
    }
  }
  double start = now_ns();
  for (; done < batch; ++done) {
    if (api->managed_tensor_to_py_object_no_sync(managed[done], (void**)&imported[done]) != 0) {
      fail("managed_tensor_to_py_object_no_sync");
      break;
    }
  }
  double imported_at = now_ns();
  if (done == batch) result = (imported_at - start) / (double)batch;
  for (int64_t i = 0; i < done; ++i) Py_DECREF(imported[i]);
  *out_release_ns = (now_ns() - imported_at) / (double)(done > 0 ? done : 1);
cleanup:
  /* Managed tensors never handed to the importer (it steals the ones it got),
   * including the one whose import failed: the caller owns that one. */
  if (managed != NULL) {
    for (int64_t i = done; i < exported; ++i) {
      if (managed[i]->deleter != NULL) managed[i]->deleter(managed[i]);
    }
  }
  free(managed);
  free(imported);
  return result;
}

static char allocator_error[512];

static void record_allocator_error(void* error_ctx, const char* kind, const char* message) {
  (void)error_ctx;
  snprintf(allocator_error, sizeof(allocator_error), "%s: %s", kind, message);
}

/* managed_tensor_allocator for a 1-D float32 tensor of `numel` elements on
 * `device`, then its deleter. */
double bench_allocator(const DLPackExchangeAPI* api, int32_t device_type, int32_t device_id,
                       int64_t numel, int64_t iters) {
  int64_t shape[1] = {numel};
  DLTensor prototype = {0};
  prototype.device.device_type = (DLDeviceType)device_type;
  prototype.device.device_id = device_id;
  prototype.ndim = 1;
  prototype.dtype.code = kDLFloat;
  prototype.dtype.bits = 32;
  prototype.dtype.lanes = 1;
  prototype.shape = shape;
  DLManagedTensorVersioned* managed = NULL;
  double start = now_ns();
  for (int64_t i = 0; i < iters; ++i) {
    if (api->managed_tensor_allocator(&prototype, &managed, NULL, record_allocator_error) != 0) {
      PyErr_Format(PyExc_RuntimeError, "managed_tensor_allocator failed: %s", allocator_error);
      return -1.0;
    }
    if (managed->deleter != NULL) managed->deleter(managed);
  }
  return (now_ns() - start) / (double)iters;
}

/* current_work_stream(device_type, device_id); *out_stream gets its answer. */
double bench_current_work_stream(const DLPackExchangeAPI* api, int32_t device_type,
                                 int32_t device_id, int64_t iters, void** out_stream) {
  void* stream = NULL;
  double start = now_ns();
  for (int64_t i = 0; i < iters; ++i) {
    if (api->current_work_stream((DLDeviceType)device_type, device_id, &stream) != 0) {
      return fail("current_work_stream");
    }
  }
  double elapsed = now_ns() - start;
  *out_stream = stream;
  return elapsed / (double)iters;
}
