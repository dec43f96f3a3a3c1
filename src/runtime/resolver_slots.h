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

// One pointer per c10 device type, read with one atomic load. A type out of
// range reads as none registered and is not stored.
template <class T>
using PerDeviceType = std::array<std::atomic<T>, kNumDeviceTypes>;

template <class T>
inline T LoadFor(const PerDeviceType<T>& table, c10::DeviceType type) noexcept {
  const auto index = static_cast<size_t>(type);
  if (index >= kNumDeviceTypes) return nullptr;
  return table[index].load(std::memory_order_acquire);
}

template <class T>
inline void StoreFor(PerDeviceType<T>& table, c10::DeviceType type, T value) noexcept {
  const auto index = static_cast<size_t>(type);
  if (index < kNumDeviceTypes) table[index].store(value, std::memory_order_release);
}

// Defined in registries.cpp; written only by Register/UnregisterStreamResolver.
extern PerDeviceType<const StreamResolver*> g_stream_resolvers;

// Defined in registries.cpp; written only by SetCurrentStreamQuery.
extern PerDeviceType<DevbridgeCurrentStreamFn> g_current_stream_queries;

inline DevbridgeCurrentStreamFn LoadCurrentStreamQuery(c10::DeviceType type) noexcept {
  return LoadFor(g_current_stream_queries, type);
}

inline const StreamResolver* LoadStreamResolver(c10::DeviceType type) noexcept {
  return LoadFor(g_stream_resolvers, type);
}

}  // namespace detail
}  // namespace devbridge
