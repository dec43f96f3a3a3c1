// simdev streams as c10::Stream values.
//
// StreamId encoding (private to this backend; use native_handle() to get the
// sdStream_t, never the id):
//   0            the device's default stream (sdStreamGetDefault)
//   1..kPoolSize a stream of the device's pool
//   kExternalStreamIdBase + handle
//                a stream created outside torch (sdStreamCreate by a kernel
//                library, a DLPack consumer's stream): torch.Stream,
//                torch.Event and devbridge can then use it, as
//                torch.cuda.ExternalStream does for CUDA
//
// The pool: every simdev stream owns a worker thread, so streams are not
// created per request. As with CUDA's stream pool, each device lazily creates
// kPoolSize streams on first request, and torch.Stream(device="simdev") /
// getNewStream / getStreamFromGlobalPool hand them out round-robin. Two
// torch.Stream objects may therefore share a stream once more than kPoolSize
// are alive; that only adds ordering, never removes it.
//
// The current stream is per host thread and per device (thread_local), the
// default stream until set (torch.accelerator.set_stream, `with stream:`).
#pragma once

#include <simdev/runtime.h>

#include <c10/core/Stream.h>

namespace torch_simdev {

constexpr int kStreamPoolSize = 8;
// The runtime's limit on SIMDEV_DEVICE_COUNT (runtime/src/Config.cpp).
constexpr int kMaxDevices = 64;
constexpr c10::StreamId kExternalStreamIdBase = c10::StreamId{1} << 32;

c10::Stream defaultStream(c10::DeviceIndex device);
// The next pool stream of `device`, round-robin.
c10::Stream poolStream(c10::DeviceIndex device);

// The calling thread's current stream of `device` (-1: current device).
c10::Stream currentStream(c10::DeviceIndex device);
// Makes `stream` current for its device on this thread; returns the previous
// current stream of that device. Does not change the current device.
c10::Stream exchangeCurrentStream(const c10::Stream& stream);

// The runtime handle of a simdev c10::Stream; raises a clear error for a
// stream of another device type or an id this backend never handed out.
sdStream_t nativeStream(const c10::Stream& stream);

// The calling thread's current sdStream_t of `device` (-1: current device).
sdStream_t currentNativeStream(c10::DeviceIndex device);

// The StreamId under which `stream`, a live stream of `device`, is known:
// 0 or a pool id for torch's own streams, an external id otherwise. False
// when `stream` is not a stream of that device. Never throws.
bool streamIdOf(c10::DeviceIndex device, sdStream_t stream, c10::StreamId* out_id) noexcept;

}  // namespace torch_simdev
