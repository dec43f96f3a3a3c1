#include "distributed/SimdevWork.h"

#include <ATen/core/jit_type.h>

#include <utility>

#include "GilReleased.h"
#include "SimdevDevice.h"
#include "SimdevStream.h"

namespace torch_simdev {

void CollectiveOutcome::fail(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_) error_ = std::move(error);
}

std::exception_ptr CollectiveOutcome::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

SimdevWork::SimdevWork(int rank, c10d::OpType type, const char* profiling_title, c10::DeviceIndex device,
                       std::vector<at::Tensor> outputs, std::shared_ptr<CollectiveOutcome> outcome, Wait wait)
    : c10d::Work(rank, type, profiling_title),
      device_(device),
      stream_(currentStream(device)),
      done_(c10::DeviceType::PrivateUse1),
      outputs_(std::move(outputs)),
      outcome_(std::move(outcome)),
      wait_(wait),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                       std::vector<c10::Device>{simdevDevice(device)})) {}

void SimdevWork::issued() {
  done_.record(stream_);
  // With devices, markCompleted records the future's own events on the
  // current stream (the collective's) and keeps the outputs' memory from
  // being reused before them (recordDataPtrOnStream).
  future_->markCompleted(c10::IValue(outputs_));
}

bool SimdevWork::isCompleted() { return done_.query(); }

bool SimdevWork::isSuccess() const { return outcome_->error() == nullptr; }

std::exception_ptr SimdevWork::exception() const { return outcome_->error(); }

std::vector<at::Tensor> SimdevWork::result() { return outputs_; }

void SimdevWork::rethrowFailure() const {
  if (auto error = outcome_->error()) std::rethrow_exception(error);
}

void SimdevWork::synchronize() {
  if (wait_ == Wait::kHost) {
    GilReleasedIfHeld no_gil;  // the stream's work may need it (GilReleased.h)
    done_.synchronize();
  } else {
    // A failed collective fails the waiting stream too (the runtime passes a
    // failure on through the event, since simdev runtime 1.4).
    done_.block(currentStream(device_));
  }
  rethrowFailure();
}

bool SimdevWork::wait(std::chrono::milliseconds /*timeout: Gloo's own timeout bounds the collective*/) {
  synchronize();
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> SimdevWork::getFuture() { return future_; }

}  // namespace torch_simdev
