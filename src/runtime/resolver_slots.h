// The stream-resolver and current-stream-query slots, visible to the
// runtime's hot path so that "is one registered?" is an inlined atomic load,
// not a call.
#pragma once

#include <array>
#include <atomic>

#include "devbridge/runtime.h"

namespace devbridge {
namespace detail {

constexpr size_t kNumDeviceTypes =
    static_cast<size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES);

// Defined in registries.cpp; written only by Register/UnregisterStreamResolver.
extern std::array<std::atomic<const StreamResolver*>, kNumDeviceTypes> g_stream_resolvers;

// Defined in registries.cpp; written only by SetCurrentStreamQuery.
extern std::array<std::atomic<DevbridgeCurrentStreamFn>, kNumDeviceTypes> g_current_stream_queries;

inline DevbridgeCurrentStreamFn LoadCurrentStreamQuery(c10::DeviceType type) noexcept {
  const auto index = static_cast<size_t>(type);
  if (index >= kNumDeviceTypes) return nullptr;
  return g_current_stream_queries[index].load(std::memory_order_acquire);
}

inline const StreamResolver* LoadStreamResolver(c10::DeviceType type) noexcept {
  const auto index = static_cast<size_t>(type);
  if (index >= kNumDeviceTypes) return nullptr;
  return g_stream_resolvers[index].load(std::memory_order_acquire);
}

}  // namespace detail
}  // namespace devbridge
