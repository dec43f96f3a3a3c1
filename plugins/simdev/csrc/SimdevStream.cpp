#include "SimdevStream.h"

#include <array>
#include <atomic>
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
  sdStream_t default_stream = nullptr;
  std::once_flag pool_once;
  std::array<sdStream_t, kStreamPoolSize> pool{};
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

sdStream_t defaultNative(c10::DeviceIndex device) {
  DeviceStreams& s = streamsOf(device);
  // call_once retries if the lambda throws, so a failed first call is not sticky.
  std::call_once(s.default_once, [&] { SIMDEV_CHECK(sdStreamGetDefault(device, &s.default_stream)); });
  return s.default_stream;
}

sdStream_t poolNative(c10::DeviceIndex device, int index) {
  DeviceStreams& s = streamsOf(device);
  std::call_once(s.pool_once, [&] {
    std::array<sdStream_t, kStreamPoolSize> created{};
    for (int i = 0; i < kStreamPoolSize; ++i) {
      SIMDEV_CHECK(sdStreamCreate(device, &created[i]));
    }
    s.pool = created;
  });
  return s.pool[index];
}

// Ids of the current streams of this thread, by device; 0 (default) until set.
std::vector<c10::StreamId>& currentIds() {
  thread_local std::vector<c10::StreamId> ids(deviceCount(), kDefaultStreamId);
  return ids;
}

c10::Device simdevDevice(c10::DeviceIndex index) {
  return c10::Device(c10::DeviceType::PrivateUse1, index);
}

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
  device = resolveDeviceIndex(device);
  return c10::Stream(c10::Stream::UNSAFE, simdevDevice(device), currentIds()[device]);
}

c10::Stream exchangeCurrentStream(const c10::Stream& stream) {
  nativeStream(stream);  // validates device type, index and id
  const c10::Stream previous = currentStream(stream.device_index());
  currentIds()[stream.device_index()] = stream.id();
  return previous;
}

sdStream_t nativeStream(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1, "expected a simdev stream, got a ",
              stream.device_type(), " stream");
  checkDeviceIndex(stream.device_index());
  const c10::StreamId id = stream.id();
  if (id == kDefaultStreamId) return defaultNative(stream.device_index());
  TORCH_CHECK(id >= 1 && id <= kStreamPoolSize, "stream id ", id, " on simdev:",
              static_cast<int>(stream.device_index()),
              " is not a simdev stream (valid ids: 0 = default, 1..", kStreamPoolSize,
              " = pool); create streams with torch.Stream(device=\"simdev\")");
  return poolNative(stream.device_index(), static_cast<int>(id - 1));
}

}  // namespace torch_simdev
