#include "SimdevStream.h"

#include <array>
#include <atomic>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "SimdevCheck.h"
#include "SimdevDevice.h"

namespace torch_simdev {
namespace {

constexpr c10::StreamId kDefaultStreamId = 0;

struct DeviceStreams {
  std::once_flag default_once;
  std::once_flag pool_once;
  std::atomic<uint32_t> next_pool_index{0};
};

// One entry per device, created once and never destroyed: streams (and their
// worker threads) live for the whole process, and tensors freed during
// static destruction may still need them.
DeviceStreams& streamsOf(c10::DeviceIndex device) {
  static auto* all = [] {
    auto* v = new std::vector<std::unique_ptr<DeviceStreams>>();
    for (c10::DeviceIndex i = 0; i < deviceCount(); ++i) {
      v->push_back(std::make_unique<DeviceStreams>());
    }
    return v;
  }();
  checkDeviceIndex(device);
  return *(*all)[device];
}

// The sdStream_t of each device's default stream (id 0) and pool streams
// (ids 1..kStreamPoolSize), published once created, so that the hot paths
// (every operator asks for its stream) read them without once-flags or
// locks. NULL until created; NULL is never a valid sdStream_t.
std::array<std::array<std::atomic<sdStream_t>, kStreamPoolSize + 1>, kMaxDevices> g_natives{};

// The calling thread's current stream per device: its id (0, the default
// stream, until set) and its sdStream_t (NULL meaning the default stream).
// Constant-initialised, so reading it needs no TLS init guard.
struct CurrentStreams {
  std::array<c10::StreamId, kMaxDevices> ids{};
  std::array<sdStream_t, kMaxDevices> natives{};
};
thread_local CurrentStreams t_current;

sdStream_t defaultNative(c10::DeviceIndex device) {
  DeviceStreams& s = streamsOf(device);
  // call_once retries if the lambda throws, so a failed first call is not sticky.
  std::call_once(s.default_once, [&] {
    sdStream_t created = nullptr;
    SIMDEV_CHECK(sdStreamGetDefault(device, &created));
    g_natives[device][0].store(created, std::memory_order_release);
  });
  return g_natives[device][0].load(std::memory_order_acquire);
}

sdStream_t poolNative(c10::DeviceIndex device, int index) {
  DeviceStreams& s = streamsOf(device);
  std::call_once(s.pool_once, [&] {
    std::array<sdStream_t, kStreamPoolSize> created{};
    for (int i = 0; i < kStreamPoolSize; ++i) {
      SIMDEV_CHECK(sdStreamCreate(device, &created[i]));
    }
    for (int i = 0; i < kStreamPoolSize; ++i) {
      g_natives[device][i + 1].store(created[i], std::memory_order_release);
    }
  });
  return g_natives[device][index + 1].load(std::memory_order_acquire);
}

bool inRange(c10::DeviceIndex device) { return device >= 0 && device < deviceCount(); }

}  // namespace

c10::Stream defaultStream(c10::DeviceIndex device) {
  device = resolveDeviceIndex(device);
  return c10::Stream(c10::Stream::UNSAFE, simdevDevice(device), kDefaultStreamId);
}

c10::Stream poolStream(c10::DeviceIndex device) {
  device = resolveDeviceIndex(device);
  const uint32_t n = streamsOf(device).next_pool_index.fetch_add(1, std::memory_order_relaxed);
  const int index = static_cast<int>(n % kStreamPoolSize);
  poolNative(device, index);  // create the pool now, so errors surface here
  return c10::Stream(c10::Stream::UNSAFE, simdevDevice(device), index + 1);
}

c10::Stream currentStream(c10::DeviceIndex device) {
  if (C10_UNLIKELY(!inRange(device))) device = resolveDeviceIndex(device);
  return c10::Stream(c10::Stream::UNSAFE, simdevDevice(device), t_current.ids[device]);
}

sdStream_t currentNativeStream(c10::DeviceIndex device) {
  if (C10_UNLIKELY(!inRange(device))) device = resolveDeviceIndex(device);
  if (sdStream_t current = t_current.natives[device]) return current;
  if (sdStream_t fallback = g_natives[device][0].load(std::memory_order_acquire)) return fallback;
  return defaultNative(device);
}

c10::Stream exchangeCurrentStream(const c10::Stream& stream) {
  const sdStream_t native = nativeStream(stream);  // validates device type, index and id
  const c10::Stream previous = currentStream(stream.device_index());
  t_current.ids[stream.device_index()] = stream.id();
  t_current.natives[stream.device_index()] = native;
  return previous;
}

sdStream_t nativeStream(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1, "expected a simdev stream, got a ",
              stream.device_type(), " stream");
  const c10::DeviceIndex device = stream.device_index();
  const c10::StreamId id = stream.id();
  if (C10_LIKELY(inRange(device) && id >= 0 && id <= kStreamPoolSize)) {
    if (sdStream_t native = g_natives[device][id].load(std::memory_order_acquire)) return native;
    return id == kDefaultStreamId ? defaultNative(device) : poolNative(device, static_cast<int>(id - 1));
  }
  checkDeviceIndex(device);
  if (id >= kExternalStreamIdBase) {
    const auto handle = reinterpret_cast<sdStream_t>(static_cast<uintptr_t>(id - kExternalStreamIdBase));
    int owner = -1;
    if (sdStreamGetDevice(handle, &owner) == sdSuccess && owner == device) return handle;
    TORCH_CHECK(false, "stream id ", id, " names the external simdev stream ",
                static_cast<const void*>(handle), ", which is not a live stream of simdev:",
                static_cast<int>(device), "; it was destroyed, or belongs to another device");
  }
  TORCH_CHECK(false, "stream id ", id, " on simdev:", static_cast<int>(device),
              " is not a simdev stream (valid ids: 0 = default, 1..", kStreamPoolSize,
              " = pool, ", kExternalStreamIdBase,
              " + handle = a stream created with sdStreamCreate); create streams with "
              "torch.Stream(device=\"simdev\")");
}

bool streamIdOf(c10::DeviceIndex device, sdStream_t stream, c10::StreamId* out_id) noexcept {
  if (!inRange(device) || stream == nullptr) return false;
  try {
    defaultNative(device);  // so the default stream is known by its own id
  } catch (...) {
    return false;
  }
  for (c10::StreamId id = 0; id <= kStreamPoolSize; ++id) {
    if (g_natives[device][id].load(std::memory_order_acquire) == stream) {
      *out_id = id;
      return true;
    }
  }
  int owner = -1;
  if (sdStreamGetDevice(stream, &owner) != sdSuccess || owner != device) return false;
  const auto handle = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(stream));
  if (handle > static_cast<uint64_t>(std::numeric_limits<c10::StreamId>::max() - kExternalStreamIdBase)) {
    return false;
  }
  *out_id = kExternalStreamIdBase + static_cast<c10::StreamId>(handle);
  return true;
}

}  // namespace torch_simdev
