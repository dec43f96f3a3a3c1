/*!
 * \file simdev/runtime.h
 * \brief The simdev runtime: a CPU-simulated accelerator with a CUDA-like C API.
 *
 * simdev is devbridge's reference device. Its purpose is to make every
 * stream-ordering mistake observable on a machine without an accelerator, so
 * its semantics follow a real asynchronous device closely:
 *
 *  - N virtual devices (`SIMDEV_DEVICE_COUNT`, default 2, at most 64), a
 *    per-host-thread current device (every thread starts on 0).
 *  - Device memory is host memory that the runtime hands out and tracks; every
 *    pointer passed where device memory is expected is validated against the
 *    live allocations of that device. Each device has a byte capacity
 *    (`SIMDEV_MEMORY_CAPACITY`, default 4 GiB) so out-of-memory is testable.
 *    Allocations are 256-byte aligned.
 *  - Streams: each device has a default stream, plus streams created by the
 *    user. Every stream owns one worker thread that executes the stream's queue
 *    strictly in order. Enqueueing never waits for queued work.
 *  - Events: recorded on a stream, waited on by another stream, queried,
 *    synchronized, timed.
 *  - A debug delay (`SIMDEV_OP_DELAY_US` or sdSetOpDelay) sleeps before every
 *    queued operation that does work (copy, memset, host function, kernel;
 *    not event records or waits), so that a missing cross-stream wait
 *    produces stale data deterministically.
 *
 * Environment: the SIMDEV_* variables are plain decimal integers, read once,
 * on the first call that needs them. A malformed value makes every such call
 * fail with sdErrorInvalidValue and a message naming the variable.
 *
 * Handles (streams, events, modules, functions) are opaque ids that are never
 * reused: a destroyed handle, or a handle of another kind, is always rejected
 * with the kind's "invalid" code rather than aliasing a newer object.
 *
 * Errors: every function returns an sdError_t. On failure the calling thread's
 * last-error message (sdGetLastErrorString) names the function, the bad
 * argument and what to do; outputs are left untouched. No C++ exception ever
 * leaves the library. Errors raised by queued work (a failing host function
 * or kernel) are sticky on the stream: the first unreported one is returned
 * as sdErrorLaunchFailure by the next sdStreamSynchronize / sdStreamQuery /
 * sdEventSynchronize of that stream (or sdDeviceSynchronize of its device,
 * sdMemcpy on it, sdStreamDestroy of it) and then cleared. Work queued after
 * the failure still runs.
 *
 * Thread safety: every function may be called from any host thread, including
 * a stream's worker thread (for example from a host function), except the
 * synchronizing functions, which must not wait on the worker's own stream:
 * sdStreamSynchronize, sdMemcpy and sdStreamDestroy of the own stream,
 * sdDeviceSynchronize of the own device, and sdEventSynchronize of an event
 * captured later on the own stream return sdErrorDeadlock instead of hanging.
 * (Queueing more work on the own stream is fine.)
 *
 * Process exit: when the library's static destructors run, every worker
 * finishes its queued work and is joined; queueing work after that point
 * fails with sdErrorInvalidStream. Runtime state is never destroyed, so calls
 * from other libraries' static destructors (sdFree, synchronize) stay safe.
 *
 * This header is plain C and depends only on <stddef.h> and <stdint.h>.
 */
#ifndef SIMDEV_RUNTIME_H_
#define SIMDEV_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define SIMDEV_API __declspec(dllexport)
#else
#define SIMDEV_API __attribute__((visibility("default")))
#endif

/*! \brief Runtime API version: bumped on every change of this header. */
#define SIMDEV_RUNTIME_VERSION_MAJOR 1
#define SIMDEV_RUNTIME_VERSION_MINOR 4

/*! \brief Error codes. Values are stable; new codes get new numbers. */
typedef enum {
  sdSuccess = 0,
  /*! \brief A queued operation has not finished (sdStreamQuery, sdEventQuery). */
  sdErrorNotReady = 1,
  /*! \brief An argument is NULL, out of range or otherwise malformed. */
  sdErrorInvalidValue = 2,
  /*! \brief The device index is not in [0, device count). */
  sdErrorInvalidDevice = 3,
  /*! \brief The pointer (range) is not a live allocation of the expected device. */
  sdErrorInvalidDevicePointer = 4,
  /*! \brief The device's capacity would be exceeded. */
  sdErrorMemoryAllocation = 5,
  /*! \brief The stream handle is not a live stream (or it stopped at process exit). */
  sdErrorInvalidStream = 6,
  /*! \brief The event handle is not a live event, or was never recorded (elapsed time). */
  sdErrorInvalidEvent = 7,
  /*! \brief Timing was requested from an event created with sdEventDisableTiming. */
  sdErrorTimingDisabled = 8,
  /*! \brief dlopen failed, or the module (or function) handle is not live. */
  sdErrorInvalidModule = 9,
  /*! \brief The kernel symbol is not in the module. */
  sdErrorNotFound = 10,
  /*! \brief A host function or kernel queued on the stream reported failure. */
  sdErrorLaunchFailure = 11,
  /*! \brief A call would wait on the calling worker's own stream (deadlock). */
  sdErrorDeadlock = 12,
  /*! \brief The operation cannot be captured (a synchronisation, an event on a
   *  capturing stream); the capture is invalidated. Since 1.2. */
  sdErrorStreamCaptureUnsupported = 13,
  /*! \brief The stream's capture was invalidated by an earlier operation; end it
   *  with sdStreamEndCapture. Since 1.2. */
  sdErrorStreamCaptureInvalidated = 14,
  /*! \brief The graph (or executable graph) handle is not live, or is of the other kind. Since 1.2. */
  sdErrorInvalidGraph = 15,
  /*! \brief Anything else; the message says what. */
  sdErrorUnknown = 999
} sdError_t;

/*! \brief Direction of a copy; each side's pointer is validated accordingly. */
typedef enum {
  sdMemcpyHostToDevice = 1,
  sdMemcpyDeviceToHost = 2,
  sdMemcpyDeviceToDevice = 3, /*!< either device; may cross devices */
  sdMemcpyHostToHost = 4
} sdMemcpyKind;

/*! \brief Event creation flags (bitmask). */
#define sdEventDefault 0u
#define sdEventDisableTiming 1u

typedef struct sdStream_st* sdStream_t; /*!< opaque; NULL is never a valid stream */
typedef struct sdEvent_st* sdEvent_t;   /*!< opaque */
typedef struct sdModule_st* sdModule_t; /*!< opaque */
typedef struct sdFunction_st* sdFunction_t; /*!< opaque; lives as long as its module */
typedef struct sdGraph_st* sdGraph_t;         /*!< opaque: a captured graph (since 1.2) */
typedef struct sdGraphExec_st* sdGraphExec_t; /*!< opaque: an instantiated graph (since 1.2) */

/*! \brief Capture state of a stream (since 1.2). */
typedef enum {
  sdStreamCaptureStatusNone = 0,        /*!< not capturing */
  sdStreamCaptureStatusActive = 1,      /*!< capturing: work is recorded, not run */
  sdStreamCaptureStatusInvalidated = 2  /*!< capturing, but an uncapturable operation broke it */
} sdStreamCaptureStatus;

/*!
 * \brief A host function queued on a stream. Runs on the stream's worker.
 * \return 0 on success; non-zero marks the stream failed (sdErrorLaunchFailure).
 */
typedef int (*sdHostFn_t)(void* user_data);

/*! \brief What a kernel program sees: its program id, the grid and its arguments' sizes. */
typedef struct {
  uint32_t program_id[3]; /*!< x, y, z of this program */
  uint32_t grid[3];       /*!< grid size in x, y, z */
  int device;             /*!< the device the kernel runs on */
  /* Since 1.1: */
  int num_args;             /*!< the num_args of the launch */
  const size_t* arg_sizes;  /*!< the arg_sizes of the launch (num_args entries; valid during the call) */
} sdKernelContext;

/*!
 * \brief Signature of a kernel exported by a module (an `extern "C"` symbol of
 *  a shared library). `args[i]` points at the i-th argument's value (a device
 *  pointer argument is passed as a pointer to the pointer), as in
 *  cuLaunchKernel. Return 0 on success, non-zero on failure.
 */
typedef int (*sdKernelFn_t)(const sdKernelContext* ctx, void** args);

/*!
 * \brief Called by a kernel or host function while it runs on a stream's worker,
 *  before it returns non-zero: `message` (copied) becomes part of the failure the
 *  stream records, after the runtime's own description (which kernel, which
 *  program, which stream), so that the cause reaches whoever synchronizes, not
 *  only the worker. A later call replaces it; ignored when the function returns 0.
 *  sdErrorInvalidValue when `message` is NULL or the caller is not a stream's
 *  worker. Since 1.3.
 */
SIMDEV_API sdError_t sdSetWorkFailureMessage(const char* message);

/* ---------------------------------------------------------------- errors */

/*!
 * \brief Message of the last error on the calling thread ("" if none). Never NULL.
 *  Successful calls and sdErrorNotReady statuses leave it unchanged.
 */
SIMDEV_API const char* sdGetLastErrorString(void);
/*! \brief Symbolic name of a code, e.g. "sdErrorInvalidDevice"; "sdErrorUnrecognized"
 *  for a value that is not a code. Never NULL. */
SIMDEV_API const char* sdGetErrorName(sdError_t error);

/* ---------------------------------------------------------------- devices */

SIMDEV_API sdError_t sdGetDeviceCount(int* out_count);
/*! \brief Set the calling thread's current device. */
SIMDEV_API sdError_t sdSetDevice(int device);
SIMDEV_API sdError_t sdGetDevice(int* out_device);
/*! \brief Wait for all streams of the device (work queued before the call). */
SIMDEV_API sdError_t sdDeviceSynchronize(int device);

/* ---------------------------------------------------------------- debug */

/*! \brief Sleep this many microseconds before each queued copy, memset, host function
 *  and kernel (all streams; takes effect for items that start after the call). */
SIMDEV_API sdError_t sdSetOpDelay(uint32_t microseconds);
SIMDEV_API sdError_t sdGetOpDelay(uint32_t* out_microseconds);

/*!
 * \brief Fault injection, for tests of the error paths above the runtime (since 1.3):
 *  the `nth` kernel program grid or host function to start running from now on
 *  (1: the next one, on any stream of any device) fails instead of running, as
 *  a device fault would: the rest of its work is skipped and its stream records
 *  sdErrorLaunchFailure, with a message saying the fault was injected, for the
 *  next synchronization to report. 0 disarms. Copies, memsets, event records
 *  and waits are not counted. One fault per arming.
 */
SIMDEV_API sdError_t sdInjectKernelFault(uint64_t nth);
/*! \brief How many faults sdInjectKernelFault has injected in this process (since 1.3). */
SIMDEV_API sdError_t sdGetInjectedKernelFaults(uint64_t* out_count);

/* ---------------------------------------------------------------- memory */

/*! \brief Allocate `size` bytes (may be 0 → a unique non-NULL pointer) on `device`. */
SIMDEV_API sdError_t sdMalloc(void** out_ptr, size_t size, int device);
/*! \brief Free a pointer returned by sdMalloc. NULL is a no-op. Does not wait for queued work.
 *  Any other pointer (interior, already freed, host) is sdErrorInvalidDevicePointer. */
SIMDEV_API sdError_t sdFree(void* ptr);
/*! \brief Device of a live allocation containing `ptr`, or sdErrorInvalidDevicePointer. */
SIMDEV_API sdError_t sdPointerGetDevice(const void* ptr, int* out_device);
/*! \brief Bytes in use (sum of requested sizes) and capacity of a device; both outputs required. */
SIMDEV_API sdError_t sdMemGetInfo(int device, size_t* out_used, size_t* out_capacity);

/*!
 * \brief Copy `size` bytes on `stream`, in order with its other work.
 *  Device ranges are validated at enqueue time: [ptr, ptr + size) must lie in
 *  one live allocation, on the stream's device for HostToDevice and
 *  DeviceToHost, on any device for DeviceToDevice. Host pointers must be
 *  non-NULL. `size` 0 queues nothing and checks no pointer. Overlapping
 *  ranges behave like memmove. Returns without waiting.
 */
SIMDEV_API sdError_t sdMemcpyAsync(void* dst, const void* src, size_t size,
                                   sdMemcpyKind kind, sdStream_t stream);
/*! \brief sdMemcpyAsync followed by sdStreamSynchronize(stream). */
SIMDEV_API sdError_t sdMemcpy(void* dst, const void* src, size_t size,
                              sdMemcpyKind kind, sdStream_t stream);
/*! \brief Set `size` bytes of device memory (of the stream's device) to the byte
 *  `(unsigned char)value` on `stream`. `size` 0 queues nothing. */
SIMDEV_API sdError_t sdMemsetAsync(void* dst, int value, size_t size, sdStream_t stream);

/* ---------------------------------------------------------------- streams */

/*! \brief The default stream of `device` (created on first use, never destroyed). */
SIMDEV_API sdError_t sdStreamGetDefault(int device, sdStream_t* out_stream);
/*! \brief Create a stream on `device` with its own worker thread. */
SIMDEV_API sdError_t sdStreamCreate(int device, sdStream_t* out_stream);
/*!
 * \brief Wait for queued work, then destroy. Default streams cannot be destroyed
 *  (sdErrorInvalidValue). If queued work failed unreported, the stream is still
 *  destroyed and sdErrorLaunchFailure is returned.
 */
SIMDEV_API sdError_t sdStreamDestroy(sdStream_t stream);
/*! \brief Device of a stream. */
SIMDEV_API sdError_t sdStreamGetDevice(sdStream_t stream, int* out_device);
/*! \brief sdSuccess if all queued work finished, sdErrorNotReady otherwise
 *  (a sticky failure is reported first). */
SIMDEV_API sdError_t sdStreamQuery(sdStream_t stream);
/*! \brief Block until all queued work finished; reports (and clears) a sticky failure. */
SIMDEV_API sdError_t sdStreamSynchronize(sdStream_t stream);
/*! \brief Work queued on `stream` after this call waits until `event`'s current capture
 *  completes (any device). Returns at once; a never-recorded event is a no-op.
 *  Since 1.4: if work queued before the capture on its stream failed, and that
 *  failure was not reported by then, `stream` fails too ("waited for an event
 *  recorded on ... after work that failed: <cause>"), so that work waiting for
 *  failed work reports the failure wherever it is synchronized. */
SIMDEV_API sdError_t sdStreamWaitEvent(sdStream_t stream, sdEvent_t event);
/*! \brief Queue `fn(user_data)` on `stream`. Captured like any work: a graph replays
 *  `fn(user_data)` each time, so `user_data` must stay valid while the graph lives. */
SIMDEV_API sdError_t sdLaunchHostFunc(sdStream_t stream, sdHostFn_t fn, void* user_data);
/*!
 * \brief sdLaunchHostFunc whose `user_data` the runtime owns: `cleanup(user_data)` runs
 *  once no queued or captured copy of the work is left (after the work ran, or when
 *  the graphs that recorded it are destroyed and their replays have run), on whichever
 *  thread drops the last copy. `fn` may then run several times (replays). On failure
 *  the call does not take `user_data` and never calls `cleanup`. Since 1.2.
 */
SIMDEV_API sdError_t sdLaunchHostFuncWithCleanup(sdStream_t stream, sdHostFn_t fn, void* user_data,
                                                 void (*cleanup)(void* user_data));

/* ---------------------------------------------------------------- events */

/*! \brief `flags`: sdEventDefault or sdEventDisableTiming; other bits are sdErrorInvalidValue. */
SIMDEV_API sdError_t sdEventCreate(sdEvent_t* out_event, unsigned int flags);
/*! \brief Safe while queued waits still refer to the event: they keep its capture. */
SIMDEV_API sdError_t sdEventDestroy(sdEvent_t event);
/*! \brief Capture the work queued on `stream` so far; re-recording replaces the capture.
 *  The capture's time is the host steady-clock time at which the stream's worker
 *  reached it. */
SIMDEV_API sdError_t sdEventRecord(sdEvent_t event, sdStream_t stream);
/*! \brief sdSuccess if completed (or never recorded), sdErrorNotReady otherwise. */
SIMDEV_API sdError_t sdEventQuery(sdEvent_t event);
/*! \brief Wait until the capture completes; reports the capture stream's sticky failure. */
SIMDEV_API sdError_t sdEventSynchronize(sdEvent_t event);
/*! \brief Milliseconds between two completed, timed events (negative if `end` came first).
 *  sdErrorInvalidEvent if either was never recorded, sdErrorTimingDisabled if either
 *  has timing disabled, sdErrorNotReady if either has not completed. */
SIMDEV_API sdError_t sdEventElapsedTime(float* out_ms, sdEvent_t start, sdEvent_t end);

/* ---------------------------------------------------------------- modules */

/*! \brief dlopen a shared library of kernels (see sdKernelFn_t); on failure
 *  sdErrorInvalidModule with dlopen's reason. */
SIMDEV_API sdError_t sdModuleLoad(sdModule_t* out_module, const char* path);
/*! \brief Unload. Its function handles become invalid at once (sdErrorInvalidModule);
 *  the library stays mapped until launches still queued have run. */
SIMDEV_API sdError_t sdModuleUnload(sdModule_t module);
/*! \brief Look up an `extern "C"` kernel; the same name gives the same handle.
 *  sdErrorNotFound if the module has no such symbol. */
SIMDEV_API sdError_t sdModuleGetFunction(sdFunction_t* out_function, sdModule_t module,
                                         const char* name);
/*!
 * \brief Queue a grid launch on `stream`: programs run in order
 *  (x fastest, then y, then z) on the stream's worker. The argument values
 *  are copied at launch time: `arg_sizes[i]` bytes from `args[i]` (each copy
 *  aligned for any scalar type). Every grid dimension must be >= 1. If a
 *  program returns non-zero, the rest of the grid is skipped and the stream
 *  records the failure.
 */
SIMDEV_API sdError_t sdLaunchKernel(sdFunction_t function, uint32_t grid_x, uint32_t grid_y,
                                    uint32_t grid_z, void** args, const size_t* arg_sizes,
                                    int num_args, sdStream_t stream);

/* ---------------------------------------------------------------- graphs (since 1.2)
 *
 * Stream capture, after CUDA graphs: between sdStreamBeginCapture and
 * sdStreamEndCapture the work queued on the stream (copies, memsets, host
 * functions, kernels, graph launches; from any thread) is recorded instead of
 * run. A replay (sdGraphLaunch) queues copies of the recorded items, in
 * order, on the replay stream, where they run like freshly queued work (the
 * debug delay included). Pointers and argument values are the ones recorded:
 * memory the graph's work uses must stay allocated while the graph lives.
 *
 * One stream is captured, with no cross-stream dependencies: on a capturing
 * stream sdEventRecord, sdStreamWaitEvent, sdStreamSynchronize, sdStreamQuery,
 * sdMemcpy and sdStreamDestroy, and sdDeviceSynchronize of its device, fail
 * with sdErrorStreamCaptureUnsupported and invalidate the capture. Work queued
 * on an invalidated capture fails with sdErrorStreamCaptureInvalidated, and so
 * does sdStreamEndCapture, which ends the capture in every case. Other streams
 * run their work as usual meanwhile.
 */

/*! \brief Start recording `stream`'s work. sdErrorInvalidValue if it already captures. */
SIMDEV_API sdError_t sdStreamBeginCapture(sdStream_t stream);
/*! \brief Stop recording and return the recorded work as a new graph (possibly empty).
 *  sdErrorInvalidValue if the stream is not capturing; sdErrorStreamCaptureInvalidated
 *  (with the reason) if the capture was invalidated: the capture ends, no graph. */
SIMDEV_API sdError_t sdStreamEndCapture(sdStream_t stream, sdGraph_t* out_graph);
/*! \brief The capture state of `stream`. */
SIMDEV_API sdError_t sdStreamGetCaptureStatus(sdStream_t stream, sdStreamCaptureStatus* out_status);
/*! \brief Number of recorded work items in `graph`. */
SIMDEV_API sdError_t sdGraphGetNodeCount(sdGraph_t graph, size_t* out_count);
/*! \brief An executable graph of `graph`'s work; it stays valid after sdGraphDestroy(graph). */
SIMDEV_API sdError_t sdGraphInstantiate(sdGraphExec_t* out_exec, sdGraph_t graph);
/*! \brief Queue the executable's work on `stream`, a stream of the device it was captured
 *  on, as one uninterrupted sequence. Returns without waiting. */
SIMDEV_API sdError_t sdGraphLaunch(sdGraphExec_t exec, sdStream_t stream);
/*! \brief Destroy a graph. Its executables and queued replays keep what they need. */
SIMDEV_API sdError_t sdGraphDestroy(sdGraph_t graph);
/*! \brief Destroy an executable graph. Replays already queued still run. */
SIMDEV_API sdError_t sdGraphExecDestroy(sdGraphExec_t exec);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // SIMDEV_RUNTIME_H_
