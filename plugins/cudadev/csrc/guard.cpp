// c10's device guard interface for cudadev: device switching, streams,
// events and synchronisation, all on CUDA. This is what c10::Stream,
// torch.Stream, torch.Event, torch.accelerator and autograd's stream logic
// call for PrivateUse1 tensors.

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "allocator.h"
#include "cuda_check.h"
#include "device.h"
#include "streams.h"

namespace cudadev {
namespace {

constexpr auto kType = c10::DeviceType::PrivateUse1;

void check_is_cudadev(const c10::Device& device) {
  TORCH_CHECK(device.type() == kType, "cudadev: expected a cudadev device, got ", device);
}

class CudadevGuardImpl final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override { return kType; }

  c10::Device exchangeDevice(c10::Device device) const override {
    check_is_cudadev(device);
    const c10::DeviceIndex previous = current_device();
    if (device.index() >= 0 && device.index() != previous) {
      set_device(device.index());
    }
    return c10::Device(kType, previous);
  }

  c10::Device getDevice() const override { return c10::Device(kType, current_device()); }

  void setDevice(c10::Device device) const override {
    check_is_cudadev(device);
    TORCH_CHECK(device.index() >= 0, "cudadev: setDevice needs a device index, got ", device);
    set_device(device.index());
  }

  void uncheckedSetDevice(c10::Device device) const noexcept override {
    (void)exchange_device_noexcept(device.index());
  }

  c10::Stream getStream(c10::Device device) const override {
    check_is_cudadev(device);
    return current_stream(device.index());
  }

  c10::Stream getDefaultStream(c10::Device device) const override {
    check_is_cudadev(device);
    return default_stream(device.index());
  }

  c10::Stream getStreamFromGlobalPool(c10::Device device,
                                      bool isHighPriority = false) const override {
    check_is_cudadev(device);
    return pool_stream(device.index(), isHighPriority);
  }

  // CUDA's convention: a negative priority is a higher priority.
  c10::Stream getNewStream(c10::Device device, int priority = 0) const override {
    check_is_cudadev(device);
    return pool_stream(device.index(), priority < 0);
  }

  c10::Stream exchangeStream(c10::Stream stream) const override {
    return exchange_current_stream(stream);
  }

  // The hook that makes Stream::native_handle() / torch.Stream.native_handle
  // return the cudaStream_t (torch >= 2.11). devbridge relies on it.
  void* getStreamNativeHandle(const c10::Stream stream) const override {
    return static_cast<void*>(native_stream(stream));
  }

  void destroyEvent(void* event, const c10::DeviceIndex device_index) const noexcept override {
    if (event == nullptr) {
      return;
    }
    const int previous = exchange_device_noexcept(device_index);
    if (cudaEventDestroy(static_cast<cudaEvent_t>(event)) != cudaSuccess) {
      (void)cudaGetLastError();  // e.g. the CUDA runtime is already shut down
    }
    if (previous >= 0) {
      (void)exchange_device_noexcept(previous);
    }
  }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "cudadev: the event belongs to cudadev:", static_cast<int>(device_index),
                " but the stream recording it is on cudadev:",
                static_cast<int>(stream.device_index()), "; record it on a stream of its device.");
    const cudaStream_t native = native_stream(stream);
    ScopedDevice on(stream.device_index());  // events are created on, and recorded from, one device
    auto cuda_event = static_cast<cudaEvent_t>(*event);
    if (cuda_event == nullptr) {
      // torch.Event(enable_timing=True) asks for BACKEND_DEFAULT; plain events
      // skip timing, which makes them cheaper to record and wait on.
      unsigned int flags = cudaEventDisableTiming;
      switch (flag) {
        case c10::EventFlag::PYTORCH_DEFAULT:
          flags = cudaEventDisableTiming;
          break;
        case c10::EventFlag::BACKEND_DEFAULT:
          flags = cudaEventDefault;
          break;
        default:
          TORCH_CHECK(false, "cudadev: unknown event flag ", static_cast<int>(flag));
      }
      CUDADEV_CHECK(cudaEventCreateWithFlags(&cuda_event, flags));
      *event = cuda_event;
    }
    CUDADEV_CHECK(cudaEventRecord(cuda_event, native));
  }

  void block(void* event, const c10::Stream& stream) const override {
    if (event == nullptr) {
      return;  // never recorded: nothing to wait for
    }
    const cudaStream_t native = native_stream(stream);
    ScopedDevice on(stream.device_index());
    CUDADEV_CHECK(cudaStreamWaitEvent(native, static_cast<cudaEvent_t>(event), 0));
  }

  bool queryEvent(void* event) const override {
    if (event == nullptr) {
      return true;
    }
    const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    CUDADEV_CHECK(status);
    return true;
  }

  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }

  // cudadev runs torch's CUDA kernels, so it supports the dtypes they do: all
  // of them (the default capability).
  c10::DeviceCapability getDeviceCapability(c10::Device device) const override {
    check_is_cudadev(device);
    return c10::DeviceCapability();
  }

  bool queryStream(const c10::Stream& stream) const override {
    const cudaStream_t native = native_stream(stream);
    ScopedDevice on(stream.device_index());  // the null stream means the current device's
    const cudaError_t status = cudaStreamQuery(native);
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    CUDADEV_CHECK(status);
    return true;
  }

  void synchronizeStream(const c10::Stream& stream) const override {
    const cudaStream_t native = native_stream(stream);
    ScopedDevice on(stream.device_index());
    CUDADEV_CHECK(cudaStreamSynchronize(native));
  }

  void synchronizeEvent(void* event) const override {
    if (event == nullptr) {
      return;
    }
    CUDADEV_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
  }

  // All work on the GPU, cudadev's and torch.cuda's alike: the device is one.
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    ScopedDevice on(resolve_device_index(device_index));
    CUDADEV_CHECK(cudaDeviceSynchronize());
  }

  void recordDataPtrOnStream(const c10::DataPtr& data_ptr,
                             const c10::Stream& stream) const override {
    allocator().recordStream(data_ptr, stream);
  }

  double elapsedTime(void* start, void* end, const c10::DeviceIndex device_index) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "cudadev: elapsed_time needs both events to have been recorded first.");
    ScopedDevice on(resolve_device_index(device_index));
    float ms = 0.0f;
    const cudaError_t status = cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start),
                                                    static_cast<cudaEvent_t>(end));
    if (status == cudaErrorInvalidResourceHandle) {
      (void)cudaGetLastError();
      TORCH_CHECK(false,
                  "cudadev: elapsed_time needs events created with enable_timing=True "
                  "(torch.Event(device='cudadev', enable_timing=True)).");
    }
    CUDADEV_CHECK(status);
    return static_cast<double>(ms);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, CudadevGuardImpl);

}  // namespace
}  // namespace cudadev
