// The graph tables plugins registered (include/devbridge/c_graph_api.h), one
// per DLPack device type, and the checked calls into them. Torch-free and
// Python-free, like the launch core: the runtime table (c_runtime_api.cpp)
// and the bindings (src/python/bind_graphs.cpp) sit on top of it.
#pragma once

#include <cstdint>
#include <string>

#include "devbridge/c_graph_api.h"

namespace devbridge {
namespace graphs {

// Validates `api` (not NULL, major DEVBRIDGE_GRAPH_API_MAJOR, a size that
// holds every field its minor promises, known flags, a name and every
// function) and makes a copy of it the table of `dl_device_type`, replacing
// any earlier one. `device_name` ("simdev") names the device in messages.
// Throws devbridge::Error (kValue) naming the problem and the fix.
void Register(int32_t dl_device_type, const DevbridgeGraphAPI* api, const std::string& device_name);

// Forgets the table of `dl_device_type` (a no-op when none is registered).
void Unregister(int32_t dl_device_type) noexcept;

// The registered table, or NULL. One atomic load.
const DevbridgeGraphAPI* Find(int32_t dl_device_type) noexcept;

// The registered table, or devbridge::Error (kNotImplemented) saying that the
// plugin behind `device_name` registered none and what it must register.
const DevbridgeGraphAPI& Require(int32_t dl_device_type, const std::string& device_name);

// Throws devbridge::Error (kRuntime) "devbridge: <what>: <api.name>: <its
// last error>" unless `status` is 0.
void Check(const DevbridgeGraphAPI& api, int status, const std::string& what);

// capture_status of `stream`, checked; kDevbridgeCaptureNone when no table is
// registered for `dl_device_type` (a plugin without graphs never captures).
int32_t CaptureStatus(int32_t dl_device_type, int32_t device_index, void* stream);

// Throws devbridge::Error (kRuntime) when a launch on `stream` must not go
// through the device type's submit hook: the stream captures and the graph
// table does not declare DEVBRIDGE_GRAPH_SUBMIT_HOOK_CAPTURES.
void CheckSubmitHookMayLaunch(int32_t dl_device_type, int32_t device_index, void* stream,
                              const std::string& device_name);

}  // namespace graphs
}  // namespace devbridge
