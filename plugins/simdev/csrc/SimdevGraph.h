// simdev's graph table for devbridge (devbridge/c_graph_api.h): capture,
// replay and destruction of graphs of simdev streams, over the runtime's
// sdStreamBeginCapture / sdGraphLaunch (runtime.h, "graphs"), with the
// allocator serving captures from their pools (SimdevGraphPool.h).
// torch_simdev hands the table to devbridge as a PyCapsule from its import,
// beside its stream hooks. The layout is devbridge's C ABI, restated in the
// .cpp so that simdev builds without devbridge's headers.
#pragma once

namespace torch_simdev {

// The DevbridgeGraphAPI (static storage), as an opaque pointer for the capsule.
const void* graphApiTable() noexcept;

}  // namespace torch_simdev
