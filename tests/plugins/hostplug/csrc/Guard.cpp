// The c10 device guard: how torch (DeviceGuard, torch.Stream, torch.Event,
// torch.accelerator) and libraries reading the backend generically (devbridge
// among them) see hostplug's devices, streams and events. Registered for
// PrivateUse1 when the extension is loaded.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "Runtime.h"

namespace hostplug {
namespace {

constexpr auto kType = c10::DeviceType::PrivateUse1;

Stream& streamOf(const c10::Stream& s) { return stream(s.device_index(), s.id()); }

Marker* markerOf(void* event) {
  auto* e = static_cast<Event*>(event);
  return e == nullptr ? nullptr : e->marker.get();
}

struct GuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kType; }

  c10::Device exchangeDevice(c10::Device device) const override {
    const c10::Device previous = getDevice();
    setDevice(device);
    return previous;
  }
  c10::Device getDevice() const override { return c10::Device(kType, currentDevice()); }
  void setDevice(c10::Device device) const override {
    TORCH_CHECK(device.type() == kType, "hostplug's guard got a ", device, " device");
    setCurrentDevice(device.index());
  }
  void uncheckedSetDevice(c10::Device device) const noexcept override {
    if (device.index() >= 0 && device.index() < kDeviceCount) setCurrentDevice(device.index());
  }
  c10::DeviceIndex deviceCount() const noexcept override { return kDeviceCount; }

  c10::Stream getStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::UNSAFE, device, currentStream(device.index()).id());
  }
  c10::Stream getDefaultStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::UNSAFE, device, 0);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool /*high_priority*/) const override {
    return c10::Stream(c10::Stream::UNSAFE, device, newStreamId(device.index()));
  }
  c10::Stream getNewStream(c10::Device device, int /*priority*/) const override {
    return c10::Stream(c10::Stream::UNSAFE, device, newStreamId(device.index()));
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    const c10::Stream previous = getStream(s.device());
    setCurrentStream(s.device_index(), s.id());
    return previous;
  }
  // The Stream object itself: stable for the process and unique per stream,
  // which is all a kernel runtime needs of a handle (devbridge's host target
  // compares it with the current stream's).
  void* getStreamNativeHandle(const c10::Stream s) const override { return &streamOf(s); }
  bool queryStream(const c10::Stream& s) const override { return streamOf(s).query(); }
  void synchronizeStream(const c10::Stream& s) const override { streamOf(s).synchronize(); }
  void synchronizeDevice(const c10::DeviceIndex device) const override { hostplug::synchronizeDevice(device); }

  // Events. Each record makes a new marker, so a wait queued earlier keeps
  // waiting for the record it saw (CUDA's semantics).
  void record(void** event, const c10::Stream& s, const c10::DeviceIndex /*device*/,
              const c10::EventFlag /*flag: every event can be timed*/) const override {
    if (*event == nullptr) *event = new Event();
    static_cast<Event*>(*event)->marker = recordMarker(streamOf(s));
  }
  void block(void* event, const c10::Stream& s) const override {
    auto* e = static_cast<Event*>(event);
    if (e == nullptr || e->marker == nullptr) return;  // never recorded: nothing to wait for
    waitForMarker(streamOf(s), e->marker);
  }
  bool queryEvent(void* event) const override {
    Marker* marker = markerOf(event);
    if (marker == nullptr) return true;
    std::lock_guard<std::mutex> lock(marker->mutex);
    return marker->done;
  }
  void synchronizeEvent(void* event) const override {
    if (Marker* marker = markerOf(event)) marker->wait();
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex /*device*/) const override {
    Marker* first = markerOf(start);
    Marker* second = markerOf(end);
    TORCH_CHECK(first != nullptr && second != nullptr, "elapsed_time: both events must have been recorded");
    first->wait();
    second->wait();
    return std::chrono::duration<double, std::milli>(second->when - first->when).count();
  }
  void destroyEvent(void* event, const c10::DeviceIndex /*device*/) const noexcept override {
    delete static_cast<Event*>(event);
  }
  // recordDataPtrOnStream stays c10's no-op: queued work holds the storages it
  // uses (Ops.h), so memory is never freed while a stream may still touch it.
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

}  // namespace
}  // namespace hostplug
