/*
 * The floor for bench/triton_launch.py: a bare cuLaunchKernel loop in C.
 *
 * Compiled at run time by the benchmark (cc -O2 -shared -fPIC) and called
 * through ctypes. No CUDA headers: the few driver types are declared here and
 * the driver is opened with dlopen("libcuda.so.1"), so the harness builds on a
 * machine without CUDA (bench/triton_launch.py --self-check).
 *
 *   bare_init()               open libcuda.so.1, resolve the entry points
 *   bare_ensure_context(dev)  make `dev`'s primary context current if none is
 *   bare_launch_ns(...)       time `iters` cuLaunchKernel calls, ns per launch
 *   bare_error()              what the last failure was
 *   bare_use_fake_launch()    replace cuLaunchKernel by a counting no-op
 *   bare_fake_calls()         how often the no-op ran (self-check)
 *
 * Failures return a negative value and leave a message for bare_error().
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <stdio.h>
#include <time.h>

typedef int CUresult; /* CUDA_SUCCESS == 0 */
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;

typedef CUresult (*LaunchKernelFn)(CUfunction f, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                                   unsigned block_x, unsigned block_y, unsigned block_z,
                                   unsigned shared_bytes, CUstream stream, void** params, void** extra);
typedef CUresult (*CtxGetCurrentFn)(CUcontext* context);
typedef CUresult (*CtxSetCurrentFn)(CUcontext context);
typedef CUresult (*DeviceGetFn)(CUdevice* device, int ordinal);
typedef CUresult (*PrimaryCtxRetainFn)(CUcontext* context, CUdevice device);
typedef CUresult (*InitFn)(unsigned flags);
typedef CUresult (*GetErrorStringFn)(CUresult error, const char** text);

static LaunchKernelFn g_launch;
static CtxGetCurrentFn g_ctx_get_current;
static CtxSetCurrentFn g_ctx_set_current;
static DeviceGetFn g_device_get;
static PrimaryCtxRetainFn g_primary_ctx_retain;
static InitFn g_init;
static GetErrorStringFn g_get_error_string;
static long long g_fake_calls;
static char g_error[512];

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void record_cuda_error(const char* what, CUresult result) {
  const char* text = NULL;
  if (g_get_error_string == NULL || g_get_error_string(result, &text) != 0 || text == NULL) {
    text = "unknown error";
  }
  snprintf(g_error, sizeof(g_error), "%s failed: CUresult %d (%s)", what, result, text);
}

/* dlsym returns void*; going through a union avoids the object-to-function
 * pointer cast that -Wpedantic flags. */
static void* resolve(void* library, const char* name) {
  void* symbol = dlsym(library, name);
  if (symbol == NULL) snprintf(g_error, sizeof(g_error), "dlsym(%s): %s", name, dlerror());
  return symbol;
}

#define RESOLVE(library, name, slot)                 \
  do {                                               \
    union {                                          \
      void* object;                                  \
      __typeof__(slot) function;                     \
    } u_;                                            \
    u_.object = resolve(library, name);              \
    if (u_.object == NULL) return -2;                \
    slot = u_.function;                              \
  } while (0)

/* 0 on success, -1 when libcuda.so.1 cannot be opened, -2 when a symbol is
 * missing, -3 when cuInit fails. */
int bare_init(void) {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    snprintf(g_error, sizeof(g_error), "dlopen(libcuda.so.1): %s", dlerror());
    return -1;
  }
  RESOLVE(library, "cuGetErrorString", g_get_error_string);
  RESOLVE(library, "cuInit", g_init);
  RESOLVE(library, "cuCtxGetCurrent", g_ctx_get_current);
  RESOLVE(library, "cuCtxSetCurrent", g_ctx_set_current);
  RESOLVE(library, "cuDeviceGet", g_device_get);
  RESOLVE(library, "cuDevicePrimaryCtxRetain", g_primary_ctx_retain);
  RESOLVE(library, "cuLaunchKernel", g_launch);
  CUresult result = g_init(0);
  if (result != 0) {
    record_cuda_error("cuInit", result);
    return -3;
  }
  return 0;
}

/* Makes `ordinal`'s primary context current on this thread when no context
 * is (torch.cuda and devbridge normally have done so already). Returns 1 when
 * a context was already current, 0 when it set one, negative on failure. */
int bare_ensure_context(int ordinal) {
  if (g_ctx_get_current == NULL) {
    snprintf(g_error, sizeof(g_error), "bare_init() has not succeeded");
    return -1;
  }
  CUcontext current = NULL;
  CUresult result = g_ctx_get_current(&current);
  if (result != 0) {
    record_cuda_error("cuCtxGetCurrent", result);
    return -2;
  }
  if (current != NULL) return 1;
  CUdevice device = 0;
  CUcontext primary = NULL;
  result = g_device_get(&device, ordinal);
  if (result != 0) {
    record_cuda_error("cuDeviceGet", result);
    return -3;
  }
  result = g_primary_ctx_retain(&primary, device);
  if (result != 0) {
    record_cuda_error("cuDevicePrimaryCtxRetain", result);
    return -4;
  }
  result = g_ctx_set_current(primary);
  if (result != 0) {
    record_cuda_error("cuCtxSetCurrent", result);
    return -5;
  }
  return 0;
}

/* Times `iters` launches of `function` on a (gx, 1, 1) grid of (block_x, 1, 1)
 * blocks with `shared` bytes of dynamic shared memory on `stream`; `params`
 * is the kernelParams array (one pointer per parameter, the two scratch
 * pointers included). Returns nanoseconds per launch, or a negative value. */
double bare_launch_ns(void* function, unsigned gx, void* stream, void** params, int iters, int block_x,
                      unsigned shared) {
  if (g_launch == NULL) {
    snprintf(g_error, sizeof(g_error), "no launch function: call bare_init() or bare_use_fake_launch()");
    return -1.0;
  }
  if (iters <= 0 || block_x <= 0) {
    snprintf(g_error, sizeof(g_error), "iters (%d) and block_x (%d) must be positive", iters, block_x);
    return -1.0;
  }
  const LaunchKernelFn launch = g_launch;
  CUfunction f = (CUfunction)function;
  CUstream s = (CUstream)stream;
  double start = now_ns();
  for (int i = 0; i < iters; ++i) {
    CUresult result = launch(f, gx, 1, 1, (unsigned)block_x, 1, 1, shared, s, params, NULL);
    if (result != 0) {
      record_cuda_error("cuLaunchKernel", result);
      return -2.0;
    }
  }
  return (now_ns() - start) / (double)iters;
}

const char* bare_error(void) { return g_error; }

static CUresult fake_launch(CUfunction f, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                            unsigned block_y, unsigned block_z, unsigned shared_bytes, CUstream stream,
                            void** params, void** extra) {
  (void)f, (void)grid_x, (void)grid_y, (void)grid_z, (void)block_x, (void)block_y, (void)block_z;
  (void)shared_bytes, (void)stream, (void)params, (void)extra;
  ++g_fake_calls;
  return 0;
}

/* For the self-check without a GPU: bare_launch_ns then calls a no-op. */
void bare_use_fake_launch(void) {
  g_launch = fake_launch;
  g_fake_calls = 0;
}

long long bare_fake_calls(void) { return g_fake_calls; }
