#include "WorkFailure.h"

#include <atomic>
#include <cstdint>

#include "Error.h"
#include "Stream.h"

namespace simdev {
namespace {

// Per worker thread: the message belongs to the work that thread is running.
thread_local std::string work_failure_message;

// 0: disarmed; n: the n-th kernel or host function to start fails.
std::atomic<uint64_t> fault_countdown{0};
std::atomic<uint64_t> faults_injected{0};

}  // namespace

void clearWorkFailureMessage() noexcept { work_failure_message.clear(); }

std::string withWorkFailureMessage(std::string description) {
  if (!work_failure_message.empty()) {
    description.append(": ").append(work_failure_message);
    work_failure_message.clear();
  }
  return description;
}

bool takeInjectedKernelFault() noexcept {
  uint64_t remaining = fault_countdown.load(std::memory_order_relaxed);
  // Exactly one run sees the countdown go from 1 to 0, whichever streams race.
  while (remaining != 0) {
    if (fault_countdown.compare_exchange_weak(remaining, remaining - 1, std::memory_order_acq_rel)) {
      if (remaining != 1) return false;
      faults_injected.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

const char* injectedFaultText() noexcept {
  return "failed with an injected fault (sdInjectKernelFault) instead of running";
}

}  // namespace simdev

extern "C" {

SIMDEV_API sdError_t sdSetWorkFailureMessage(const char* message) {
  return simdev::apiCall("sdSetWorkFailureMessage", [&] {
    if (message == nullptr) {
      throw simdev::error(sdErrorInvalidValue, "message is NULL; pass the text that says why the work failed");
    }
    if (!simdev::onAnyStreamWorker()) {
      throw simdev::error(sdErrorInvalidValue,
                          "called outside a kernel or host function running on a stream's worker; a failure "
                          "message belongs to the work that fails, so set it from inside that work");
    }
    simdev::work_failure_message.assign(message);
  });
}

SIMDEV_API sdError_t sdInjectKernelFault(uint64_t nth) {
  return simdev::apiCall("sdInjectKernelFault", [&] { simdev::fault_countdown.store(nth); });
}

SIMDEV_API sdError_t sdGetInjectedKernelFaults(uint64_t* out_count) {
  return simdev::apiCall("sdGetInjectedKernelFaults", [&] {
    simdev::requireOutput(out_count, "out_count");
    *out_count = simdev::faults_injected.load();
  });
}

}  // extern "C"
