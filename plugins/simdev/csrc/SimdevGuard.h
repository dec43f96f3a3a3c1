// The c10 device guard for simdev: how PyTorch (DeviceGuard, StreamGuard,
// torch.Stream, torch.Event, torch.accelerator, Tensor.record_stream) gets and
// sets simdev's current device and stream, creates streams and uses events.
// Registered for DeviceType::PrivateUse1 in SimdevGuard.cpp: SimdevGuardImpl,
// or, with SIMDEV_NATIVE_HANDLE=0 in the environment,
// SimdevGuardImplWithoutNativeHandle (a plugin written for torch < 2.11).
#pragma once

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace torch_simdev {

// Everything except getStreamNativeHandle.
struct SimdevGuardImplBase : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType static_type = c10::DeviceType::PrivateUse1;

  SimdevGuardImplBase() = default;
  explicit SimdevGuardImplBase(c10::DeviceType type);

  c10::DeviceType type() const override { return static_type; }

  // Devices: the runtime's per-host-thread current device.
  c10::Device exchangeDevice(c10::Device device) const override;
  c10::Device getDevice() const override;
  void setDevice(c10::Device device) const override;
  void uncheckedSetDevice(c10::Device device) const noexcept override;
  c10::DeviceIndex deviceCount() const noexcept override;

  // Streams: see SimdevStream.h for ids, the pool and current streams.
  c10::Stream getStream(c10::Device device) const override;
  c10::Stream getDefaultStream(c10::Device device) const override;
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool is_high_priority) const override;
  c10::Stream getNewStream(c10::Device device, int priority) const override;
  c10::Stream exchangeStream(c10::Stream stream) const override;
  bool queryStream(const c10::Stream& stream) const override;
  void synchronizeStream(const c10::Stream& stream) const override;
  void synchronizeDevice(const c10::DeviceIndex device_index) const override;

  // Events: an sdEvent_t created lazily on first record.
  // EventFlag::PYTORCH_DEFAULT -> timing disabled (torch.Event()),
  // EventFlag::BACKEND_DEFAULT -> timing enabled (torch.Event(enable_timing=True)).
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override;
  void block(void* event, const c10::Stream& stream) const override;
  bool queryEvent(void* event) const override;
  void synchronizeEvent(void* event) const override;
  double elapsedTime(void* start_event, void* end_event,
                     const c10::DeviceIndex device_index) const override;
  void destroyEvent(void* event, const c10::DeviceIndex device_index) const noexcept override;

  // Tensor.record_stream: the caching allocator keeps the block from other
  // streams until the work queued on `stream` so far has finished.
  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const override;
};

struct SimdevGuardImpl final : public SimdevGuardImplBase {
  using SimdevGuardImplBase::SimdevGuardImplBase;
  // The sdStream_t: what devbridge and kernel launchers enqueue on.
  void* getStreamNativeHandle(const c10::Stream stream) const override;
};

// No getStreamNativeHandle override: c10's default throws "Backend doesn't
// support getting stream native handle.", exactly as for a plugin written
// before torch 2.11. CI runs devbridge against it (its check report, the
// exchange table's refusal, allow_null_stream, the stream-resolver route).
struct SimdevGuardImplWithoutNativeHandle final : public SimdevGuardImplBase {
  using SimdevGuardImplBase::SimdevGuardImplBase;
};

// False when the process was started with SIMDEV_NATIVE_HANDLE=0 (read once).
bool guardOverridesNativeHandle();

}  // namespace torch_simdev
