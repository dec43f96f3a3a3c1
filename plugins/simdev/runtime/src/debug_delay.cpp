#include "debug_delay.h"

#include <atomic>

#include "config.h"
#include "error.h"

namespace simdev {
namespace {
std::atomic<uint32_t>& delay() {
  // Seeded from the environment on first use; config() throws (and the
  // initialization is retried next time) if the environment is malformed.
  static std::atomic<uint32_t> microseconds{config().op_delay_us};
  return microseconds;
}
}  // namespace

uint32_t op_delay_us() { return delay().load(std::memory_order_relaxed); }

}  // namespace simdev

extern "C" {

SIMDEV_API sdError_t sdSetOpDelay(uint32_t microseconds) {
  return simdev::api_call("sdSetOpDelay", [&] { simdev::delay().store(microseconds); });
}

SIMDEV_API sdError_t sdGetOpDelay(uint32_t* out_microseconds) {
  return simdev::api_call("sdGetOpDelay", [&] {
    simdev::require_output(out_microseconds, "out_microseconds");
    *out_microseconds = simdev::op_delay_us();
  });
}

}  // extern "C"
