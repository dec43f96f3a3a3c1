// simdev's Triton target: the "simdev-interpreter" kernel runtime
// (py_interpreter_runtime.cpp). Needs Python: its programs run Triton's
// interpreter under the GIL.
#pragma once

#include <string>

#include "devbridge/c_launch_api.h"

namespace devbridge {
namespace launch {

// The table for the simdev library at `simdev_library`, loading copies of the
// trampoline library at `trampoline_path` (installed beside devbridge._C).
// One per pair, process lifetime. Throws devbridge::Error.
const DevbridgeKernelRuntime* SimdevInterpreterKernelRuntime(const std::string& simdev_library,
                                                             const std::string& trampoline_path);

// Called by an atexit hook: programs still queued after it are skipped
// (reported as failures of their launch), never run in a finalizing Python.
void StopInterpretedKernelsAtExit() noexcept;

}  // namespace launch
}  // namespace devbridge
