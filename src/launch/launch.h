// One launch of a loaded kernel: scratch memory, the submit hook, the kernel
// runtime. Needs neither torch nor Python: everything the framework provides
// comes through the DevbridgeRuntimeAPI table (c_runtime_api.h).
#pragma once

#include <cstdint>
#include <memory>

#include "devbridge/c_launch_api.h"
#include "devbridge/c_runtime_api.h"
#include "launch/loaded_kernels.h"

namespace devbridge {
namespace launch {

struct LaunchRequest {
  std::shared_ptr<const LoadedKernel> kernel;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t num_warps = 1;
  uint32_t num_ctas = 1;
  uint32_t shared_bytes = 0;
  void* stream = nullptr;
  // Every slot of the signature's layout (param_layout.h), each 8 bytes:
  // Launch fills the ones the layout adds (Triton: the two trailing scratch
  // pointers; Ascend: [ffts] [lock, workspace] first, the grid last).
  void** params = nullptr;
  const size_t* param_sizes = nullptr;
  uint32_t num_params = 0;
};

// Enqueues `request` (packed for the kernel `signature` describes, in its
// layout) on its stream, or hands it to the device type's submit hook. The
// Ascend layout adds workspace and the sync-block lock (from the framework
// allocator, like scratch), initialises the lock on the stream first through
// the runtime's fill_async, and packs the argument block. Scratch (metadata sizes > 0) comes from the framework allocator on
// the launch stream, which must then be the device's current stream, and is
// released once the launch is enqueued (the allocator's stream order keeps
// it from being reused before the kernel ran; under a graph capture the
// plugin's capture pool keeps it for the graph, c_graph_api.h). A launch
// through a submit hook on a capturing stream is refused unless the plugin
// declared its hook capture-safe (the runtime table's check_submit_hook). An
// empty grid does nothing. Never synchronizes. Throws devbridge::Error.
void Launch(const DevbridgeRuntimeAPI& framework, const DevbridgeKernelSignature& signature,
            const LaunchRequest& request);

}  // namespace launch
}  // namespace devbridge
