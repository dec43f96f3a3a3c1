// hostplug's "device runtime": what a vendor library would provide, kept
// torch-free apart from c10's small index types. A device is host memory
// plus streams; a stream is one worker thread draining a FIFO queue, so
// operators queued on it run asynchronously, in order, like kernels on a GPU
// stream. Events are markers a stream sets when it reaches them.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace hostplug {

// Two devices: enough to test per-thread current devices and cross-device
// copies without making every test pay for more.
constexpr c10::DeviceIndex kDeviceCount = 2;

class Stream {
 public:
  Stream(c10::DeviceIndex device, c10::StreamId id);
  // Streams live for the whole process (their ids are handed out to torch,
  // which may use them at any time), so neither they nor their workers are
  // ever destroyed.
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  c10::DeviceIndex device() const { return device_; }
  c10::StreamId id() const { return id_; }

  // Queues `task`; returns at once. A task that throws marks the stream
  // failed: the next synchronize() raises its message (later tasks still run).
  void enqueue(std::function<void()> task);
  // Waits for every task queued before the call, then raises a failure if any.
  void synchronize();
  // True when every queued task has run.
  bool query();

 private:
  void workerMain();

  const c10::DeviceIndex device_;
  const c10::StreamId id_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  std::deque<std::function<void()>> queue_;
  uint64_t queued_ = 0;
  uint64_t finished_ = 0;
  std::string failure_;
  std::thread worker_;
};

// Stream ids: 0 is a device's default stream; getNewStream/getStreamFromGlobalPool
// hand out 1, 2, ... (per device, up to kMaxStreams, then reused round robin).
constexpr c10::StreamId kMaxStreams = 64;
Stream& stream(c10::DeviceIndex device, c10::StreamId id);
c10::StreamId newStreamId(c10::DeviceIndex device);

// Per host thread, like CUDA's: the current device and each device's current stream.
c10::DeviceIndex currentDevice();
void setCurrentDevice(c10::DeviceIndex device);
Stream& currentStream(c10::DeviceIndex device);
void setCurrentStream(c10::DeviceIndex device, c10::StreamId id);

void synchronizeDevice(c10::DeviceIndex device);  // every stream of the device
void checkDevice(c10::DeviceIndex device);         // raises for an index outside [0, kDeviceCount)

// The debug delay (torch.hostplug.set_op_delay_us): every operator queued
// while it is nonzero sleeps that long on its stream's worker before running.
// Read when the operator is queued; events and waits are not delayed.
void setOpDelayUs(int64_t us);
int64_t opDelayUs();
// Queues an operator on the current stream of `device` (with the delay).
void enqueueOperator(c10::DeviceIndex device, std::function<void()> op);

// An event: the marker of its last record, which the recording stream sets
// when it reaches it. A wait queued on another stream holds the marker it saw.
struct Marker {
  std::mutex mutex;
  std::condition_variable reached;
  bool done = false;
  std::chrono::steady_clock::time_point when;
  void wait();
};
struct Event {
  std::shared_ptr<Marker> marker;  // null until recorded
};
// Queues a new marker on `s` (set, with the time, when `s` reaches it).
std::shared_ptr<Marker> recordMarker(Stream& s);
// Queues on `s` a wait for `marker`: what `s` runs later runs after it is set.
void waitForMarker(Stream& s, std::shared_ptr<Marker> marker);

}  // namespace hostplug
