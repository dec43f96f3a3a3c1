// The runtime's configuration, read once from the environment on first use.
#ifndef SIMDEV_SRC_CONFIG_H_
#define SIMDEV_SRC_CONFIG_H_

#include <cstdint>

namespace simdev {

struct Config {
  int device_count;          // SIMDEV_DEVICE_COUNT, default 2
  uint64_t memory_capacity;  // SIMDEV_MEMORY_CAPACITY (bytes per device), default 4 GiB
  uint32_t op_delay_us;      // SIMDEV_OP_DELAY_US, initial debug delay, default 0
};

// The configuration; throws sdErrorInvalidValue naming the variable if the
// environment held a malformed value (on every call, not only the first).
const Config& config();

// Throws sdErrorInvalidDevice unless 0 <= device < device count.
void requireDevice(int device);

}  // namespace simdev

#endif  // SIMDEV_SRC_CONFIG_H_
