// A kernel runtime whose kernels are Python (py_kernel_runtime.cpp): its
// programs run Python callables under the GIL, on simdev's streams.
#pragma once

#include <Python.h>

#include <string>

#include "devbridge/c_launch_api.h"

namespace devbridge {
namespace launch {

// A new table named `name` over the simdev library at `simdev_library`,
// loading copies of the trampoline library at `trampoline_path` (installed
// beside devbridge._C): `load(image: bytes) -> int` registers a binary,
// `run(id, program, grid, device, payload: bytes) -> int` runs one program.
// Both are kept (new references) for the process, as is the table. Needs the
// GIL. Throws devbridge::Error.
const DevbridgeKernelRuntime* PythonKernelRuntime(const std::string& name, const std::string& simdev_library,
                                                  const std::string& trampoline_path, PyObject* load, PyObject* run);

// A new table named `name` whose kernels run on the launching thread
// (host_kernel_runtime.cpp), for a PrivateUse1 plugin whose tensors are host
// memory: `load(image: bytes) -> int` registers a binary, `run(id, program,
// grid, device, payload: bytes) -> int` runs one program; a launch must be on
// the plugin's current stream, which it synchronizes before running every
// program. Both callables and the table are kept for the process. Needs the
// GIL. Throws devbridge::Error.
const DevbridgeKernelRuntime* HostKernelRuntime(const std::string& name, PyObject* load, PyObject* run);

// The pending Python error as "Type: message", cleared; the GIL is held.
std::string FetchPythonError();

// Called by an atexit hook: programs still queued after it are skipped
// (reported as failures of their launch), never run in a finalizing Python.
void StopPythonKernelsAtExit() noexcept;

}  // namespace launch
}  // namespace devbridge
