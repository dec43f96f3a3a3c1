#include "stream.h"

#include <atomic>
#include <chrono>
#include <sstream>

#include "config.h"
#include "debug_delay.h"
#include "error.h"
#include "handle_table.h"

namespace simdev {
namespace {

// The stream whose worker is the calling thread (nullptr on other threads);
// this is how a synchronizing call notices it would wait on itself.
thread_local const Stream* current_worker = nullptr;

std::string run_item(WorkItem& item) {
  if (item.delayed) {
    if (const uint32_t us = op_delay_us()) std::this_thread::sleep_for(std::chrono::microseconds(us));
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

std::shared_ptr<Stream> create_stream(int device, bool is_default) {
  const uint64_t id = next_handle_id();
  auto stream = std::make_shared<Stream>(id, device, is_default);
  registry().table.insert(id, stream);
  return stream;
}

std::shared_ptr<Stream> default_stream(int device) {
  require_device(device);
  StreamRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.lifecycle_mutex);
  if (r.exiting) throw error(sdErrorInvalidStream, "the default stream of device ", device, " ", kExitReason);
  if (r.defaults.empty()) r.defaults.resize(static_cast<size_t>(config().device_count));
  auto& slot = r.defaults[static_cast<size_t>(device)];
  if (!slot) slot = create_stream(device, /*is_default=*/true);
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
    : id_(id), device_(device), is_default_(is_default), worker_([this] { worker_main(); }) {}

Stream::~Stream() { stop("was destroyed"); }

std::string Stream::describe() const {
  std::ostringstream text;
  text << (is_default_ ? "default stream 0x" : "stream 0x") << std::hex << id_ << std::dec
       << " (device " << device_ << ")";
  return text.str();
}

void Stream::worker_main() {
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
      failure = run_item(item);
      // `item` (and whatever its closure keeps alive) is released here,
      // before completion is published.
    }
    lock.lock();
    ++completed_;
    if (!failure.empty() && failure_.empty()) failure_ = std::move(failure);
    progress_.notify_all();
  }
}

uint64_t Stream::enqueue_locked(WorkItem item) {
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
  return enqueue_locked(std::move(item));
}

void Stream::enqueue_all(const std::vector<WorkItem>& items) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const WorkItem& item : items) enqueue_locked(item);
}

Error Stream::refuse_locked(const char* operation) {
  std::string reason = std::string(operation) + " on the capturing " + describe();
  if (capture_->invalidated.empty()) capture_->invalidated = reason;
  return error(sdErrorStreamCaptureUnsupported, operation, " cannot be captured: ", describe(),
               " is capturing, and simdev captures the work of one stream with no synchronisation "
               "or cross-stream ordering in it; the capture is now invalidated. Do it before "
               "sdStreamBeginCapture or after sdStreamEndCapture");
}

uint64_t Stream::enqueue_uncapturable(WorkItem item, const char* operation) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture_) throw refuse_locked(operation);
  return enqueue_locked(std::move(item));
}

void Stream::begin_capture() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stop_reason_ != nullptr) throw error(sdErrorInvalidStream, describe(), " ", stop_reason_);
  if (capture_) {
    throw error(sdErrorInvalidValue, describe(),
                " is already capturing; end that capture with sdStreamEndCapture first");
  }
  capture_ = std::make_unique<Recording>();
}

Recording Stream::end_capture() {
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

sdStreamCaptureStatus Stream::capture_status() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!capture_) return sdStreamCaptureStatusNone;
  return capture_->invalidated.empty() ? sdStreamCaptureStatusActive : sdStreamCaptureStatusInvalidated;
}

void Stream::refuse_if_capturing(const char* operation) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture_) throw refuse_locked(operation);
}

bool Stream::reached(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ >= seq;
}

void Stream::wait_for(uint64_t seq) {
  std::unique_lock<std::mutex> lock(mutex_);
  progress_.wait(lock, [&] { return completed_ >= seq; });
}

void Stream::synchronize() {
  uint64_t last;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    last = enqueued_;
  }
  wait_for(last);
}

bool Stream::idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ == enqueued_;
}

std::string Stream::take_failure() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string failure;
  failure.swap(failure_);
  return failure;
}

void Stream::report_failure() {
  std::string failure = take_failure();
  if (!failure.empty()) {
    throw Error(sdErrorLaunchFailure, failure + " (reported once; later work on the stream still ran)");
  }
}

bool Stream::on_worker_thread() const { return current_worker == this; }

void Stream::stop(const char* reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_reason_ != nullptr) return;
    stop_reason_ = reason;
  }
  work_ready_.notify_all();
  // A host function that calls exit() stops its own stream: it cannot join
  // itself, and the worker ends when that host function returns.
  if (on_worker_thread()) {
    worker_.detach();
  } else {
    worker_.join();
  }
}

std::shared_ptr<Stream> find_stream(sdStream_t handle) {
  if (handle == nullptr) {
    throw error(sdErrorInvalidStream, "stream is NULL; simdev has no implicit stream, use sdStreamGetDefault(device)");
  }
  auto stream = registry().table.find(handle_id(handle));
  if (!stream) {
    throw error(sdErrorInvalidStream, "stream ", static_cast<const void*>(handle),
                " is not a live stream (destroyed, or not a handle from sdStreamCreate/sdStreamGetDefault)");
  }
  return stream;
}

std::vector<std::shared_ptr<Stream>> streams_of_device(int device) {
  std::vector<std::shared_ptr<Stream>> matching;
  for (auto& stream : registry().table.snapshot()) {
    if (stream->device() == device) matching.push_back(std::move(stream));
  }
  return matching;
}

}  // namespace simdev

using simdev::api_call;
using simdev::error;

extern "C" {

SIMDEV_API sdError_t sdStreamGetDefault(int device, sdStream_t* out_stream) {
  return api_call("sdStreamGetDefault", [&] {
    simdev::require_output(out_stream, "out_stream");
    *out_stream = simdev::as_handle<sdStream_t>(simdev::default_stream(device)->id());
  });
}

SIMDEV_API sdError_t sdStreamCreate(int device, sdStream_t* out_stream) {
  return api_call("sdStreamCreate", [&] {
    simdev::require_output(out_stream, "out_stream");
    simdev::require_device(device);
    auto& r = simdev::registry();
    std::lock_guard<std::mutex> lock(r.lifecycle_mutex);
    if (r.exiting) throw error(sdErrorInvalidStream, "cannot create a stream: the process is exiting");
    *out_stream = simdev::as_handle<sdStream_t>(simdev::create_stream(device, false)->id());
  });
}

SIMDEV_API sdError_t sdStreamDestroy(sdStream_t stream) {
  return api_call("sdStreamDestroy", [&] {
    auto s = simdev::find_stream(stream);
    if (s->is_default()) {
      throw error(sdErrorInvalidValue, s->describe(),
                  " is a default stream; default streams live as long as the process, destroy only streams from sdStreamCreate");
    }
    if (s->on_worker_thread()) {
      throw error(sdErrorDeadlock, "called from a host function or kernel running on ", s->describe(),
                  " itself, which cannot wait for its own queue; destroy it from another thread");
    }
    s->refuse_if_capturing("sdStreamDestroy");
    if (!simdev::registry().table.erase(s->id())) {
      throw error(sdErrorInvalidStream, s->describe(), " was destroyed concurrently by another thread");
    }
    s->stop("was destroyed");
    if (std::string failure = s->take_failure(); !failure.empty()) {
      throw error(sdErrorLaunchFailure, "the stream was destroyed, but its queued work failed: ", failure);
    }
  });
}

SIMDEV_API sdError_t sdStreamGetDevice(sdStream_t stream, int* out_device) {
  return api_call("sdStreamGetDevice", [&] {
    simdev::require_output(out_device, "out_device");
    *out_device = simdev::find_stream(stream)->device();
  });
}

SIMDEV_API sdError_t sdStreamQuery(sdStream_t stream) {
  return api_call("sdStreamQuery", [&] {
    auto s = simdev::find_stream(stream);
    s->refuse_if_capturing("sdStreamQuery");
    s->report_failure();
    return s->idle() ? sdSuccess : sdErrorNotReady;
  });
}

SIMDEV_API sdError_t sdStreamSynchronize(sdStream_t stream) {
  return api_call("sdStreamSynchronize", [&] {
    auto s = simdev::find_stream(stream);
    if (s->on_worker_thread()) {
      throw error(sdErrorDeadlock, "called from a host function or kernel running on ", s->describe(),
                  " itself; it would wait for itself forever. Synchronize from another thread, or order work with events");
    }
    s->refuse_if_capturing("sdStreamSynchronize");
    s->synchronize();
    s->report_failure();
  });
}

SIMDEV_API sdError_t sdLaunchHostFunc(sdStream_t stream, sdHostFn_t fn, void* user_data) {
  return api_call("sdLaunchHostFunc", [&] {
    auto s = simdev::find_stream(stream);
    if (fn == nullptr) throw error(sdErrorInvalidValue, "fn is NULL; pass the host function to queue");
    const std::string where = s->describe();
    s->enqueue({true, [fn, user_data, where]() -> std::string {
                  const int rc = fn(user_data);
                  if (rc == 0) return {};
                  std::ostringstream failure;
                  failure << "host function " << reinterpret_cast<void*>(fn) << " returned " << rc << " on "
                          << where;
                  return failure.str();
                }});
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
  return api_call("sdLaunchHostFuncWithCleanup", [&] {
    auto s = simdev::find_stream(stream);
    if (fn == nullptr) throw error(sdErrorInvalidValue, "fn is NULL; pass the host function to queue");
    if (cleanup == nullptr) {
      throw error(sdErrorInvalidValue, "cleanup is NULL; pass the function that frees user_data, or use sdLaunchHostFunc");
    }
    auto owned = std::make_shared<simdev::OwnedUserData>(user_data, cleanup);
    const std::string where = s->describe();
    try {
      s->enqueue({true, [fn, owned, where]() -> std::string {
                    const int rc = fn(owned->user_data);
                    if (rc == 0) return {};
                    std::ostringstream failure;
                    failure << "host function " << reinterpret_cast<void*>(fn) << " returned " << rc << " on "
                            << where;
                    return failure.str();
                  }});
    } catch (...) {
      owned->armed = false;
      throw;
    }
  });
}

}  // extern "C"
