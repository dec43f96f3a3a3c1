#include "SimdevGraph.h"

#include <simdev/runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "SimdevAllocator.h"
#include "SimdevGraphPool.h"
#include "SimdevStream.h"

namespace torch_simdev {
namespace {

// devbridge/c_graph_api.h, major 1 minor 0, restated (the layout is the ABI).
struct GraphApiHeader {
  uint32_t major;
  uint32_t minor;
  size_t size;
};
struct GraphApi {
  GraphApiHeader header;
  uint64_t flags;
  void* self;
  const char* name;
  int (*capture_begin)(void* self, int32_t device_index, void* stream);
  int (*capture_end)(void* self, int32_t device_index, void* stream, void** out_graph);
  int (*instantiate)(void* self, void* graph, void** out_exec);
  int (*replay)(void* self, void* exec, int32_t device_index, void* stream);
  int (*graph_destroy)(void* self, void* graph);
  int (*exec_destroy)(void* self, void* exec);
  int (*capture_status)(void* self, int32_t device_index, void* stream, int32_t* out_status);
  const char* (*get_last_error)(void* self);
};

thread_local std::string last_error;

// Runs `body` (returning an sdError_t); on failure keeps the runtime's
// message, or the exception's, as this table's last error. Never throws.
template <class Body>
int guarded(Body&& body) noexcept {
  try {
    const sdError_t status = body();
    if (status == sdSuccess) return 0;
    last_error = sdGetLastErrorString();
    return -1;
  } catch (const std::exception& e) {
    try {
      last_error = e.what();
    } catch (...) {
    }
    return -1;
  } catch (...) {
    try {
      last_error = "an unknown C++ exception";
    } catch (...) {
    }
    return -1;
  }
}

// A refusal of this table's own (not the runtime's): guarded() reports it.
[[noreturn]] sdError_t fail(const std::string& message) { throw std::invalid_argument(message); }

// `stream` must be a live stream of `device` (the runtime names a bad handle).
sdError_t checkStream(int32_t device, void* stream) {
  int actual = -1;
  if (const sdError_t status = sdStreamGetDevice(static_cast<sdStream_t>(stream), &actual); status != sdSuccess) {
    return status;
  }
  if (actual != device) {
    return fail("stream " + std::to_string(reinterpret_cast<uintptr_t>(stream)) + " belongs to simdev:" +
                std::to_string(actual) + ", not simdev:" + std::to_string(device) +
                "; pass a stream of the device the graph is for");
  }
  return sdSuccess;
}

// The pools of graphs and executables, by handle (the runtime's handles are
// never reused, so a destroyed one never finds a newer entry).
struct Pools {
  std::mutex mutex;
  std::unordered_map<void*, std::shared_ptr<CapturePoolOwner>> by_handle;
  std::unordered_map<sdStream_t, std::shared_ptr<CapturePoolOwner>> capturing;

  void put(void* handle, std::shared_ptr<CapturePoolOwner> owner) {
    std::lock_guard<std::mutex> lock(mutex);
    by_handle[handle] = std::move(owner);
  }
  std::shared_ptr<CapturePoolOwner> get(void* handle) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = by_handle.find(handle);
    return it == by_handle.end() ? nullptr : it->second;
  }
  std::shared_ptr<CapturePoolOwner> take(void* handle) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = by_handle.find(handle);
    if (it == by_handle.end()) return nullptr;
    auto owner = std::move(it->second);
    by_handle.erase(it);
    return owner;
  }
};

Pools& pools() {
  static auto* instance = new Pools;  // leaked: graphs may die during static destruction
  return *instance;
}

int captureBegin(void*, int32_t device, void* stream) {
  return guarded([&] {
    if (sdError_t status = checkStream(device, stream); status != sdSuccess) return status;
    const auto native = static_cast<sdStream_t>(stream);
    sdStreamCaptureStatus current = sdStreamCaptureStatusNone;
    if (sdError_t status = sdStreamGetCaptureStatus(native, &current); status != sdSuccess) return status;
    // Already capturing: the runtime's refusal, and the running capture keeps its pool.
    if (current != sdStreamCaptureStatusNone) return sdStreamBeginCapture(native);
    auto owner = makeCapturePool(static_cast<c10::DeviceIndex>(device), native);
    // The pool first: an allocation for the stream right after the capture
    // began must already come from it.
    beginAllocatingToPool(native, owner);
    const sdError_t status = sdStreamBeginCapture(native);
    if (status != sdSuccess) {
      endAllocatingToPool(native);
      return status;
    }
    std::lock_guard<std::mutex> lock(pools().mutex);
    pools().capturing[native] = std::move(owner);
    return sdSuccess;
  });
}

int captureEnd(void*, int32_t device, void* stream, void** out_graph) {
  return guarded([&] {
    if (out_graph == nullptr) return fail("out_graph is NULL; pass the address that receives the graph");
    if (sdError_t status = checkStream(device, stream); status != sdSuccess) return status;
    const auto native = static_cast<sdStream_t>(stream);
    sdGraph_t graph = nullptr;
    const sdError_t status = sdStreamEndCapture(native, &graph);
    if (status == sdErrorInvalidValue) return status;  // not capturing: no pool of ours to end
    std::shared_ptr<CapturePoolOwner> owner;
    {
      std::lock_guard<std::mutex> lock(pools().mutex);
      auto it = pools().capturing.find(native);
      if (it != pools().capturing.end()) {
        owner = std::move(it->second);
        pools().capturing.erase(it);
      }
    }
    endAllocatingToPool(native);
    allocator().flushDeferredFrees();  // frees recorded while the stream captured
    if (status != sdSuccess) return status;  // invalidated: the pool goes with `owner`
    if (owner) pools().put(graph, std::move(owner));
    *out_graph = graph;
    return sdSuccess;
  });
}

int instantiate(void*, void* graph, void** out_exec) {
  return guarded([&] {
    if (out_exec == nullptr) return fail("out_exec is NULL; pass the address that receives the executable");
    sdGraphExec_t exec = nullptr;
    if (sdError_t status = sdGraphInstantiate(&exec, static_cast<sdGraph_t>(graph)); status != sdSuccess) {
      return status;
    }
    if (auto owner = pools().get(graph)) pools().put(exec, std::move(owner));
    *out_exec = exec;
    return sdSuccess;
  });
}

int replay(void*, void* exec, int32_t device, void* stream) {
  return guarded([&] {
    if (sdError_t status = checkStream(device, stream); status != sdSuccess) return status;
    // The replay stream's events will guard the pool's memory once released.
    if (auto owner = pools().get(exec)) noteReplayStream(owner->pool(), static_cast<sdStream_t>(stream));
    return sdGraphLaunch(static_cast<sdGraphExec_t>(exec), static_cast<sdStream_t>(stream));
  });
}

int graphDestroy(void*, void* graph) {
  return guarded([&] {
    const sdError_t status = sdGraphDestroy(static_cast<sdGraph_t>(graph));
    if (status == sdSuccess) pools().take(graph);
    return status;
  });
}

int execDestroy(void*, void* exec) {
  return guarded([&] {
    const sdError_t status = sdGraphExecDestroy(static_cast<sdGraphExec_t>(exec));
    if (status == sdSuccess) pools().take(exec);
    return status;
  });
}

int captureStatus(void*, int32_t device, void* stream, int32_t* out_status) {
  return guarded([&] {
    if (out_status == nullptr) return fail("out_status is NULL; pass the address that receives the status");
    if (sdError_t status = checkStream(device, stream); status != sdSuccess) return status;
    sdStreamCaptureStatus status = sdStreamCaptureStatusNone;
    if (sdError_t rc = sdStreamGetCaptureStatus(static_cast<sdStream_t>(stream), &status); rc != sdSuccess) {
      return rc;
    }
    *out_status = static_cast<int32_t>(status);  // the same values as DevbridgeCaptureStatus
    return sdSuccess;
  });
}

const char* getLastError(void*) { return last_error.c_str(); }

const GraphApi kGraphApi = {
    {1, 0, sizeof(GraphApi)},
    0,  // no submit hook: launches go to the stream directly
    nullptr,
    "simdev graphs",
    &captureBegin,
    &captureEnd,
    &instantiate,
    &replay,
    &graphDestroy,
    &execDestroy,
    &captureStatus,
    &getLastError,
};

}  // namespace

const void* graphApiTable() noexcept { return &kGraphApi; }

}  // namespace torch_simdev
