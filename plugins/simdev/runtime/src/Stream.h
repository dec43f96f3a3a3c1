// A simdev stream: an in-order queue of work executed by one worker thread.
//
// Progress is counted, not flagged: every enqueued item gets the next sequence
// number (1, 2, ...), and the worker counts completed items. "Item n is done"
// is then simply completed >= n, which is what events capture and what
// cross-stream waits block on.
//
// Capture (Graph.cpp): while a stream captures, enqueue() appends the item to
// the capture's recording instead of the queue; operations that need the
// queue's progress (event markers, waits, synchronisation) refuse and
// invalidate the capture instead (enqueueUncapturable, refuseIfCapturing).
#ifndef SIMDEV_SRC_STREAM_H_
#define SIMDEV_SRC_STREAM_H_

#include <simdev/runtime.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "Error.h"

namespace simdev {

struct WorkItem {
  // Whether the debug delay applies: true for real work, false for event
  // markers and cross-stream waits (they only order work).
  bool delayed = true;
  // Returns "" on success, otherwise a description of the failure that
  // becomes the stream's sticky failure.
  std::function<std::string()> run;
};

// What a capturing stream records (Graph.cpp turns it into a graph).
struct Recording {
  std::vector<WorkItem> items;
  std::string invalidated;  // non-empty once invalidated: what broke the capture
};

class Stream {
 public:
  Stream(uint64_t id, int device, bool is_default);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  uint64_t id() const { return id_; }
  int device() const { return device_; }
  bool isDefault() const { return is_default_; }
  // "stream 0x5 (device 0)", for messages.
  std::string describe() const;

  // Queues `item` and returns its sequence number; never waits for queued
  // work. Throws sdErrorInvalidStream once the stream is stopping. While the
  // stream captures, records `item` instead and returns 0 (throws
  // sdErrorStreamCaptureInvalidated once the capture was invalidated).
  uint64_t enqueue(WorkItem item);
  // enqueue() for each of `items` (copies), with no other work in between.
  void enqueueAll(const std::vector<WorkItem>& items);
  // enqueue() for work whose sequence number matters (event markers, waits):
  // refused, and the capture invalidated, while the stream captures.
  uint64_t enqueueUncapturable(WorkItem item, const char* operation);

  // Capture. begin: throws sdErrorInvalidValue if already capturing. end:
  // the recording (the capture ends even if it was invalidated; the caller
  // reports that). refuseIfCapturing: throws sdErrorStreamCaptureUnsupported
  // naming `operation` and invalidates the capture, if there is one.
  void beginCapture();
  Recording endCapture();
  sdStreamCaptureStatus captureStatus();
  void refuseIfCapturing(const char* operation);
  bool reached(uint64_t seq);
  void waitFor(uint64_t seq);
  // Waits for everything queued before the call.
  void synchronize();
  bool idle();
  // The first unreported failure of queued work ("" if none), cleared.
  std::string takeFailure();
  // The same, left in place (an event recorded after it carries it; Event.cpp).
  std::string unreportedFailure();
  // Throws sdErrorLaunchFailure with the unreported failure, if any.
  void reportFailure();
  // True on this stream's own worker thread (inside its host fns/kernels).
  bool onWorkerThread() const;
  // Lets the worker drain the queue, then joins it. Later enqueues fail with
  // "stream ... <reason>". Idempotent.
  void stop(const char* reason);

 private:
  void workerMain();
  // Caller holds mutex_. Queues or records `item`.
  uint64_t enqueueLocked(WorkItem item);
  // Caller holds mutex_ and capture_ is set: the error that refuses `operation`.
  Error refuseLocked(const char* operation);

  const uint64_t id_;
  const int device_;
  const bool is_default_;

  std::mutex mutex_;
  std::condition_variable work_ready_;  // worker waits: queue non-empty or stopping
  std::condition_variable progress_;    // waiters: completed_ advanced
  std::deque<WorkItem> queue_;
  uint64_t enqueued_ = 0;
  uint64_t completed_ = 0;
  std::string failure_;
  std::unique_ptr<Recording> capture_;  // non-null while capturing
  const char* stop_reason_ = nullptr;  // non-NULL once stopping
  std::thread worker_;                 // last member: starts after the rest exist
};

// The live stream behind a handle; throws sdErrorInvalidStream.
std::shared_ptr<Stream> findStream(sdStream_t handle);
// True on any stream's worker thread (inside a host function or kernel).
bool onAnyStreamWorker();
// All live streams of `device` (the default stream only if it was created).
std::vector<std::shared_ptr<Stream>> streamsOfDevice(int device);

}  // namespace simdev

#endif  // SIMDEV_SRC_STREAM_H_
