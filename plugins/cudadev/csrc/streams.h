#pragma once
// cudadev's own CUDA streams.
//
// Per device, created on first use:
//   id 0        the plugin's default stream: its own non-blocking cudaStream,
//               NOT CUDA's legacy default stream (stream 0), so cudadev work
//               never serialises with torch.cuda's default stream. With
//               CUDADEV_USE_NULL_STREAM=1 in the environment the default stream
//               is CUDA's null stream instead (for comparing behaviour).
//   ids 1..8    a pool of normal-priority non-blocking streams
//   ids 9..16   a pool of high-priority non-blocking streams
//   kExternalStreamTag | pointer
//               a CUDA stream cudadev did not create (a DLPack consumer's, a
//               torch.cuda stream of the same GPU), as c10's CUDA backend
//               keeps external streams: usable with torch.Stream and
//               torch.Event; the creator keeps it alive
// A c10::Stream of type PrivateUse1 carries one of these ids; an internal id
// is an index into the device's table and means nothing outside cudadev (use
// Stream::native_handle() for the cudaStream_t). Each thread has its own
// current stream per device (initially the default stream). Streams live as
// long as the process.

#include <cuda_runtime_api.h>

#include <cstdint>

#include <c10/core/Stream.h>

namespace cudadev {

constexpr c10::StreamId kDefaultStreamId = 0;
constexpr int kStreamsPerPriority = 8;
constexpr c10::StreamId kNumStreamIds = 1 + 2 * kStreamsPerPriority;
constexpr c10::StreamId kExternalStreamTag = c10::StreamId{1} << 62;

// Whether CUDADEV_USE_NULL_STREAM=1 (read once per process).
bool default_stream_is_null_stream();

// The cudaStream_t behind a cudadev stream; raises for a stream that is not
// cudadev's (wrong device type, device or id).
cudaStream_t native_stream(const c10::Stream& stream);

// idx may be -1 (current device) in all of these.
c10::Stream current_stream(c10::DeviceIndex idx);
cudaStream_t current_native_stream(c10::DeviceIndex idx);
c10::Stream default_stream(c10::DeviceIndex idx);
// Round-robin over the pool of the given priority.
c10::Stream pool_stream(c10::DeviceIndex idx, bool high_priority);

// Makes `stream` the calling thread's current stream for its device and
// returns the one it replaces. Does not change the current device.
c10::Stream exchange_current_stream(const c10::Stream& stream);

// devbridge's stream hooks (devbridge/c_runtime_api.h, restated so cudadev
// builds without devbridge): the calling thread's current cudaStream_t of
// `device` (DevbridgeCurrentStreamFn: a thread-local read once the device's
// streams exist), and the StreamId under which cudadev knows a CUDA stream
// of `device` (DevbridgeExternalStreamFn). Both return 0, or -1; never throw.
int current_stream_query(int32_t device, void** out_stream) noexcept;
int external_stream_hook(int32_t device, void* stream, int64_t* out_stream_id) noexcept;

// An internal stream per device on which the allocator issues frees that must
// wait for several streams (see allocator.cpp). Not reachable as a StreamId.
cudaStream_t release_stream(c10::DeviceIndex idx);

// Makes `waiter` wait (on the GPU, no host sync) for all work enqueued on
// `producer` so far. Both streams belong to the current device.
void stream_wait_stream(cudaStream_t waiter, cudaStream_t producer);

}  // namespace cudadev
