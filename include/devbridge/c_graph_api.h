/*!
 * \file devbridge/c_graph_api.h
 * \brief Graph capture on a plugin device: the table a plugin registers so that
 *  devbridge (`devbridge.graphs`) can record the work queued on one of the
 *  plugin's streams and replay it, like CUDA graphs (cudaStreamBeginCapture,
 *  cudaStreamEndCapture, cudaGraphInstantiate, cudaGraphLaunch) and PyTorch's
 *  torch.cuda.CUDAGraph.
 *
 * The plugin fills one `DevbridgeGraphAPI` (static storage: devbridge keeps
 * the pointer's functions for the life of the process) and hands it over as a
 * PyCapsule named "devbridge_graph_api":
 *   devbridge.graphs.register_graph_api(capsule, "mydev")
 * from its package's `_install_devbridge()`, beside its current-stream query
 * (docs/plugin-authors.md). A plugin may restate these declarations instead
 * of including this header; the layout is the ABI.
 *
 * Handles: streams are the plugin's native streams (the handle its guard's
 * getStreamNativeHandle returns); graphs and executables are opaque to
 * devbridge and never NULL when a call succeeds. Device indices are the
 * plugin's c10 device indices (0-based).
 *
 * Life cycle: capture_begin(stream) -> work queued on the stream is recorded,
 * not run -> capture_end(stream) gives a graph -> instantiate(graph) gives an
 * executable -> replay(executable, stream) queues the recorded work on a
 * stream of the same device, in order, without host synchronisation, as
 * often as wanted -> exec_destroy / graph_destroy (in either order; an
 * executable does not need its graph, queued replays still run).
 *
 * Memory (the capture pool): from capture_begin until capture_end returns,
 * the plugin's allocator (c10::GetAllocator(PrivateUse1)) serves allocations
 * made with the capturing stream current on its device from a pool owned by
 * that capture. Its blocks are never handed to an allocation outside the pool
 * while any graph or executable of the capture lives (a block freed during the
 * capture may serve a later allocation of the same capture: replays run in
 * capture order); once all are destroyed, the blocks return to the allocator
 * after the replays queued before have run. devbridge's launcher takes kernel
 * scratch memory from the allocator on the current stream, so under capture it
 * comes from the pool.
 *
 * What cannot be captured (host synchronisation with the capturing stream, a
 * blocking device-to-host copy, cross-stream ordering where the plugin does not
 * support it) must fail with an error, never hang, and invalidate the capture:
 * capture_status then says kDevbridgeCaptureInvalidated and capture_end fails,
 * ending the capture.
 *
 * Errors: every function returns 0 on success and -1 on failure, with the
 * message available from `get_last_error(self)` on the same thread until the
 * plugin's next failing call (the convention of c_runtime_api.h). On failure
 * the outputs are left untouched. No function may throw (a C++ plugin catches
 * everything at the boundary); none may need the GIL. Every function may be
 * called from any host thread.
 *
 * Versioning (as DLPack's and c_runtime_api.h's): `header` never changes. A
 * minor bump only appends fields; devbridge reads the fields of minor <=
 * header.minor and refuses a table whose header.size is smaller than the
 * fields its minor promises. A major bump changes the layout: devbridge refuses
 * a table of another major, with a message naming both.
 */
#ifndef DEVBRIDGE_C_GRAPH_API_H_
#define DEVBRIDGE_C_GRAPH_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DEVBRIDGE_GRAPH_API_MAJOR 1
#define DEVBRIDGE_GRAPH_API_MINOR 0
/*! \brief Name of the PyCapsule that carries a `DevbridgeGraphAPI*`. */
#define DEVBRIDGE_GRAPH_API_CAPSULE_NAME "devbridge_graph_api"

/*! \brief Stable prefix of every version of the table (the same shape as
 *  DevbridgeRuntimeAPIHeader). */
typedef struct {
  uint32_t major; /*!< DEVBRIDGE_GRAPH_API_MAJOR the plugin was written against */
  uint32_t minor; /*!< DEVBRIDGE_GRAPH_API_MINOR the plugin was written against */
  size_t size;    /*!< sizeof(DevbridgeGraphAPI) as the plugin compiled it */
} DevbridgeGraphAPIHeader;

/*! \brief What capture_status reports for a stream. */
typedef enum {
  kDevbridgeCaptureNone = 0,        /*!< not capturing: work runs */
  kDevbridgeCaptureActive = 1,      /*!< capturing: work is recorded */
  kDevbridgeCaptureInvalidated = 2  /*!< capturing, broken by an uncapturable operation */
} DevbridgeCaptureStatus;

/*!
 * \brief Flag: the plugin's submit hook (DevbridgeSubmitFn, c_runtime_api.h) is
 *  capture-safe: a closure it is handed for a capturing stream runs into that
 *  capture (before capture_end returns). Without it, devbridge refuses launches
 *  through the hook while the launch stream captures, with a message naming this
 *  flag: a queue that runs them later would run them outside the capture.
 */
#define DEVBRIDGE_GRAPH_SUBMIT_HOOK_CAPTURES 1u
/*! \brief The flags devbridge knows (minor 0); other bits are refused. */
#define DEVBRIDGE_GRAPH_KNOWN_FLAGS 1u

typedef struct {
  /*! \brief Must be first: {DEVBRIDGE_GRAPH_API_MAJOR, _MINOR, sizeof(DevbridgeGraphAPI)}. */
  DevbridgeGraphAPIHeader header;
  /*! \brief DEVBRIDGE_GRAPH_* flags (0: none). */
  uint64_t flags;
  /*! \brief Passed back as the first argument of every function (the plugin's state; may be NULL). */
  void* self;
  /*! \brief Who answers, for devbridge's messages ("simdev graphs"). Not NULL; static storage. */
  const char* name;

  /*!
   * \brief Start recording the work queued on `stream`, a native stream of
   *  device `device_index`: from now on that work is recorded, not run, and the
   *  device's allocator serves allocations for the stream from the capture's
   *  pool (file comment). Fails if the stream already captures or is not a
   *  stream of that device.
   */
  int (*capture_begin)(void* self, int32_t device_index, void* stream);
  /*!
   * \brief Stop recording `stream` and write the recorded work as a new graph
   *  to *out_graph. Ends the capture even when it fails: a capture invalidated
   *  by an uncapturable operation fails here with that operation's message, and
   *  the capture's pool is released. Fails if the stream is not capturing.
   */
  int (*capture_end)(void* self, int32_t device_index, void* stream, void** out_graph);
  /*! \brief An executable for `graph` in *out_exec; `graph` stays valid (and may be destroyed first). */
  int (*instantiate)(void* self, void* graph, void** out_exec);
  /*!
   * \brief Queue the executable's recorded work on `stream`, a native stream of
   *  device `device_index` (the device it was captured on: another device's
   *  stream is refused), in capture order, as one sequence; returns without
   *  waiting. A graph (not an executable) is refused. `stream` may itself be
   *  capturing: the replay is then recorded into that capture.
   */
  int (*replay)(void* self, void* exec, int32_t device_index, void* stream);
  /*! \brief Destroy a graph from capture_end. A destroyed or unknown handle fails (never a crash). */
  int (*graph_destroy)(void* self, void* graph);
  /*! \brief Destroy an executable from instantiate. Replays already queued still run. */
  int (*exec_destroy)(void* self, void* exec);
  /*!
   * \brief The DevbridgeCaptureStatus of `stream` (a native stream of device
   *  `device_index`) in *out_status. Cheap: devbridge's launcher asks it for
   *  launches that go through a submit hook.
   */
  int (*capture_status)(void* self, int32_t device_index, void* stream, int32_t* out_status);
  /*! \brief The calling thread's last error message of this table's functions; never NULL. */
  const char* (*get_last_error)(void* self);
} DevbridgeGraphAPI;

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // DEVBRIDGE_C_GRAPH_API_H_
