// Per-device-type registries: stream resolvers, the plugin's current-stream
// queries and external-stream hooks, submit hooks.
//
// Lookups happen on the hot path (every current-stream query), so they are a
// single atomic load. Registration is rare and may race with lookups; a
// replaced resolver is moved to a retired list instead of being freed, since a
// concurrent reader may still be calling it. The leak is bounded by the number
// of registrations.
#include <array>
#include <memory>
#include <mutex>
#include <vector>

#include "devbridge/runtime.h"
#include "runtime/resolver_slots.h"

namespace devbridge {
namespace detail {
PerDeviceType<const StreamResolver*> g_stream_resolvers{};
PerDeviceType<DevbridgeCurrentStreamFn> g_current_stream_queries{};
}  // namespace detail

namespace {

constexpr size_t kNumTypes = detail::kNumDeviceTypes;

size_t Slot(c10::DeviceType type) {
  const auto index = static_cast<size_t>(type);
  if (index >= kNumTypes) {
    throw Error(ErrorKind::kValue, "devbridge: invalid c10 device type " + std::to_string(index));
  }
  return index;
}

detail::PerDeviceType<DevbridgeSubmitFn> g_submit_hooks{};
detail::PerDeviceType<DevbridgeExternalStreamFn> g_external_stream_hooks{};

std::mutex g_retired_mutex;
std::vector<std::unique_ptr<StreamResolver>>& Retired() {
  static auto* retired = new std::vector<std::unique_ptr<StreamResolver>>();
  return *retired;
}

void Publish(size_t slot, std::unique_ptr<StreamResolver> resolver) {
  std::lock_guard<std::mutex> lock(g_retired_mutex);
  const StreamResolver* old = detail::g_stream_resolvers[slot].exchange(resolver.release());
  if (old != nullptr) Retired().emplace_back(const_cast<StreamResolver*>(old));
}

}  // namespace

void RegisterStreamResolver(c10::DeviceType type, StreamResolver resolver) {
  const size_t slot = Slot(type);
  if ((resolver.c_function == nullptr) == (resolver.callback == nullptr)) {
    throw Error(ErrorKind::kValue,
                "devbridge: a stream resolver needs exactly one of a C function or a callback");
  }
  Publish(slot, std::make_unique<StreamResolver>(std::move(resolver)));
}

void UnregisterStreamResolver(c10::DeviceType type) noexcept {
  const auto index = static_cast<size_t>(type);
  if (index >= kNumTypes) return;
  try {
    Publish(index, nullptr);
  } catch (...) {
    // Only the retired list's growth can throw; dropping the entry then leaks
    // one resolver, which is harmless.
  }
}

const StreamResolver* FindStreamResolver(c10::DeviceType type) noexcept {
  return detail::LoadStreamResolver(type);
}

void SetSubmitHook(c10::DeviceType type, DevbridgeSubmitFn hook) noexcept {
  detail::StoreFor(g_submit_hooks, type, hook);
}

DevbridgeSubmitFn GetSubmitHook(c10::DeviceType type) noexcept { return detail::LoadFor(g_submit_hooks, type); }

// Plain function pointers (no state to retire): a reader that loaded the old
// pointer may still call it, which is fine as long as the plugin's code stays
// loaded, and plugins are never unloaded.
void SetCurrentStreamQuery(c10::DeviceType type, DevbridgeCurrentStreamFn query) noexcept {
  detail::StoreFor(detail::g_current_stream_queries, type, query);
}

DevbridgeCurrentStreamFn GetCurrentStreamQuery(c10::DeviceType type) noexcept {
  return detail::LoadCurrentStreamQuery(type);
}

void SetExternalStreamHook(c10::DeviceType type, DevbridgeExternalStreamFn hook) noexcept {
  detail::StoreFor(g_external_stream_hooks, type, hook);
}

DevbridgeExternalStreamFn GetExternalStreamHook(c10::DeviceType type) noexcept {
  return detail::LoadFor(g_external_stream_hooks, type);
}

}  // namespace devbridge
