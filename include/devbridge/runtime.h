// devbridge's C++ runtime API: a generic view of one c10 device type.
//
// Everything here reads through c10's public interfaces (the registered
// DeviceGuardImplInterface and allocator of the device type); devbridge never
// registers anything for a device type it does not own. Errors are thrown as
// devbridge::Error (see error.h) with a message that names the fix.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/DeviceType.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "devbridge/c_runtime_api.h"
#include "devbridge/error.h"

namespace devbridge {

// ---------------------------------------------------------------- options
// Process-wide switches, set by `devbridge.install(...)`.
struct Options {
  // When a backend has no native stream handle and no resolver, report a NULL
  // stream instead of failing. Kernels then run on the device's default
  // stream, which is only correct if the caller never uses other streams.
  bool allow_null_stream = false;
  // DLPack import (and the runtime table) also accept device type 21
  // (kDLAscend, DLPack main) as the PrivateUse1 device.
  bool accept_ascend_device_type = false;
  // DLPack export labels PrivateUse1 tensors 21 instead of kDLExtDev (12).
  // Only for consumers that already understand 21.
  bool export_ascend_device_type = false;
};
Options GetOptions() noexcept;
void SetOptions(const Options& options) noexcept;
// allow_null_stream, or the environment variable DEVBRIDGE_ALLOW_NULL_STREAM=1.
bool NullStreamAllowed() noexcept;

// ---------------------------------------------------------------- resolvers
// How a plugin whose device guard does not override getStreamNativeHandle
// tells devbridge its native stream handles. A registered resolver takes
// precedence over the guard, so a plugin can also correct a guard it cannot
// change.
struct StreamResolver {
  // Fast path: a C function (from a "devbridge_stream_resolver" capsule).
  DevbridgeStreamResolver c_function = nullptr;
  // Generic path, used by the Python bindings for Python callables. The
  // callback stores a message with SetLastError before returning -1.
  int (*callback)(void* context, int32_t device_index, int64_t stream_id,
                  void** out_stream) = nullptr;
  void* context = nullptr;
  // Shown in error messages, e.g. "Python callable my_resolver".
  std::string description;
};
// Replaces the resolver of `type`. Thread-safe against concurrent lookups;
// the previous resolver object is retired, never freed (a reader may hold it).
void RegisterStreamResolver(c10::DeviceType type, StreamResolver resolver);
void UnregisterStreamResolver(c10::DeviceType type) noexcept;
const StreamResolver* FindStreamResolver(c10::DeviceType type) noexcept;

// ---------------------------------------------------------------- plugin stream hooks
// The plugin's fast current-stream query and its external-stream hook
// (c_runtime_api.h). NULL removes one. Lookups are one atomic load.
void SetCurrentStreamQuery(c10::DeviceType type, DevbridgeCurrentStreamFn query) noexcept;
DevbridgeCurrentStreamFn GetCurrentStreamQuery(c10::DeviceType type) noexcept;
void SetExternalStreamHook(c10::DeviceType type, DevbridgeExternalStreamFn hook) noexcept;
DevbridgeExternalStreamFn GetExternalStreamHook(c10::DeviceType type) noexcept;

// ---------------------------------------------------------------- submit hooks
// Storage for the runtime table's get_submit_hook (launchers read it).
void SetSubmitHook(c10::DeviceType type, DevbridgeSubmitFn hook) noexcept;
DevbridgeSubmitFn GetSubmitHook(c10::DeviceType type) noexcept;

// ---------------------------------------------------------------- last error
// The calling thread's last error message (the runtime table's get_last_error).
void SetLastError(const std::string& message);
const char* GetLastError() noexcept;

// ---------------------------------------------------------------- runtime
// Where current_native_stream gets its answer for a device type.
enum class NativeStreamSource {
  kNoStreams,   // CPU: there is no stream; the handle is NULL by definition
  kResolver,    // a registered StreamResolver
  kQuery,       // the plugin's registered current-stream query
  kGuard,       // the guard's getStreamNativeHandle override
  kMissing,     // neither: an error, or NULL when NullStreamAllowed()
  kNoBackend,   // no guard registered for the type (plugin not loaded)
};
const char* ToString(NativeStreamSource source) noexcept;

class DeviceRuntime {
 public:
  // The view of `type`; one per device type, alive for the whole process.
  static const DeviceRuntime& For(c10::DeviceType type);

  c10::DeviceType type() const noexcept { return type_; }
  // User-facing name: the PrivateUse1 backend's name ("simdev"), else c10's.
  std::string Name() const;
  // True when a device guard is registered for the type.
  bool Available() const noexcept;
  // 0 when unavailable; never throws.
  int DeviceCount() const noexcept;

  c10::DeviceIndex CurrentDevice() const;
  void SetCurrentDevice(c10::DeviceIndex index) const;

  c10::Stream CurrentStream(c10::DeviceIndex index) const;
  // The device's default stream (the guard's getDefaultStream); throws
  // Error(kNotImplemented) naming the fix when the guard lacks it.
  c10::Stream DefaultStream(c10::DeviceIndex index) const;
  // Native handle (cudaStream_t, the plugin's stream pointer, ...) of a stream
  // of this device type. NULL for CPU.
  void* NativeHandle(const c10::Stream& stream) const;
  // Hot path: native handle of the calling thread's current stream on device
  // `index`. A handful of loads and one call into the plugin's current-stream
  // query, or two virtual calls into its guard, when cached. Precedence: a
  // registered resolver, then the query, then the guard.
  void* CurrentNativeStream(c10::DeviceIndex index) const;
  // Which path current_native_stream takes (probes the guard once).
  NativeStreamSource NativeStreamSourceOf(c10::DeviceIndex index) const;

  // The c10 stream of device `index` whose native handle is `native`: from
  // the plugin's external-stream hook, else the current or the default stream
  // when one of them is `native`. Throws Error(kValue) when the hook says
  // `native` is not a stream of the device, Error(kBuffer) naming the fix
  // when there is no hook and `native` is neither of those two streams.
  c10::Stream StreamFromNative(c10::DeviceIndex index, void* native) const;
  // Makes `consumer` wait for the work queued so far on the current stream of
  // its device: an event recorded there and blocked on by `consumer`, no host
  // synchronisation. Nothing to do when `consumer` is the current stream.
  void WaitForCurrentStream(const c10::Stream& consumer) const;

  void Synchronize(const c10::Stream& stream) const;

  // Scratch memory from the type's registered allocator, allocated with
  // `stream` current (a stream-aware caching allocator ties the block to it,
  // so freeing the DataPtr right after enqueueing work on `stream` is safe).
  c10::DataPtr AllocateScratch(size_t nbytes, const c10::Stream& stream) const;
  // Declares that `data` is also used by work on `stream` (a stream other than
  // the one it was allocated on): forwards to the guard's
  // recordDataPtrOnStream, which keeps the block alive until that work is done.
  void RecordUse(const c10::DataPtr& data, const c10::Stream& stream) const;

  explicit DeviceRuntime(c10::DeviceType type) noexcept : type_(type) {}
  DeviceRuntime(const DeviceRuntime&) = delete;
  DeviceRuntime& operator=(const DeviceRuntime&) = delete;

 private:
  struct GuardState;  // what was learnt about one registered guard impl
  const c10::impl::DeviceGuardImplInterface* Guard() const;
  const GuardState& StateFor(const c10::impl::DeviceGuardImplInterface* impl) const;
  void CheckIndex(const GuardState& state, c10::DeviceIndex index) const;
  void* GuardNativeHandle(const GuardState& state, const c10::Stream& stream) const;
  // current_native_stream when the fast path's cached facts do not hold.
  void* CurrentNativeStreamSlow(c10::DeviceIndex index) const;
  [[noreturn]] void ThrowQueryFailed(c10::DeviceIndex index) const;
  [[noreturn]] void ThrowNoNativeHandle() const;

  c10::DeviceType type_;
  // Re-created when the registered guard pointer changes (last writer wins in
  // c10's registry); old states are retired, never freed.
  mutable std::atomic<GuardState*> state_{nullptr};
};

// ---------------------------------------------------------------- C table
// devbridge's runtime table (static, process lifetime), the C view of the
// DeviceRuntime API for kernel-side code. Python hands it out as a capsule
// named DEVBRIDGE_RUNTIME_API_CAPSULE_NAME.
const DevbridgeRuntimeAPI* RuntimeAPI() noexcept;

}  // namespace devbridge
