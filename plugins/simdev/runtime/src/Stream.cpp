#include "Stream.h"

#include <atomic>
#include <chrono>
#include <sstream>

#include "Config.h"
#include "DebugDelay.h"
#include "Error.h"
#include "HandleTable.h"
#include "WorkFailure.h"

namespace simdev {
namespace {

// The stream whose worker is the calling thread (nullptr on other threads);
// this is how a synchronizing call notices it would wait on itself.
thread_local const Stream* current_worker = nullptr;

std::string runItem(WorkItem& item) {
  if (item.delayed) {
    if (const uint32_t us = opDelayUs()) std::this_thread::sleep_for(std::chrono::microseconds(us));
  }
  try {
    return item.run();
  } catch (const std::exception& e) {
    return std::string("queued work threw a C++ exception: ") + e.what();
  } catch (...) {
    return "queued work threw an unknown exception";
  }
}

// Process-wide stream state. Deliberately leaked: worker threads, and code
// that runs during static destruction (e.g. a caching allocator's destructor
// freeing memory or synchronizing), may still reach it after every static of
// this library would have been destroyed. Leaked objects remain reachable from
// this global pointer, so LeakSanitizer does not report them.
struct StreamRegistry {
  HandleTable<Stream> table;
  std::mutex lifecycle_mutex;                    // guards the two members below
  std::vector<std::shared_ptr<Stream>> defaults;  // by device, created lazily
  bool exiting = false;                          // set once exit() began
};

StreamRegistry& registry() {
  static StreamRegistry* instance = new StreamRegistry;
  return *instance;
}

constexpr const char* kExitReason =
    "was shut down because the process is exiting; no work can be queued after exit() began";

std::shared_ptr<Stream> createStream(int device, bool is_default) {
  const uint64_t id = nextHandleId();
  auto stream = std::make_shared<Stream>(id, device, is_default);
  registry().table.insert(id, stream);
  return stream;
}

std::shared_ptr<Stream> defaultStream(int device) {
  requireDevice(device);
  StreamRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.lifecycle_mutex);
  if (r.exiting) throw error(sdErrorInvalidStream, "the default stream of device ", device, " ", kExitReason);
  if (r.defaults.empty()) r.defaults.resize(static_cast<size_t>(config().device_count));
  auto& slot = r.defaults[static_cast<size_t>(device)];
  if (!slot) slot = createStream(device, /*is_default=*/true);
  return slot;
}

// Stops every worker when the process exits, so no thread runs queued work
// while the process tears down, and none is left unjoined. Runs from this
// library's static destruction, i.e. after the static destructors of
// libraries loaded later (such as a PyTorch backend built on simdev).
struct StopWorkersAtExit {
  ~StopWorkersAtExit() {
    StreamRegistry& r = registry();
    {
      std::lock_guard<std::mutex> lock(r.lifecycle_mutex);
      r.exiting = true;  // no stream can be created from here on
    }
    for (const auto& stream : r.table.snapshot()) stream->stop(kExitReason);
  }
} stop_workers_at_exit;

}  // namespace

Stream::Stream(uint64_t id, int device, bool is_default)
    : id_(id), device_(device), is_default_(is_default), worker_([this] { workerMain(); }) {}

Stream::~Stream() { stop("was destroyed"); }

std::string Stream::describe() const {
  std::ostringstream text;
  text << (is_default_ ? "default stream 0x" : "stream 0x") << std::hex << id_ << std::dec
       << " (device " << device_ << ")";
  return text.str();
}

void Stream::workerMain() {
  current_worker = this;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [this] { return !queue_.empty() || stop_reason_ != nullptr; });
    if (queue_.empty()) return;  // stopping and drained
    std::string failure;
    {
      WorkItem item = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      failure = runItem(item);
      // `item` (and whatever its closure keeps alive) is released here,
      // before completion is published.
    }
    lock.lock();
    ++completed_;
    if (!failure.empty() && failure_.empty()) failure_ = std::move(failure);
    progress_.notify_all();
  }
}

uint64_t Stream::enqueueLocked(WorkItem item) {
  if (stop_reason_ != nullptr) throw error(sdErrorInvalidStream, describe(), " ", stop_reason_);
  if (capture_) {
    if (!capture_->invalidated.empty()) {
      throw error(sdErrorStreamCaptureInvalidated, "the capture on ", describe(), " was invalidated (",
                  capture_->invalidated, "); end it with sdStreamEndCapture and capture again");
    }
    capture_->items.push_back(std::move(item));
    return 0;
  }
  queue_.push_back(std::move(item));
  work_ready_.notify_one();
  return ++enqueued_;
}

uint64_t Stream::enqueue(WorkItem item) {
  std::lock_guard<std::mutex> lock(mutex_);
  return enqueueLocked(std::move(item));
}

void Stream::enqueueAll(const std::vector<WorkItem>& items) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const WorkItem& item : items) enqueueLocked(item);
}

Error Stream::refuseLocked(const char* operation) {
  std::string reason = std::string(operation) + " on the capturing " + describe();
  if (capture_->invalidated.empty()) capture_->invalidated = reason;
  return error(sdErrorStreamCaptureUnsupported, operation, " cannot be captured: ", describe(),
               " is capturing, and simdev captures the work of one stream with no synchronisation "
               "or cross-stream ordering in it; the capture is now invalidated. Do it before "
               "sdStreamBeginCapture or after sdStreamEndCapture");
}

uint64_t Stream::enqueueUncapturable(WorkItem item, const char* operation) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture_) throw refuseLocked(operation);
  return enqueueLocked(std::move(item));
}

void Stream::beginCapture() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stop_reason_ != nullptr) throw error(sdErrorInvalidStream, describe(), " ", stop_reason_);
  if (capture_) {
    throw error(sdErrorInvalidValue, describe(),
                " is already capturing; end that capture with sdStreamEndCapture first");
  }
  capture_ = std::make_unique<Recording>();
}

Recording Stream::endCapture() {
  std::unique_ptr<Recording> recording;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!capture_) {
      throw error(sdErrorInvalidValue, describe(), " is not capturing; call sdStreamBeginCapture first");
    }
    recording = std::move(capture_);
  }
  return std::move(*recording);
}

sdStreamCaptureStatus Stream::captureStatus() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!capture_) return sdStreamCaptureStatusNone;
  return capture_->invalidated.empty() ? sdStreamCaptureStatusActive : sdStreamCaptureStatusInvalidated;
}

void Stream::refuseIfCapturing(const char* operation) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture_) throw refuseLocked(operation);
}

bool Stream::reached(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ >= seq;
}

void Stream::waitFor(uint64_t seq) {
  std::unique_lock<std::mutex> lock(mutex_);
  progress_.wait(lock, [&] { return completed_ >= seq; });
}

void Stream::synchronize() {
  uint64_t last;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    last = enqueued_;
  }
  waitFor(last);
}

bool Stream::idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ == enqueued_;
}

std::string Stream::takeFailure() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string failure;
  failure.swap(failure_);
  return failure;
}

std::string Stream::unreportedFailure() {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void Stream::reportFailure() {
  std::string failure = takeFailure();
  if (!failure.empty()) {
    throw Error(sdErrorLaunchFailure, failure + " (reported once; later work on the stream still ran)");
  }
}

bool Stream::onWorkerThread() const { return current_worker == this; }

bool onAnyStreamWorker() { return current_worker != nullptr; }

void Stream::stop(const char* reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_reason_ != nullptr) return;
    stop_reason_ = reason;
  }
  work_ready_.notify_all();
  // A host function that calls exit() stops its own stream: it cannot join
  // itself, and the worker ends when that host function returns.
  if (onWorkerThread()) {
    worker_.detach();
  } else {
    worker_.join();
  }
}

std::shared_ptr<Stream> findStream(sdStream_t handle) {
  if (handle == nullptr) {
    throw error(sdErrorInvalidStream, "stream is NULL; simdev has no implicit stream, use sdStreamGetDefault(device)");
  }
  auto stream = registry().table.find(handleId(handle));
  if (!stream) {
    throw error(sdErrorInvalidStream, "stream ", static_cast<const void*>(handle),
                " is not a live stream (destroyed, or not a handle from sdStreamCreate/sdStreamGetDefault)");
  }
  return stream;
}

std::vector<std::shared_ptr<Stream>> streamsOfDevice(int device) {
  std::vector<std::shared_ptr<Stream>> matching;
  for (auto& stream : registry().table.snapshot()) {
    if (stream->device() == device) matching.push_back(std::move(stream));
  }
  return matching;
}

// One queued host function: "" when it returned 0, else the stream's failure
// text (with the message it set; see WorkFailure.h). An injected fault skips it.
std::string runHostFunction(sdHostFn_t fn, void* user_data, const std::string& where) {
  std::ostringstream failure;
  failure << "host function " << reinterpret_cast<void*>(fn);
  if (takeInjectedKernelFault()) return failure.str() + " on " + where + " " + injectedFaultText();
  clearWorkFailureMessage();
  const int rc = fn(user_data);
  if (rc == 0) return {};
  failure << " returned " << rc << " on " << where;
  return withWorkFailureMessage(failure.str());
}

}  // namespace simdev

using simdev::apiCall;
using simdev::error;

extern "C" {

SIMDEV_API sdError_t sdStreamGetDefault(int device, sdStream_t* out_stream) {
  return apiCall("sdStreamGetDefault", [&] {
    simdev::requireOutput(out_stream, "out_stream");
    *out_stream = simdev::asHandle<sdStream_t>(simdev::defaultStream(device)->id());
  });
}

SIMDEV_API sdError_t sdStreamCreate(int device, sdStream_t* out_stream) {
  return apiCall("sdStreamCreate", [&] {
    simdev::requireOutput(out_stream, "out_stream");
    simdev::requireDevice(device);
    auto& r = simdev::registry();
    std::lock_guard<std::mutex> lock(r.lifecycle_mutex);
    if (r.exiting) throw error(sdErrorInvalidStream, "cannot create a stream: the process is exiting");
    *out_stream = simdev::asHandle<sdStream_t>(simdev::createStream(device, false)->id());
  });
}

SIMDEV_API sdError_t sdStreamDestroy(sdStream_t stream) {
  return apiCall("sdStreamDestroy", [&] {
    auto s = simdev::findStream(stream);
    if (s->isDefault()) {
      throw error(sdErrorInvalidValue, s->describe(),
                  " is a default stream; default streams live as long as the process, destroy only streams from sdStreamCreate");
    }
    if (s->onWorkerThread()) {
      throw error(sdErrorDeadlock, "called from a host function or kernel running on ", s->describe(),
                  " itself, which cannot wait for its own queue; destroy it from another thread");
    }
    s->refuseIfCapturing("sdStreamDestroy");
    if (!simdev::registry().table.erase(s->id())) {
      throw error(sdErrorInvalidStream, s->describe(), " was destroyed concurrently by another thread");
    }
    s->stop("was destroyed");
    if (std::string failure = s->takeFailure(); !failure.empty()) {
      throw error(sdErrorLaunchFailure, "the stream was destroyed, but its queued work failed: ", failure);
    }
  });
}

SIMDEV_API sdError_t sdStreamGetDevice(sdStream_t stream, int* out_device) {
  return apiCall("sdStreamGetDevice", [&] {
    simdev::requireOutput(out_device, "out_device");
    *out_device = simdev::findStream(stream)->device();
  });
}

SIMDEV_API sdError_t sdStreamQuery(sdStream_t stream) {
  return apiCall("sdStreamQuery", [&] {
    auto s = simdev::findStream(stream);
    s->refuseIfCapturing("sdStreamQuery");
    s->reportFailure();
    return s->idle() ? sdSuccess : sdErrorNotReady;
  });
}

SIMDEV_API sdError_t sdStreamSynchronize(sdStream_t stream) {
  return apiCall("sdStreamSynchronize", [&] {
    auto s = simdev::findStream(stream);
    if (s->onWorkerThread()) {
      throw error(sdErrorDeadlock, "called from a host function or kernel running on ", s->describe(),
                  " itself; it would wait for itself forever. Synchronize from another thread, or order work with events");
    }
    s->refuseIfCapturing("sdStreamSynchronize");
    s->synchronize();
    s->reportFailure();
  });
}

SIMDEV_API sdError_t sdLaunchHostFunc(sdStream_t stream, sdHostFn_t fn, void* user_data) {
  return apiCall("sdLaunchHostFunc", [&] {
    auto s = simdev::findStream(stream);
    if (fn == nullptr) throw error(sdErrorInvalidValue, "fn is NULL; pass the host function to queue");
    const std::string where = s->describe();
    s->enqueue({true, [fn, user_data, where]() { return simdev::runHostFunction(fn, user_data, where); }});
  });
}

namespace simdev {
namespace {

// The user data of sdLaunchHostFuncWithCleanup: shared by every queued and
// recorded copy of the work, cleaned up when the last copy is dropped.
struct OwnedUserData {
  OwnedUserData(void* data, void (*fn)(void*)) : user_data(data), cleanup(fn) {}
  OwnedUserData(const OwnedUserData&) = delete;
  OwnedUserData& operator=(const OwnedUserData&) = delete;
  void* const user_data;
  void (*const cleanup)(void*);
  bool armed = true;  // false when the launch failed: the caller keeps user_data
  ~OwnedUserData() {
    if (armed) cleanup(user_data);
  }
};

}  // namespace
}  // namespace simdev

SIMDEV_API sdError_t sdLaunchHostFuncWithCleanup(sdStream_t stream, sdHostFn_t fn, void* user_data,
                                                 void (*cleanup)(void*)) {
  return apiCall("sdLaunchHostFuncWithCleanup", [&] {
    auto s = simdev::findStream(stream);
    if (fn == nullptr) throw error(sdErrorInvalidValue, "fn is NULL; pass the host function to queue");
    if (cleanup == nullptr) {
      throw error(sdErrorInvalidValue, "cleanup is NULL; pass the function that frees user_data, or use sdLaunchHostFunc");
    }
    auto owned = std::make_shared<simdev::OwnedUserData>(user_data, cleanup);
    const std::string where = s->describe();
    try {
      s->enqueue({true, [fn, owned, where]() { return simdev::runHostFunction(fn, owned->user_data, where); }});
    } catch (...) {
      owned->armed = false;
      throw;
    }
  });
}

}  // extern "C"
