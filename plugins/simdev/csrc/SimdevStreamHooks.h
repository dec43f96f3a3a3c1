// simdev's answers to devbridge's stream hooks (devbridge/c_runtime_api.h),
// as plain C functions: torch_simdev hands them to devbridge as PyCapsules
// from its autoload hook. The signatures are devbridge's C ABI, restated
// here so that simdev builds without devbridge's headers.
#pragma once

#include <cstdint>

namespace torch_simdev {

// DevbridgeCurrentStreamFn: the calling thread's current sdStream_t of
// `device`, one thread-local read once the device's streams exist.
int currentStreamQuery(int32_t device, void** out_stream) noexcept;

// DevbridgeExternalStreamFn: the StreamId under which simdev's guard knows
// the live stream `stream` of `device` (a pool stream's own id, or an
// external id for a stream created with sdStreamCreate).
int externalStreamHook(int32_t device, void* stream, int64_t* out_stream_id) noexcept;

// DevbridgeStreamResolver: the sdStream_t of (device, StreamId); what a
// plugin without a getStreamNativeHandle override registers instead.
int streamResolver(int32_t device, int64_t stream_id, void** out_stream) noexcept;

}  // namespace torch_simdev
