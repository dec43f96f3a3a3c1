#include "streams.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <type_traits>

#include "cuda_check.h"
#include "device.h"

namespace cudadev {
namespace {

struct DeviceStreams {
  std::once_flag created;
  // Set once `table` is filled: the hot paths (every operator, devbridge's
  // query) then skip the once-flag and the index check's error formatting.
  std::atomic<bool> ready{false};
  std::array<cudaStream_t, kNumStreamIds> table{};
  cudaStream_t release = nullptr;
  std::atomic<uint32_t> next_normal{0};
  std::atomic<uint32_t> next_high{0};
};

// Never destroyed: tensors freed during interpreter shutdown still reach the
// allocator, which needs these tables after static destructors would have run.
// Constant-initialised and trivially destructible, so the process keeps it
// as it is to the end and the hot paths reach it without an init guard.
static_assert(std::is_trivially_destructible<DeviceStreams>::value,
              "the streams table must outlive static destruction");
std::array<DeviceStreams, kMaxDevices> g_streams;

DeviceStreams& streams_slot(c10::DeviceIndex idx) { return g_streams[idx]; }

void create_streams(c10::DeviceIndex idx, DeviceStreams& streams) {
  ScopedDevice on(idx);  // streams belong to the device current at creation
  int least_priority = 0;
  int greatest_priority = 0;
  CUDADEV_CHECK(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority));
  if (default_stream_is_null_stream()) {
    streams.table[kDefaultStreamId] = nullptr;
  } else {
    CUDADEV_CHECK(cudaStreamCreateWithFlags(&streams.table[kDefaultStreamId],
                                            cudaStreamNonBlocking));
  }
  for (int i = 0; i < kStreamsPerPriority; ++i) {
    CUDADEV_CHECK(cudaStreamCreateWithPriority(&streams.table[1 + i], cudaStreamNonBlocking,
                                               least_priority));
    CUDADEV_CHECK(cudaStreamCreateWithPriority(&streams.table[1 + kStreamsPerPriority + i],
                                               cudaStreamNonBlocking, greatest_priority));
  }
  CUDADEV_CHECK(cudaStreamCreateWithFlags(&streams.release, cudaStreamNonBlocking));
  streams.ready.store(true, std::memory_order_release);
}

DeviceStreams& ready_streams(c10::DeviceIndex idx) {
  if (C10_LIKELY(idx >= 0 && idx < device_count())) {
    DeviceStreams& streams = streams_slot(idx);
    if (C10_LIKELY(streams.ready.load(std::memory_order_acquire))) return streams;
  }
  check_device_index(idx);
  DeviceStreams& streams = streams_slot(idx);
  std::call_once(streams.created, create_streams, idx, std::ref(streams));
  return streams;
}

bool is_external_id(c10::StreamId id) { return (id & kExternalStreamTag) != 0 && id > 0; }

cudaStream_t external_stream(c10::StreamId id) {
  return reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(id & ~kExternalStreamTag));
}

// Whether `stream` (not one of cudadev's) is a CUDA stream of GPU `idx`.
bool is_stream_of_device(cudaStream_t stream, c10::DeviceIndex idx) {
#if CUDART_VERSION >= 12080
  int owner = -1;
  if (cudaStreamGetDevice(stream, &owner) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return owner == idx;
#else
  (void)stream;
  (void)idx;
  return true;  // no way to ask before CUDA 12.8: trust the caller, as torch.cuda.ExternalStream does
#endif
}

// Zero-initialised: every device starts on its default stream (id 0).
thread_local std::array<c10::StreamId, kMaxDevices> tls_current_stream{};

c10::Stream make_stream(c10::DeviceIndex idx, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, idx), id);
}

}  // namespace

bool default_stream_is_null_stream() {
  static const bool use_null = [] {
    const char* value = std::getenv("CUDADEV_USE_NULL_STREAM");
    return value != nullptr && std::strcmp(value, "1") == 0;
  }();
  return use_null;
}

cudaStream_t native_stream(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
              "cudadev: expected a cudadev stream, got a stream of device type ",
              stream.device_type(), "; use torch.cuda streams with torch.cuda tensors only.");
  const c10::StreamId id = stream.id();
  if (C10_LIKELY(id >= 0 && id < kNumStreamIds)) {
    return ready_streams(stream.device_index()).table[id];
  }
  if (is_external_id(id)) {
    check_device_index(stream.device_index());
    return external_stream(id);
  }
  TORCH_CHECK(false, "cudadev: stream id ", id, " is not a cudadev stream (cudadev stream ids run 0 to ",
              kNumStreamIds - 1, ", or name an external CUDA stream). Get streams from "
              "torch.Stream(device='cudadev') or torch.accelerator.current_stream(), never from "
              "another backend's ids.");
}

c10::Stream current_stream(c10::DeviceIndex idx) {
  if (C10_UNLIKELY(idx < 0)) idx = resolve_device_index(idx);
  (void)ready_streams(idx);  // validates idx before the table read
  return make_stream(idx, tls_current_stream[idx]);
}

cudaStream_t current_native_stream(c10::DeviceIndex idx) {
  if (C10_UNLIKELY(idx < 0)) idx = resolve_device_index(idx);
  const DeviceStreams& streams = ready_streams(idx);  // validates idx before the table read
  const c10::StreamId id = tls_current_stream[idx];
  if (C10_LIKELY(id < kNumStreamIds)) return streams.table[id];
  return native_stream(make_stream(idx, id));  // an external stream
}

c10::Stream default_stream(c10::DeviceIndex idx) {
  idx = resolve_device_index(idx);
  (void)ready_streams(idx);
  return make_stream(idx, kDefaultStreamId);
}

c10::Stream pool_stream(c10::DeviceIndex idx, bool high_priority) {
  idx = resolve_device_index(idx);
  DeviceStreams& streams = ready_streams(idx);
  std::atomic<uint32_t>& next = high_priority ? streams.next_high : streams.next_normal;
  const auto slot = static_cast<c10::StreamId>(next.fetch_add(1) % kStreamsPerPriority);
  return make_stream(idx, 1 + (high_priority ? kStreamsPerPriority : 0) + slot);
}

c10::Stream exchange_current_stream(const c10::Stream& stream) {
  (void)native_stream(stream);  // validates type, device and id
  const c10::DeviceIndex idx = stream.device_index();
  const c10::Stream previous = make_stream(idx, tls_current_stream[idx]);
  tls_current_stream[idx] = stream.id();
  return previous;
}

int current_stream_query(int32_t device, void** out_stream) noexcept {
  if (device < 0 || device >= kMaxDevices) return -1;
  // The hot path: the thread's stream id, then the device's table.
  const DeviceStreams& streams = g_streams[device];
  const c10::StreamId id = tls_current_stream[device];
  if (C10_LIKELY(streams.ready.load(std::memory_order_acquire) && id < kNumStreamIds)) {
    *out_stream = static_cast<void*>(streams.table[id]);
    return 0;
  }
  try {  // first use of the device (creates its streams), or an external stream
    *out_stream = static_cast<void*>(current_native_stream(static_cast<c10::DeviceIndex>(device)));
    return 0;
  } catch (...) {
    return -1;
  }
}

int external_stream_hook(int32_t device, void* stream, int64_t* out_stream_id) noexcept {
  if (device < 0 || device >= kMaxDevices) return -1;
  try {
    const auto idx = static_cast<c10::DeviceIndex>(device);
    const DeviceStreams& streams = ready_streams(idx);
    const auto native = static_cast<cudaStream_t>(stream);
    for (c10::StreamId id = 0; id < kNumStreamIds; ++id) {
      if (streams.table[id] == native) {
        *out_stream_id = id;
        return 0;
      }
    }
    const auto address = static_cast<c10::StreamId>(reinterpret_cast<uintptr_t>(stream));
    if ((address & kExternalStreamTag) != 0 || address < 0 || !is_stream_of_device(native, idx)) {
      return -1;
    }
    *out_stream_id = kExternalStreamTag | address;
    return 0;
  } catch (...) {
    return -1;
  }
}

cudaStream_t release_stream(c10::DeviceIndex idx) {
  return ready_streams(idx).release;
}

void stream_wait_stream(cudaStream_t waiter, cudaStream_t producer) {
  if (waiter == producer) {
    return;
  }
  cudaEvent_t event = nullptr;
  CUDADEV_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  const cudaError_t recorded = cudaEventRecord(event, producer);
  const cudaError_t waited =
      recorded == cudaSuccess ? cudaStreamWaitEvent(waiter, event, 0) : recorded;
  // Destroying an event whose wait is still pending is allowed: CUDA releases
  // it once the wait no longer needs it.
  (void)cudaEventDestroy(event);
  CUDADEV_CHECK(waited);
}

}  // namespace cudadev
