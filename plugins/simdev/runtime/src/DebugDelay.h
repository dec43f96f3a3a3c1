// The debug delay: every queued operation that does real work (copy, memset,
// host function, kernel) sleeps this long first, so that a consumer which
// forgot to wait for a producer reads stale data every time, not sometimes.
#ifndef SIMDEV_SRC_DEBUG_DELAY_H_
#define SIMDEV_SRC_DEBUG_DELAY_H_

#include <cstdint>

namespace simdev {

// Current delay in microseconds (initially SIMDEV_OP_DELAY_US).
uint32_t opDelayUs();

}  // namespace simdev

#endif  // SIMDEV_SRC_DEBUG_DELAY_H_
