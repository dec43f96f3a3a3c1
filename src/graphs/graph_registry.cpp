#include "graphs/graph_registry.h"

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <sstream>
#include <vector>

#include "devbridge/error.h"

namespace devbridge {
namespace graphs {
namespace {

// DLPack device type codes are small (kDLExtDev = 12, kDLAscend = 21).
constexpr int32_t kSlots = 64;

std::array<std::atomic<const DevbridgeGraphAPI*>, kSlots> g_tables{};

size_t Slot(int32_t dl_device_type) {
  if (dl_device_type < 0 || dl_device_type >= kSlots) {
    throw Error(ErrorKind::kValue, "devbridge: DLPack device type " + std::to_string(dl_device_type) +
                                       " is out of range for graph tables");
  }
  return static_cast<size_t>(dl_device_type);
}

[[noreturn]] void Refuse(const std::string& device_name, const std::string& problem) {
  throw Error(ErrorKind::kValue, "devbridge: the graph table registered for '" + device_name + "' " + problem +
                                     " (include/devbridge/c_graph_api.h)");
}

// The bytes a table of `minor` must at least have: every field up to the
// last one of that minor. Minor 0 is the whole current struct.
size_t SizeOfMinor(uint32_t /*minor*/) { return sizeof(DevbridgeGraphAPI); }

void Validate(const DevbridgeGraphAPI* api, const std::string& device_name) {
  if (api == nullptr) {
    Refuse(device_name, "is NULL; hand over the address of the plugin's static DevbridgeGraphAPI");
  }
  const DevbridgeGraphAPIHeader& header = api->header;
  if (header.major != DEVBRIDGE_GRAPH_API_MAJOR) {
    Refuse(device_name, "was written for major " + std::to_string(header.major) +
                            " of the graph ABI, and this devbridge reads major " +
                            std::to_string(DEVBRIDGE_GRAPH_API_MAJOR) +
                            "; set header.major = DEVBRIDGE_GRAPH_API_MAJOR and build the plugin against this "
                            "devbridge's header");
  }
  if (header.size < SizeOfMinor(header.minor)) {
    Refuse(device_name, "has header.size " + std::to_string(header.size) + ", smaller than the " +
                            std::to_string(SizeOfMinor(header.minor)) + " bytes minor " +
                            std::to_string(header.minor) +
                            " promises; set header.size = sizeof(DevbridgeGraphAPI)");
  }
  if ((api->flags & ~static_cast<uint64_t>(DEVBRIDGE_GRAPH_KNOWN_FLAGS)) != 0) {
    std::ostringstream flags;
    flags << "0x" << std::hex << api->flags;
    Refuse(device_name, "sets flags " + flags.str() +
                            " with bits this devbridge does not know; set only DEVBRIDGE_GRAPH_* flags");
  }
  if (api->name == nullptr) Refuse(device_name, "has a NULL name; name it (\"mydev graphs\") for messages");
  const std::pair<const char*, const void*> entries[] = {
      {"capture_begin", reinterpret_cast<const void*>(api->capture_begin)},
      {"capture_end", reinterpret_cast<const void*>(api->capture_end)},
      {"instantiate", reinterpret_cast<const void*>(api->instantiate)},
      {"replay", reinterpret_cast<const void*>(api->replay)},
      {"graph_destroy", reinterpret_cast<const void*>(api->graph_destroy)},
      {"exec_destroy", reinterpret_cast<const void*>(api->exec_destroy)},
      {"capture_status", reinterpret_cast<const void*>(api->capture_status)},
      {"get_last_error", reinterpret_cast<const void*>(api->get_last_error)},
  };
  for (const auto& entry : entries) {
    if (entry.second == nullptr) {
      Refuse(device_name, std::string("has a NULL ") + entry.first +
                              "; every function of DevbridgeGraphAPI minor 0 is required");
    }
  }
}

}  // namespace

void Register(int32_t dl_device_type, const DevbridgeGraphAPI* api, const std::string& device_name) {
  const size_t slot = Slot(dl_device_type);
  Validate(api, device_name);
  // A copy, so the fields a later minor appends read as zero for an older
  // plugin. Never freed: a concurrent reader may still hold the old copy, and
  // registrations are rare (one per plugin import).
  auto* copy = new DevbridgeGraphAPI{};
  std::memcpy(copy, api, sizeof(DevbridgeGraphAPI));
  {
    // Every copy stays reachable from here (so leak checkers see it as kept,
    // not lost, once a later registration replaces it).
    static std::mutex mutex;
    static auto* every_copy = new std::vector<const DevbridgeGraphAPI*>();
    std::lock_guard<std::mutex> lock(mutex);
    every_copy->push_back(copy);
  }
  g_tables[slot].store(copy, std::memory_order_release);
}

void Unregister(int32_t dl_device_type) noexcept {
  if (dl_device_type < 0 || dl_device_type >= kSlots) return;
  g_tables[static_cast<size_t>(dl_device_type)].store(nullptr, std::memory_order_release);
}

const DevbridgeGraphAPI* Find(int32_t dl_device_type) noexcept {
  if (dl_device_type < 0 || dl_device_type >= kSlots) return nullptr;
  return g_tables[static_cast<size_t>(dl_device_type)].load(std::memory_order_acquire);
}

const DevbridgeGraphAPI& Require(int32_t dl_device_type, const std::string& device_name) {
  const DevbridgeGraphAPI* api = Find(dl_device_type);
  if (api == nullptr) {
    throw Error(ErrorKind::kNotImplemented,
                "devbridge: the '" + device_name +
                    "' plugin registered no graph table, so its streams cannot be captured; the plugin "
                    "must fill a DevbridgeGraphAPI (include/devbridge/c_graph_api.h) and register it with "
                    "devbridge.graphs.register_graph_api(capsule, '" + device_name +
                    "') when it is imported (docs/plugin-authors.md, \"Graph capture\")");
  }
  return *api;
}

void Check(const DevbridgeGraphAPI& api, int status, const std::string& what) {
  if (status == 0) return;
  const char* message = api.get_last_error(api.self);
  throw Error(ErrorKind::kRuntime, "devbridge: " + what + ": " + api.name + ": " +
                                       (message != nullptr && *message ? message : "failed without a message"));
}

int32_t CaptureStatus(int32_t dl_device_type, int32_t device_index, void* stream) {
  const DevbridgeGraphAPI* api = Find(dl_device_type);
  if (api == nullptr) return kDevbridgeCaptureNone;
  int32_t status = kDevbridgeCaptureNone;
  Check(*api, api->capture_status(api->self, device_index, stream, &status), "reading the capture status");
  return status;
}

void CheckSubmitHookMayLaunch(int32_t dl_device_type, int32_t device_index, void* stream,
                              const std::string& device_name) {
  const DevbridgeGraphAPI* api = Find(dl_device_type);
  if (api == nullptr || (api->flags & DEVBRIDGE_GRAPH_SUBMIT_HOOK_CAPTURES) != 0) return;
  if (CaptureStatus(dl_device_type, device_index, stream) == kDevbridgeCaptureNone) return;
  std::ostringstream text;
  text << "devbridge: a launch on stream " << stream << " of " << device_name
       << ", which is capturing, would go through the plugin's submit hook, which runs it later from its "
          "task queue: outside the capture. Launch it outside the capture; or, if the hook runs closures "
          "for a capturing stream into the capture, the plugin declares so with "
          "DEVBRIDGE_GRAPH_SUBMIT_HOOK_CAPTURES in its DevbridgeGraphAPI.flags";
  throw Error(ErrorKind::kRuntime, text.str());
}

}  // namespace graphs
}  // namespace devbridge
