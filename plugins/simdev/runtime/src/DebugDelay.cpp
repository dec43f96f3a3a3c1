#include "DebugDelay.h"

#include <atomic>

#include "Config.h"
#include "Error.h"

namespace simdev {
namespace {
std::atomic<uint32_t>& delay() {
  // Seeded from the environment on first use; config() throws (and the
  // initialization is retried next time) if the environment is malformed.
  static std::atomic<uint32_t> microseconds{config().op_delay_us};
  return microseconds;
}
}  // namespace

uint32_t opDelayUs() { return delay().load(std::memory_order_relaxed); }

}  // namespace simdev

extern "C" {

SIMDEV_API sdError_t sdSetOpDelay(uint32_t microseconds) {
  return simdev::apiCall("sdSetOpDelay", [&] { simdev::delay().store(microseconds); });
}

SIMDEV_API sdError_t sdGetOpDelay(uint32_t* out_microseconds) {
  return simdev::apiCall("sdGetOpDelay", [&] {
    simdev::requireOutput(out_microseconds, "out_microseconds");
    *out_microseconds = simdev::opDelayUs();
  });
}

}  // extern "C"
