/*!
 * \file devbridge/c_runtime_api.h
 * \brief devbridge's runtime table: what a kernel-side C library needs from the
 *  framework that DLPack's exchange table does not give it.
 *
 * The table is handed over as a PyCapsule named "devbridge_runtime_api"
 * (`devbridge.runtime_api()`). Kernel-side code includes only this
 * header and <dlpack/dlpack.h>-compatible integers: no torch, no vendor header.
 *
 * Devices are named with DLPack device types (kDLCPU = 1, kDLCUDA = 2,
 * kDLExtDev = 12 for the PrivateUse1 plugin, 21 = kDLAscend when the
 * transition mode is on), so a consumer needs no torch enum.
 *
 * Errors: every function returns 0 on success and -1 on failure; the message
 * is then available from `get_last_error` on the same thread until the next
 * failing call. No function throws; none needs the GIL.
 *
 * Versioning (same rule as DLPack's): the `header` prefix never changes. A
 * minor bump only appends fields at the end; a consumer compiled against minor
 * M may read the fields of minor <= table.minor. A major bump changes layout:
 * a consumer seeing another major must not read past the header.
 */
#ifndef DEVBRIDGE_C_RUNTIME_API_H_
#define DEVBRIDGE_C_RUNTIME_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DEVBRIDGE_RUNTIME_API_MAJOR 1
#define DEVBRIDGE_RUNTIME_API_MINOR 2
/*! \brief Name of the PyCapsule that carries a `DevbridgeRuntimeAPI*`. */
#define DEVBRIDGE_RUNTIME_API_CAPSULE_NAME "devbridge_runtime_api"

/*! \brief Stable prefix of every version of the table. */
typedef struct {
  uint32_t major; /*!< DEVBRIDGE_RUNTIME_API_MAJOR of the producer */
  uint32_t minor; /*!< DEVBRIDGE_RUNTIME_API_MINOR of the producer */
  size_t size;    /*!< sizeof(DevbridgeRuntimeAPI) of the producer */
} DevbridgeRuntimeAPIHeader;

/*!
 * \brief Optional submission hook for plugins with a host task queue
 *  (torch_npu's style). When one is registered for a device type, devbridge's
 *  launcher hands every launch on it to the hook as a closure instead of
 *  calling the kernel runtime directly.
 *
 *  Contract: returning 0 means the hook took the closure and will call
 *  `run(ctx, stream)` exactly once, on any thread, at the point of its queue
 *  where the launch belongs (`stream` is the one it was given, or the native
 *  stream the queue maps it to). `run` enqueues the kernel and frees `ctx`
 *  (parameter copies, scratch memory); it returns 0, or -1 when the kernel
 *  runtime refused the launch (the hook reports that as its queue reports
 *  errors). Returning -1 means the hook did not take the closure and never
 *  calls `run`: the launcher frees `ctx` and raises.
 *  \param device_type, device_id the DLPack device of the launch.
 *  \param run executes the launch; \param ctx is opaque to the hook.
 */
typedef int (*DevbridgeSubmitFn)(int32_t device_type, int32_t device_id, void* stream,
                                 int (*run)(void* ctx, void* stream), void* ctx);

typedef struct {
  /*! \brief Must be first: {major, minor, size}. */
  DevbridgeRuntimeAPIHeader header;
  /*!
   * \brief Number of devices of `device_type`.
   * \return 0 on success, -1 (unknown or unavailable device type) on failure.
   */
  int (*device_count)(int32_t device_type, int32_t* out_count);
  /*! \brief The calling thread's current device index of `device_type`. */
  int (*get_current_device)(int32_t device_type, int32_t* out_device_id);
  /*! \brief Set the calling thread's current device of `device_type`. */
  int (*set_current_device)(int32_t device_type, int32_t device_id);
  /*!
   * \brief The framework's current stream of (device_type, device_id) on the
   *  calling thread, as the backend's native handle (cudaStream_t, the
   *  plugin's stream pointer, ...). Writes NULL for kDLCPU.
   *  Fails (never silently NULL) when the plugin exposes no native handle.
   */
  int (*current_stream)(int32_t device_type, int32_t device_id, void** out_stream);
  /*!
   * \brief The submission hook registered for `device_type`, or NULL in
   *  *out_hook when none is (then launch directly). Reserved for launchers.
   */
  int (*get_submit_hook)(int32_t device_type, DevbridgeSubmitFn* out_hook);
  /*! \brief Last error message of the calling thread; never NULL ("" if none). */
  const char* (*get_last_error)(void);
  /*!
   * \brief Block the host until the current stream of (device_type, device_id)
   *  has finished its queued work. A no-op for kDLCPU. Meant for tests and
   *  diagnostics: launch paths never synchronise.
   */
  int (*synchronize_current_stream)(int32_t device_type, int32_t device_id);
  /*!
   * \brief Scratch memory from the framework allocator of (device_type,
   *  device_id), allocated on that device's current stream. Writes the device
   *  pointer to *out_ptr (NULL when nbytes == 0) and an opaque token to
   *  *out_token. Release it with scratch_free(token) right after enqueueing the
   *  work that uses it: the allocator's stream semantics keep the block from
   *  being reused before that work is ordered (same contract as a tensor freed
   *  right after a launch).
   */
  int (*scratch_alloc)(int32_t device_type, int32_t device_id, size_t nbytes, void** out_ptr,
                       void** out_token);
  /*! \brief Release a token from scratch_alloc. NULL is accepted (no-op). */
  int (*scratch_free)(void* token);

  /* ---- minor 1 (read only when header.minor >= 1) ---- */

  /*!
   * \brief Make `stream`, a native stream of (device_type, device_id), wait
   *  for the work queued so far on that device's current stream: an event
   *  recorded on the current stream and waited on by `stream`, with no host
   *  synchronisation. This is what DLPack's `__dlpack__(stream=...)` asks of
   *  a producer, for consumers written in C. A no-op when `stream` is the
   *  current stream. kDLCPU has no streams: `stream` must be NULL (no-op).
   *
   *  devbridge learns which c10 stream `stream` is from the plugin's
   *  external-stream hook (DevbridgeExternalStreamFn). Without one it only
   *  recognises the device's current and default streams, and fails for any
   *  other stream with a message naming the fix.
   *  \since minor 1
   */
  int (*wait_current_stream)(int32_t device_type, int32_t device_id, void* stream);

  /* ---- minor 2 (read only when header.minor >= 2): graph capture ---- */

  /*!
   * \brief Whether `stream`, a native stream of (device_type, device_id), is
   *  capturing: writes a DevbridgeCaptureStatus (c_graph_api.h: 0 none, 1
   *  active, 2 invalidated) to *out_status, as the plugin's graph table
   *  answers; 0 when the plugin registered none. Kernel-side code that must
   *  not synchronise or allocate outside the stream during a capture asks it.
   *  \since minor 2
   */
  int (*stream_capture_status)(int32_t device_type, int32_t device_id, void* stream, int32_t* out_status);
  /*!
   * \brief 0 when a launch on `stream` may go through the device type's submit
   *  hook; -1, with a message naming the fix, when the stream captures and the
   *  plugin's graph table does not declare its hook capture-safe
   *  (DEVBRIDGE_GRAPH_SUBMIT_HOOK_CAPTURES). Launchers ask it before handing a
   *  launch to a hook.
   *  \since minor 2
   */
  int (*check_submit_hook)(int32_t device_type, int32_t device_id, void* stream);
} DevbridgeRuntimeAPI;

/*!
 * \brief Stream resolver a plugin may register when its device guard does not
 *  override c10's getStreamNativeHandle (torch < 2.11 style plugins):
 *  maps a c10 stream (device index + StreamId) to the native stream handle.
 *  Registered through `devbridge.register_stream_resolver(capsule)` with a
 *  PyCapsule named "devbridge_stream_resolver" holding this function pointer.
 *  \return 0 on success; -1 on failure (then *out_stream is ignored).
 */
typedef int (*DevbridgeStreamResolver)(int32_t device_index, int64_t stream_id,
                                       void** out_stream);
#define DEVBRIDGE_STREAM_RESOLVER_CAPSULE_NAME "devbridge_stream_resolver"

/*!
 * \brief Fast current-stream query a plugin may register
 *  (`devbridge.register_current_stream_query(capsule)`, a PyCapsule named
 *  "devbridge_current_stream" holding this function pointer). devbridge then
 *  asks it for the current native stream instead of calling the device
 *  guard's getStream + getStreamNativeHandle: one call into the plugin, which
 *  should answer with one thread-local read.
 *
 *  Contract: writes the calling thread's current native stream of device
 *  `device_index` (the handle getStreamNativeHandle(getStream(device)) would
 *  return) to *out_stream and returns 0. devbridge calls it only with an
 *  index in [0, device count), from any thread, with or without the GIL: it
 *  must not take the GIL, block, or throw. Returns -1 on failure; devbridge
 *  then reports that the plugin's query failed for that device.
 *  A registered stream resolver takes precedence over the query.
 */
typedef int (*DevbridgeCurrentStreamFn)(int32_t device_index, void** out_stream);
#define DEVBRIDGE_CURRENT_STREAM_CAPSULE_NAME "devbridge_current_stream"

/*!
 * \brief External-stream hook a plugin may register
 *  (`devbridge.register_external_stream_hook(capsule)`, a PyCapsule named
 *  "devbridge_external_stream" holding this function pointer): the c10
 *  stream under which the plugin's device guard knows a native stream that
 *  a DLPack consumer handed over (`__dlpack__(stream=...)`,
 *  `wait_current_stream`). Like c10::cuda::getStreamFromExternal.
 *
 *  Contract: when `native_stream` is a stream of device `device_index`,
 *  writes a c10 StreamId to *out_stream_id such that the guard's
 *  getStreamNativeHandle, record and block accept
 *  Stream(PrivateUse1:device_index, id) as that stream, and returns 0.
 *  Returns -1 when it is not a stream of that device. No GIL, no throw.
 */
typedef int (*DevbridgeExternalStreamFn)(int32_t device_index, void* native_stream,
                                         int64_t* out_stream_id);
#define DEVBRIDGE_EXTERNAL_STREAM_CAPSULE_NAME "devbridge_external_stream"

/*! \brief Name of the PyCapsule that carries a DevbridgeSubmitFn to register. */
#define DEVBRIDGE_SUBMIT_HOOK_CAPSULE_NAME "devbridge_submit_hook"

/*! \brief DLPack device type value of kDLAscend (DLPack main, after v1.3). */
#define DEVBRIDGE_DL_ASCEND 21

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // DEVBRIDGE_C_RUNTIME_API_H_
