#include "SimdevGuard.h"

#include <c10/util/Logging.h>

#include <cstdlib>
#include <cstring>

#include "GilReleased.h"
#include "SimdevAllocator.h"
#include "SimdevCheck.h"
#include "SimdevDevice.h"
#include "SimdevStream.h"

namespace torch_simdev {
namespace {

void checkSimdev(c10::Device device) {
  TORCH_CHECK(device.type() == c10::DeviceType::PrivateUse1, "expected a simdev device, got ", device);
}

sdEvent_t asEvent(void* event) { return static_cast<sdEvent_t>(event); }

}  // namespace

SimdevGuardImplBase::SimdevGuardImplBase(c10::DeviceType type) {
  TORCH_CHECK(type == static_type, "simdev's device guard serves PrivateUse1, not ", type);
}

c10::Device SimdevGuardImplBase::exchangeDevice(c10::Device device) const {
  checkSimdev(device);
  const c10::DeviceIndex previous = currentDevice();
  if (device.index() != previous) setCurrentDevice(resolveDeviceIndex(device.index()));
  return simdevDevice(previous);
}

c10::Device SimdevGuardImplBase::getDevice() const { return simdevDevice(currentDevice()); }

void SimdevGuardImplBase::setDevice(c10::Device device) const {
  checkSimdev(device);
  setCurrentDevice(resolveDeviceIndex(device.index()));
}

void SimdevGuardImplBase::uncheckedSetDevice(c10::Device device) const noexcept {
  // Called from guard destructors to restore a device that was valid before.
  if (sdSetDevice(device.index()) != sdSuccess) {
    LOG(WARNING) << "simdev: could not restore the current device to simdev:"
                 << static_cast<int>(device.index()) << ": " << sdGetLastErrorString();
  }
}

c10::DeviceIndex SimdevGuardImplBase::deviceCount() const noexcept { return torch_simdev::deviceCount(); }

c10::Stream SimdevGuardImplBase::getStream(c10::Device device) const {
  checkSimdev(device);
  return currentStream(device.index());
}

c10::Stream SimdevGuardImplBase::getDefaultStream(c10::Device device) const {
  checkSimdev(device);
  return defaultStream(device.index());
}

c10::Stream SimdevGuardImplBase::getStreamFromGlobalPool(c10::Device device, bool /*is_high_priority*/) const {
  // simdev has no stream priorities.
  checkSimdev(device);
  return poolStream(device.index());
}

c10::Stream SimdevGuardImplBase::getNewStream(c10::Device device, int /*priority*/) const {
  checkSimdev(device);
  return poolStream(device.index());
}

c10::Stream SimdevGuardImplBase::exchangeStream(c10::Stream stream) const {
  return exchangeCurrentStream(stream);
}


bool SimdevGuardImplBase::queryStream(const c10::Stream& stream) const {
  const sdError_t status = sdStreamQuery(nativeStream(stream));
  if (status == sdErrorNotReady) return false;
  SIMDEV_CHECK(status);
  return true;
}

void SimdevGuardImplBase::synchronizeStream(const c10::Stream& stream) const {
  GilReleasedIfHeld no_gil;  // the stream's work may need it (GilReleased.h)
  SIMDEV_CHECK(sdStreamSynchronize(nativeStream(stream)));
}

void SimdevGuardImplBase::synchronizeDevice(const c10::DeviceIndex device_index) const {
  GilReleasedIfHeld no_gil;
  SIMDEV_CHECK(sdDeviceSynchronize(resolveDeviceIndex(device_index)));
}

void SimdevGuardImplBase::record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
                             const c10::EventFlag flag) const {
  TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "event of simdev:",
              static_cast<int>(device_index), " cannot be recorded on a stream of simdev:",
              static_cast<int>(stream.device_index()),
              "; record it on a stream of its own device, or create a new event");
  const sdStream_t native = nativeStream(stream);
  if (*event == nullptr) {
    sdEvent_t created = nullptr;
    const unsigned flags = flag == c10::EventFlag::BACKEND_DEFAULT ? sdEventDefault : sdEventDisableTiming;
    SIMDEV_CHECK(sdEventCreate(&created, flags));
    *event = created;
  }
  SIMDEV_CHECK(sdEventRecord(asEvent(*event), native));
}

void SimdevGuardImplBase::block(void* event, const c10::Stream& stream) const {
  if (event == nullptr) return;  // never recorded: nothing to wait for (as CUDA)
  SIMDEV_CHECK(sdStreamWaitEvent(nativeStream(stream), asEvent(event)));
}

bool SimdevGuardImplBase::queryEvent(void* event) const {
  if (event == nullptr) return true;
  const sdError_t status = sdEventQuery(asEvent(event));
  if (status == sdErrorNotReady) return false;
  SIMDEV_CHECK(status);
  return true;
}

void SimdevGuardImplBase::synchronizeEvent(void* event) const {
  if (event == nullptr) return;
  GilReleasedIfHeld no_gil;
  SIMDEV_CHECK(sdEventSynchronize(asEvent(event)));
}

double SimdevGuardImplBase::elapsedTime(void* start_event, void* end_event,
                                    const c10::DeviceIndex /*device_index*/) const {
  TORCH_CHECK(start_event != nullptr && end_event != nullptr,
              "both events must be recorded before computing the elapsed time between them; "
              "call record() on each first");
  float ms = 0.0f;
  const sdError_t status = sdEventElapsedTime(&ms, asEvent(start_event), asEvent(end_event));
  TORCH_CHECK(status != sdErrorNotReady,
              "elapsed time between simdev events that have not both completed yet; "
              "call synchronize() on the end event first");
  SIMDEV_CHECK(status);
  return static_cast<double>(ms);
}

void SimdevGuardImplBase::destroyEvent(void* event, const c10::DeviceIndex /*device_index*/) const noexcept {
  if (event == nullptr) return;
  if (sdEventDestroy(asEvent(event)) != sdSuccess) {
    LOG(WARNING) << "simdev: sdEventDestroy failed: " << sdGetLastErrorString();
  }
}

void SimdevGuardImplBase::recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const {
  allocator().recordStream(data_ptr, stream);
}

void* SimdevGuardImpl::getStreamNativeHandle(const c10::Stream stream) const {
  return nativeStream(stream);
}

bool guardOverridesNativeHandle() {
  // torch_simdev/__init__.py has validated the value before loading this
  // library: unset or "1" means the override, "0" means none.
  static const bool overrides = [] {
    const char* value = std::getenv("SIMDEV_NATIVE_HANDLE");
    return value == nullptr || std::strcmp(value, "0") != 0;
  }();
  return overrides;
}

namespace {

// C10_REGISTER_GUARD_IMPL with the class chosen at load time. Never freed,
// as with the macro: c10's registry holds it for the life of the process.
const c10::impl::DeviceGuardImplInterface* makeGuard() {
  if (guardOverridesNativeHandle()) return new SimdevGuardImpl();
  return new SimdevGuardImplWithoutNativeHandle();
}

const c10::impl::DeviceGuardImplRegistrar g_guard_registrar(c10::DeviceType::PrivateUse1, makeGuard());

}  // namespace

}  // namespace torch_simdev
