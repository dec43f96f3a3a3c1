// DeviceRuntime: a generic view of one c10 device type over its registered
// DeviceGuardImplInterface and allocator.
//
// The hot path is current_native_stream: one load for the resolver, one for
// the plugin's current-stream query, a cached GuardState check, then either
// the query (one call into the plugin) or getStream + getStreamNativeHandle
// (two virtual calls); anything unusual (first call, resolver, CPU, errors)
// takes current_native_stream_slow. Whether the guard overrides
// getStreamNativeHandle is learnt once per registered guard object: c10's
// default implementation throws, and throwing on every call would be slow and
// would hide the real fix from the user.
#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "devbridge/runtime.h"
#include "runtime/resolver_slots.h"

namespace devbridge {

struct DeviceRuntime::GuardState {
  enum : int { kUnknown = 0, kHasNativeHandle = 1, kNoNativeHandle = 2 };

  explicit GuardState(const c10::impl::DeviceGuardImplInterface* guard_impl)
      : impl(guard_impl), device_count(guard_impl->deviceCount()) {}

  const c10::impl::DeviceGuardImplInterface* const impl;
  mutable std::atomic<int> native_handle_support{kUnknown};
  // Cached so that the hot path can bounds-check an index without a virtual
  // call; refreshed when an index is out of range (lazily initialised backends
  // may report 0 devices at first).
  mutable std::atomic<int> device_count;
};

namespace {

constexpr size_t kNumTypes = static_cast<size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES);

bool IsUnsupportedNativeHandleError(const c10::Error& error) {
  // c10's DeviceGuardImplInterface::getStreamNativeHandle default says
  // "Backend doesn't support getting stream native handle."
  return std::strstr(error.what_without_backtrace(), "support getting stream native handle") !=
         nullptr;
}

std::mutex g_state_mutex;

}  // namespace

const DeviceRuntime& DeviceRuntime::For(c10::DeviceType type) {
  // Built once, never destroyed: views must outlive any thread that may still
  // query streams during interpreter shutdown.
  static const std::vector<std::unique_ptr<DeviceRuntime>>* runtimes = [] {
    auto* all = new std::vector<std::unique_ptr<DeviceRuntime>>();
    all->reserve(kNumTypes);
    for (size_t i = 0; i < kNumTypes; ++i) {
      all->push_back(std::make_unique<DeviceRuntime>(static_cast<c10::DeviceType>(i)));
    }
    return all;
  }();
  const auto index = static_cast<size_t>(type);
  if (index >= kNumTypes) {
    throw Error(ErrorKind::kValue, "devbridge: invalid c10 device type " + std::to_string(index));
  }
  return *(*runtimes)[index];
}

const char* ToString(NativeStreamSource source) noexcept {
  switch (source) {
    case NativeStreamSource::kNoStreams: return "no-streams";
    case NativeStreamSource::kResolver: return "resolver";
    case NativeStreamSource::kQuery: return "current-stream-query";
    case NativeStreamSource::kGuard: return "guard";
    case NativeStreamSource::kMissing: return "missing";
    case NativeStreamSource::kNoBackend: return "no-backend";
  }
  return "?";
}

std::string DeviceRuntime::Name() const {
  if (type_ == c10::DeviceType::PrivateUse1) return c10::get_privateuse1_backend();
  return c10::DeviceTypeName(type_, /*lower_case=*/true);
}

bool DeviceRuntime::Available() const noexcept {
  return c10::impl::hasDeviceGuardImpl(type_);
}

int DeviceRuntime::DeviceCount() const noexcept {
  if (!Available()) return 0;
  return c10::impl::getDeviceGuardImpl(type_)->deviceCount();
}

const c10::impl::DeviceGuardImplInterface* DeviceRuntime::Guard() const {
  if (C10_LIKELY(c10::impl::hasDeviceGuardImpl(type_))) {
    return c10::impl::getDeviceGuardImpl(type_);
  }
  if (type_ == c10::DeviceType::PrivateUse1) {
    throw Error(ErrorKind::kRuntime,
                "devbridge: no PrivateUse1 backend is loaded in this process. Import the device "
                "plugin first (e.g. `import torch_simdev`); installed plugins with a "
                "torch.backends entry point are imported by `import torch` unless "
                "TORCH_DEVICE_BACKEND_AUTOLOAD=0");
  }
  throw Error(ErrorKind::kRuntime, "devbridge: this PyTorch has no support for " + Name() +
                                       " devices (no device guard is registered for them)");
}

const DeviceRuntime::GuardState& DeviceRuntime::StateFor(
    const c10::impl::DeviceGuardImplInterface* impl) const {
  GuardState* state = state_.load(std::memory_order_acquire);
  if (C10_LIKELY(state != nullptr && state->impl == impl)) return *state;
  std::lock_guard<std::mutex> lock(g_state_mutex);
  state = state_.load(std::memory_order_acquire);
  if (state != nullptr && state->impl == impl) return *state;
  // The previous state is never freed: another thread may still be reading
  // it. It stays reachable from a process-lifetime list (so LeakSanitizer
  // sees a kept object, not a leak). This happens only when a backend
  // re-registers its guard, so the list stays tiny.
  if (state != nullptr) {
    static auto* retired = new std::vector<GuardState*>();
    retired->push_back(state);
  }
  auto* fresh = new GuardState(impl);
  state_.store(fresh, std::memory_order_release);
  return *fresh;
}

void DeviceRuntime::CheckIndex(const GuardState& state, c10::DeviceIndex index) const {
  if (C10_LIKELY(index >= 0 && index < state.device_count.load(std::memory_order_relaxed))) return;
  const int count = state.impl->deviceCount();
  state.device_count.store(count, std::memory_order_relaxed);
  if (index >= 0 && index < count) return;
  throw Error(ErrorKind::kValue, "devbridge: device index " + std::to_string(index) +
                                     " is out of range for " + Name() + ", which has " +
                                     std::to_string(count) + " device(s)");
}

c10::DeviceIndex DeviceRuntime::CurrentDevice() const {
  return Guard()->getDevice().index();
}

void DeviceRuntime::SetCurrentDevice(c10::DeviceIndex index) const {
  const auto* impl = Guard();
  CheckIndex(StateFor(impl), index);
  impl->setDevice(c10::Device(type_, index));
}

c10::Stream DeviceRuntime::CurrentStream(c10::DeviceIndex index) const {
  const auto* impl = Guard();
  CheckIndex(StateFor(impl), index);
  return impl->getStream(c10::Device(type_, index));
}

namespace {

// Asks `resolver` for the handle of stream `stream_id` on `device_index` (the
// index the caller asked about: c10 gives CPU streams index -1). `runtime` is
// only used to name the device when the resolver fails: the success path
// builds no strings.
void* CallResolver(const StreamResolver& resolver, const DeviceRuntime& runtime,
                   c10::DeviceIndex device_index, c10::StreamId stream_id) {
  void* handle = nullptr;
  const int rc = resolver.c_function != nullptr
                     ? resolver.c_function(device_index, stream_id, &handle)
                     : resolver.callback(resolver.context, device_index, stream_id, &handle);
  if (C10_LIKELY(rc == 0)) return handle;
  std::string message = "devbridge: the stream resolver registered for " + runtime.Name() + " (" +
                        resolver.description + ") failed for device " +
                        std::to_string(device_index) + ", stream id " + std::to_string(stream_id);
  if (resolver.callback != nullptr) message += std::string(": ") + GetLastError();
  throw Error(ErrorKind::kRuntime, message);
}

}  // namespace

void* DeviceRuntime::GuardNativeHandle(const GuardState& state, const c10::Stream& stream) const {
  const int support = state.native_handle_support.load(std::memory_order_relaxed);
  if (C10_LIKELY(support == GuardState::kHasNativeHandle)) {
    return state.impl->getStreamNativeHandle(stream);
  }
  if (support == GuardState::kUnknown) {
    try {
      void* handle = state.impl->getStreamNativeHandle(stream);
      state.native_handle_support.store(GuardState::kHasNativeHandle, std::memory_order_relaxed);
      return handle;
    } catch (const c10::Error& error) {
      // Any other failure is the backend's real error about this stream:
      // report it and learn nothing.
      if (!IsUnsupportedNativeHandleError(error)) throw;
      state.native_handle_support.store(GuardState::kNoNativeHandle, std::memory_order_relaxed);
    }
  }
  if (NullStreamAllowed()) return nullptr;
  ThrowNoNativeHandle();
}

void DeviceRuntime::ThrowNoNativeHandle() const {
  const std::string device = Name();
  const bool plugin = type_ == c10::DeviceType::PrivateUse1;
  throw Error(
      ErrorKind::kRuntime,
      "devbridge: " + std::string(plugin ? "the PrivateUse1 plugin '" : "device type '") + device +
          "' exposes no native stream handle: its DeviceGuardImplInterface does not override "
          "getStreamNativeHandle, and no stream resolver is registered. Fix one of: (1) in the "
          "plugin, override DeviceGuardImplInterface::getStreamNativeHandle in its device guard "
          "(torch >= 2.11; then torch.Stream.native_handle works too); (2) register a resolver: "
          "devbridge.register_stream_resolver(resolver, device_type='" +
          device +
          "') with a C function capsule or a Python callable (device_index, stream_id) -> int. "
          "To accept a NULL stream instead (kernels then run on the device's default stream), "
          "call devbridge.install(allow_null_stream=True) or set DEVBRIDGE_ALLOW_NULL_STREAM=1.");
}

void* DeviceRuntime::CurrentNativeStream(c10::DeviceIndex index) const {
  // Fast path: every fact needed was learnt before and still holds (no
  // resolver, the index is in range, and either the plugin registered a
  // current-stream query or the same registered guard has a native handle).
  // Plain loads and one call into the plugin (the query) or two virtual calls.
  if (C10_LIKELY(detail::LoadStreamResolver(type_) == nullptr)) {
    const GuardState* state = state_.load(std::memory_order_acquire);
    if (C10_LIKELY(state != nullptr && index >= 0 &&
                   index < state->device_count.load(std::memory_order_relaxed))) {
      if (const DevbridgeCurrentStreamFn query = detail::LoadCurrentStreamQuery(type_)) {
        void* stream = nullptr;
        if (C10_LIKELY(query(index, &stream) == 0)) return stream;
        ThrowQueryFailed(index);
      }
      const c10::impl::DeviceGuardImplInterface* impl =
          c10::impl::device_guard_impl_registry[static_cast<size_t>(type_)].load(
              std::memory_order_acquire);
      if (C10_LIKELY(impl != nullptr && state->impl == impl &&
                     state->native_handle_support.load(std::memory_order_relaxed) ==
                         GuardState::kHasNativeHandle)) {
        return impl->getStreamNativeHandle(impl->getStream(c10::Device(type_, index)));
      }
    }
  }
  return CurrentNativeStreamSlow(index);
}

void* DeviceRuntime::CurrentNativeStreamSlow(c10::DeviceIndex index) const {
  const StreamResolver* resolver = FindStreamResolver(type_);
  const DevbridgeCurrentStreamFn query = resolver == nullptr ? GetCurrentStreamQuery(type_) : nullptr;
  if (type_ == c10::DeviceType::CPU && resolver == nullptr && query == nullptr) return nullptr;
  const auto* impl = Guard();
  const GuardState& state = StateFor(impl);
  CheckIndex(state, index);
  if (query != nullptr) {
    void* stream = nullptr;
    if (query(index, &stream) == 0) return stream;
    ThrowQueryFailed(index);
  }
  const c10::Stream stream = impl->getStream(c10::Device(type_, index));
  if (resolver != nullptr) return CallResolver(*resolver, *this, index, stream.id());
  return GuardNativeHandle(state, stream);
}

void DeviceRuntime::ThrowQueryFailed(c10::DeviceIndex index) const {
  throw Error(ErrorKind::kRuntime,
              "devbridge: the current-stream query registered for " + Name() +
                  " (devbridge.register_current_stream_query) failed for device " +
                  std::to_string(index) +
                  "; the plugin's DevbridgeCurrentStreamFn returned -1. Fix the plugin's query, "
                  "or unregister it (devbridge.register_current_stream_query(None, '" + Name() +
                  "')) to use the device guard's getStream + getStreamNativeHandle");
}

void* DeviceRuntime::NativeHandle(const c10::Stream& stream) const {
  if (stream.device_type() != type_) {
    throw Error(ErrorKind::kValue, "devbridge: a " + c10::DeviceTypeName(stream.device_type()) +
                                       " stream was given to the " + Name() + " runtime");
  }
  const StreamResolver* resolver = FindStreamResolver(type_);
  if (resolver != nullptr) {
    return CallResolver(*resolver, *this, stream.device_index(), stream.id());
  }
  if (type_ == c10::DeviceType::CPU) return nullptr;
  return GuardNativeHandle(StateFor(Guard()), stream);
}

NativeStreamSource DeviceRuntime::NativeStreamSourceOf(c10::DeviceIndex index) const {
  if (FindStreamResolver(type_) != nullptr) return NativeStreamSource::kResolver;
  if (GetCurrentStreamQuery(type_) != nullptr) return NativeStreamSource::kQuery;
  if (type_ == c10::DeviceType::CPU) return NativeStreamSource::kNoStreams;
  if (!Available()) return NativeStreamSource::kNoBackend;
  const auto* impl = Guard();
  const GuardState& state = StateFor(impl);
  CheckIndex(state, index);
  try {
    GuardNativeHandle(state, impl->getStream(c10::Device(type_, index)));
  } catch (const Error&) {
    // throw_no_native_handle: classified below from the learnt state.
  }
  return state.native_handle_support.load() == GuardState::kHasNativeHandle
             ? NativeStreamSource::kGuard
             : NativeStreamSource::kMissing;
}

void DeviceRuntime::Synchronize(const c10::Stream& stream) const {
  Guard()->synchronizeStream(stream);
}

c10::DataPtr DeviceRuntime::AllocateScratch(size_t nbytes, const c10::Stream& stream) const {
  if (stream.device_type() != type_) {
    throw Error(ErrorKind::kValue, "devbridge: scratch for " + Name() + " requested on a " +
                                       c10::DeviceTypeName(stream.device_type()) + " stream");
  }
  // CPU streams carry device index -1 (there is one CPU device).
  if (type_ != c10::DeviceType::CPU) CheckIndex(StateFor(Guard()), stream.device_index());
  c10::Allocator* allocator = c10::GetAllocator(type_);
  // Make `stream` current while allocating: stream-aware caching allocators
  // (CUDA's, most plugins') tie the block to the current stream, so it is not
  // handed to other streams before the work queued on `stream` has run.
  c10::StreamGuard stream_guard(stream);
  return allocator->allocate(nbytes);
}

void DeviceRuntime::RecordUse(const c10::DataPtr& data, const c10::Stream& stream) const {
  Guard()->recordDataPtrOnStream(data, stream);
}

}  // namespace devbridge
