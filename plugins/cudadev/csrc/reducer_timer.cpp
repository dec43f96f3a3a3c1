// DDP's timer for cudadev: the Reducer records when a step's forward, backward
// computation and gradient communication start and end, and logs their
// device-side durations (DistributedDataParallel._get_ddp_logging_data():
// avg_forward_compute_time, avg_backward_compute_time, ...). It asks
// c10d::TimerRegistry for a timer of the module's device type; a device type
// without one gets none: every DDP model warned "Time stats are currently
// only collected for CPU and CUDA devices" and logged no times. As CUDA's
// (torch/csrc/distributed/c10d/reducer_cuda.cpp), it records an event on the
// current stream per point and measures between two with the events'
// elapsed time, which the Reducer asks for at the next iteration's start,
// when the events of the last one have usually completed.
#include <c10/core/Event.h>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

#include <array>
#include <memory>
#include <optional>

namespace cudadev {
namespace {

class CudadevTimer final : public c10d::Timer {
 public:
  explicit CudadevTimer(c10::Device device) : device_(device) {}

  void record(Event event) override {
    c10d::Timer::record(event);  // the host-side time
    c10::DeviceGuard guard(device_);
    std::optional<c10::Event>& slot = events_[static_cast<size_t>(event)];
    // timing enabled: BACKEND_DEFAULT (guard.cpp: a CUDA event without cudaEventDisableTiming)
    if (!slot) slot.emplace(c10::DeviceType::PrivateUse1, c10::EventFlag::BACKEND_DEFAULT);
    slot->record(c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getStream(device_));
  }

  std::optional<int64_t> measureDifference(Event start, Event end) override {
    std::optional<c10::Event>& first = events_[static_cast<size_t>(start)];
    std::optional<c10::Event>& last = events_[static_cast<size_t>(end)];
    // Not recorded this run (no backward yet, no_sync(), no communication):
    // no time, as on CUDA.
    if (!first || !last || !first->was_marked_for_recording() || !last->was_marked_for_recording()) {
      return std::nullopt;
    }
    c10::DeviceGuard guard(device_);
    first->synchronize();
    last->synchronize();
    const double milliseconds = first->elapsedTime(*last);
    if (milliseconds < 0) return std::nullopt;  // the end is from an earlier iteration than the start
    return static_cast<int64_t>(milliseconds * 1e6);
  }

 private:
  c10::Device device_;
  std::array<std::optional<c10::Event>, 5> events_;  // one per c10d::Timer::Event
};

}  // namespace
}  // namespace cudadev

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, cudadev::CudadevTimer);
}  // namespace c10d
