#include "SimdevCheck.h"

#include <deque>
#include <mutex>
#include <sstream>

namespace torch_simdev {
namespace {

// Bounded: a program that never synchronizes must not grow this forever.
constexpr size_t kMaxKeptFailures = 16;

std::mutex& failuresMutex() {
  static auto* mutex = new std::mutex();  // leaked: usable during static destruction
  return *mutex;
}

std::deque<std::string>& failures() {
  static auto* list = new std::deque<std::string>();
  return *list;
}

}  // namespace

void recordHostWorkFailure(const std::string& message) noexcept {
  try {
    std::lock_guard<std::mutex> lock(failuresMutex());
    if (failures().size() == kMaxKeptFailures) failures().pop_front();
    failures().push_back(message);
  } catch (...) {
    // Out of memory while recording a failure: the runtime still reports
    // sdErrorLaunchFailure, only without this detail.
  }
}

std::string describeRuntimeError(const char* call, sdError_t error) {
  std::ostringstream out;
  out << "simdev runtime call " << call << " failed with " << sdGetErrorName(error) << ": "
      << sdGetLastErrorString();
  if (error == sdErrorLaunchFailure) {
    std::lock_guard<std::mutex> lock(failuresMutex());
    for (const std::string& message : failures()) out << "\n  failed host work: " << message;
    failures().clear();
  }
  return out.str();
}

}  // namespace torch_simdev
