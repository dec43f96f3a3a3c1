// The capture pool: where simdev's allocator takes memory for a capturing
// stream (devbridge/c_graph_api.h, "Memory").
//
// A captured graph replays raw device pointers: a kernel captured writing an
// intermediate tensor writes the same address on every replay, long after
// the Python tensor is gone. So memory allocated while a stream captures
// comes from a pool that the capture's graphs own: freed blocks go back to
// the pool (a later allocation of the same capture may take them: replays
// run in capture order), never to the allocator's cache, until the last
// graph and executable of the capture are destroyed. Then the pool's free
// blocks, and later every block still in use when it is freed, join the
// allocator's cache with events recorded on the capture stream and every
// replay stream, so they are reused only after the replays queued so far.
//
// Thread-safe. Blocks are freed from any thread (stream workers included).
#pragma once

#include <simdev/runtime.h>

#include <c10/core/Allocator.h>

#include <memory>

namespace torch_simdev {

class CapturePool;

// Shared by a capture in progress, its graph and the graph's executables;
// when the last owner lets go, the pool's memory returns to the allocator.
class CapturePoolOwner {
 public:
  explicit CapturePoolOwner(std::shared_ptr<CapturePool> pool) : pool_(std::move(pool)) {}
  ~CapturePoolOwner();
  CapturePoolOwner(const CapturePoolOwner&) = delete;
  CapturePoolOwner& operator=(const CapturePoolOwner&) = delete;
  CapturePool& pool() const { return *pool_; }

 private:
  std::shared_ptr<CapturePool> pool_;
};

// A new pool for a capture on `stream` of `device`, owned by the result.
std::shared_ptr<CapturePoolOwner> makeCapturePool(c10::DeviceIndex device, sdStream_t stream);

// Remembers `stream` as one that replayed the pool's graphs (its events
// guard the memory once the pool is released).
void noteReplayStream(CapturePool& pool, sdStream_t stream);

// While `stream` captures, the allocator serves it from `pool` (an owner
// keeps the pool alive meanwhile). begin before the runtime capture starts,
// end after it ended.
void beginAllocatingToPool(sdStream_t stream, const std::shared_ptr<CapturePoolOwner>& owner);
void endAllocatingToPool(sdStream_t stream);

// Whether any stream allocates to a pool now: one atomic load, so the
// allocator's usual path pays nothing more.
bool anyCapturePoolActive() noexcept;

// For SimdevAllocator::allocate: a block of `nbytes` from the pool of the
// capturing `stream`, or an empty optional-like result (`served` false) when
// `stream` allocates to no pool.
c10::DataPtr allocateFromCapturePool(sdStream_t stream, size_t nbytes, bool* served);

}  // namespace torch_simdev
