// Events. Recording queues a marker on the stream; the event then refers to
// that marker (a "capture": stream + sequence number). The event is complete
// once the stream's worker has passed the marker, and the marker stamps the
// host steady-clock time at which the worker reached it (for elapsed time).
// Re-recording makes a new capture; the old marker still runs but writes
// only into the old, now unreferenced capture.
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "Error.h"
#include "HandleTable.h"
#include "Stream.h"

namespace simdev {
namespace {

using Clock = std::chrono::steady_clock;

struct Capture {
  std::shared_ptr<Stream> stream;
  uint64_t seq = 0;
  // Written by the worker before it publishes completion under the stream's
  // mutex; read only after reached(seq) was observed, so no extra locking.
  Clock::time_point reached_at;
  // The stream's unreported failure when the capture was reached (written and
  // read as reached_at): a stream that waits for the event fails with it
  // (since 1.4), as work that waits for failed work must not pass for done.
  std::string failure;
};

struct Event {
  explicit Event(bool timing) : timing(timing) {}
  const bool timing;
  std::mutex mutex;
  std::shared_ptr<Capture> capture;  // nullptr until first recorded

  std::shared_ptr<Capture> current() {
    std::lock_guard<std::mutex> lock(mutex);
    return capture;
  }
};

HandleTable<Event>& events() {
  static auto* table = new HandleTable<Event>;  // leaked like the stream registry
  return *table;
}

std::shared_ptr<Event> findEvent(sdEvent_t handle, const char* name) {
  if (handle == nullptr) throw error(sdErrorInvalidEvent, name, " is NULL; pass an event from sdEventCreate");
  auto event = events().find(handleId(handle));
  if (!event) {
    throw error(sdErrorInvalidEvent, name, " ", static_cast<const void*>(handle),
                " is not a live event (destroyed, or not a handle from sdEventCreate)");
  }
  return event;
}

// The completed, timed capture of `event` for sdEventElapsedTime.
std::shared_ptr<Capture> timedCapture(Event& event, const char* name) {
  if (!event.timing) {
    throw error(sdErrorTimingDisabled, name,
                " was created with sdEventDisableTiming; create it with sdEventDefault to time it");
  }
  auto capture = event.current();
  if (!capture) throw error(sdErrorInvalidEvent, name, " was never recorded; call sdEventRecord first");
  return capture;
}

}  // namespace
}  // namespace simdev

using simdev::apiCall;
using simdev::error;

extern "C" {

SIMDEV_API sdError_t sdEventCreate(sdEvent_t* out_event, unsigned int flags) {
  return apiCall("sdEventCreate", [&] {
    simdev::requireOutput(out_event, "out_event");
    if ((flags & ~sdEventDisableTiming) != 0) {
      throw error(sdErrorInvalidValue, "flags 0x", std::hex, flags, std::dec,
                  " has unknown bits; use sdEventDefault or sdEventDisableTiming");
    }
    const uint64_t id = simdev::nextHandleId();
    simdev::events().insert(id, std::make_shared<simdev::Event>((flags & sdEventDisableTiming) == 0));
    *out_event = simdev::asHandle<sdEvent_t>(id);
  });
}

SIMDEV_API sdError_t sdEventDestroy(sdEvent_t event) {
  return apiCall("sdEventDestroy", [&] {
    simdev::findEvent(event, "event");
    // Queued waits and markers hold the capture itself, so destroying an
    // event with work still referring to it is safe.
    if (!simdev::events().erase(simdev::handleId(event))) {
      throw error(sdErrorInvalidEvent, "event ", static_cast<const void*>(event),
                  " was destroyed concurrently by another thread");
    }
  });
}

SIMDEV_API sdError_t sdEventRecord(sdEvent_t event, sdStream_t stream) {
  return apiCall("sdEventRecord", [&] {
    auto e = simdev::findEvent(event, "event");
    auto s = simdev::findStream(stream);
    auto capture = std::make_shared<simdev::Capture>();
    capture->stream = s;
    std::lock_guard<std::mutex> lock(e->mutex);  // concurrent records: one wins whole
    capture->seq = s->enqueueUncapturable({false, [capture]() -> std::string {
                                              capture->reached_at = simdev::Clock::now();
                                              capture->failure = capture->stream->unreportedFailure();
                                              return {};
                                            }},
                                            "sdEventRecord");
    e->capture = std::move(capture);
  });
}

SIMDEV_API sdError_t sdEventQuery(sdEvent_t event) {
  return apiCall("sdEventQuery", [&] {
    auto capture = simdev::findEvent(event, "event")->current();
    return !capture || capture->stream->reached(capture->seq) ? sdSuccess : sdErrorNotReady;
  });
}

SIMDEV_API sdError_t sdEventSynchronize(sdEvent_t event) {
  return apiCall("sdEventSynchronize", [&] {
    auto capture = simdev::findEvent(event, "event")->current();
    if (!capture) return;
    simdev::Stream& s = *capture->stream;
    if (s.onWorkerThread() && !s.reached(capture->seq)) {
      throw error(sdErrorDeadlock, "the event was recorded on ", s.describe(),
                  " after the host function or kernel that is calling; it would wait for itself forever");
    }
    s.waitFor(capture->seq);
    s.reportFailure();
  });
}

SIMDEV_API sdError_t sdEventElapsedTime(float* out_ms, sdEvent_t start, sdEvent_t end) {
  return apiCall("sdEventElapsedTime", [&] {
    simdev::requireOutput(out_ms, "out_ms");
    auto start_capture = simdev::timedCapture(*simdev::findEvent(start, "start"), "start");
    auto end_capture = simdev::timedCapture(*simdev::findEvent(end, "end"), "end");
    if (!start_capture->stream->reached(start_capture->seq) || !end_capture->stream->reached(end_capture->seq)) {
      return sdErrorNotReady;
    }
    *out_ms = std::chrono::duration<float, std::milli>(end_capture->reached_at - start_capture->reached_at).count();
    return sdSuccess;
  });
}

SIMDEV_API sdError_t sdStreamWaitEvent(sdStream_t stream, sdEvent_t event) {
  return apiCall("sdStreamWaitEvent", [&] {
    auto s = simdev::findStream(stream);
    auto capture = simdev::findEvent(event, "event")->current();
    if (!capture) return;  // never recorded: nothing to wait for
    // The capture's marker was queued before this wait, so waits can never
    // form a cycle; the worker just blocks until the other stream passes it.
    s->enqueueUncapturable({false, [capture]() -> std::string {
                               capture->stream->waitFor(capture->seq);
                               if (capture->failure.empty()) return {};
                               return "waited for an event recorded on " + capture->stream->describe() +
                                      " after work that failed: " + capture->failure;
                             }},
                             "sdStreamWaitEvent");
  });
}

}  // extern "C"
