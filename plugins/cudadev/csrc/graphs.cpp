#include "graphs.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include "allocator.h"
#include "device.h"
#include "streams.h"

// devbridge's graph table, restated from include/devbridge/c_graph_api.h
// (major 1, minor 0): the layout is the ABI, so cudadev need not build
// against devbridge. tests/python/test_cudadev_graphs.py registers this table
// with devbridge, which refuses a layout that does not match its own.
extern "C" {
typedef struct {
  uint32_t major;
  uint32_t minor;
  size_t size;
} DevbridgeGraphAPIHeader;

typedef struct {
  DevbridgeGraphAPIHeader header;
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
} DevbridgeGraphAPI;
}

namespace cudadev {
namespace {

constexpr int32_t kCaptureNone = 0;
constexpr int32_t kCaptureActive = 1;
constexpr int32_t kCaptureInvalidated = 2;

// What a graph or executable handle points to. Both kinds share the
// CUDAGraph: at::cuda::CUDAGraph instantiates at capture_end, so
// "instantiate" hands out a second owner of the same instantiated graph.
// The CUDAGraph (its cudaGraphExec_t and the private memory pool of torch's
// CUDA caching allocator that served the capture) lives until both are gone.
struct Handle {
  enum Kind { kGraph, kExec } kind;
  std::shared_ptr<at::cuda::CUDAGraph> graph;
  c10::DeviceIndex device;
};

struct Registry {
  std::mutex mutex;
  struct Capture {
    c10::DeviceIndex device;
    std::shared_ptr<at::cuda::CUDAGraph> graph;
    c10::MempoolId_t pool;  // the caching allocator's private pool serving it
  };
  // Captures in progress, by native stream.
  std::unordered_map<cudaStream_t, Capture> captures;
  // Live handles: a destroyed or foreign pointer is refused by lookup, never
  // dereferenced.
  std::map<const void*, std::unique_ptr<Handle>> handles;
};

// Leaked on purpose (see streams.cpp): handles may be destroyed at shutdown.
Registry& registry() {
  static auto* instance = new Registry();
  return *instance;
}

std::atomic<int> captures_in_progress{0};

thread_local std::string last_error;

int fail(std::string message) noexcept {
  try {
    last_error = std::move(message);
  } catch (...) {
    // no memory for the message: the -1 still says it failed
  }
  return -1;
}

// Runs `body`, turning any exception into the table's -1 and last error.
template <typename Body>
int guarded(const char* what, Body&& body) noexcept {
  try {
    body();
    return 0;
  } catch (const c10::Error& e) {
    return fail(std::string("cudadev graphs: ") + what + ": " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return fail(std::string("cudadev graphs: ") + what + ": " + e.what());
  } catch (...) {
    return fail(std::string("cudadev graphs: ") + what + ": unknown C++ exception");
  }
}

c10::DeviceIndex checked_device(int32_t device_index) {
  TORCH_CHECK(device_index >= 0 && device_index < device_count(), "device index ", device_index,
              " is not a cudadev device (cudadev has ", static_cast<int>(device_count()), ")");
  return static_cast<c10::DeviceIndex>(device_index);
}

// The stream as ATen's CUDA code sees it: an external CUDA stream of the
// same GPU (cudadev device i is CUDA device i).
c10::cuda::CUDAStream as_cuda_stream(void* stream, c10::DeviceIndex device) {
  TORCH_CHECK(stream != nullptr,
              "CUDA's legacy default stream cannot be captured (CUDADEV_USE_NULL_STREAM=1 makes it cudadev's "
              "default stream); capture on a stream from torch.Stream(device='cudadev')");
  return c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(stream), device);
}

// The live handle of that kind; the caller holds the registry's mutex.
auto find_live_locked(Registry& r, void* handle, Handle::Kind kind) {
  auto it = r.handles.find(handle);
  TORCH_CHECK(it != r.handles.end(), kind == Handle::kGraph ? "graph" : "executable", " handle ", handle,
              " is not a live cudadev ", kind == Handle::kGraph ? "graph" : "executable",
              " (destroyed already, or never returned by cudadev)");
  TORCH_CHECK(it->second->kind == kind, "handle ", handle, " is ",
              it->second->kind == Handle::kGraph ? "a graph; replay takes the executable instantiate returned"
                                                 : "an executable; pass the graph capture_end returned");
  return it;
}

Handle& lookup(void* handle, Handle::Kind kind) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return *find_live_locked(r, handle, kind)->second;
}

void* add_handle(Handle::Kind kind, std::shared_ptr<at::cuda::CUDAGraph> graph, c10::DeviceIndex device) {
  auto handle = std::make_unique<Handle>(Handle{kind, std::move(graph), device});
  void* key = handle.get();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.handles.emplace(key, std::move(handle));
  return key;
}

void destroy_handle(void* handle, Handle::Kind kind) {
  std::unique_ptr<Handle> owned;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = find_live_locked(r, handle, kind);
    owned = std::move(it->second);
    r.handles.erase(it);
  }
  // The last owner's CUDAGraph destructor destroys the executable (launches
  // already queued still run) and hands its private pool back to torch's
  // caching allocator, which frees such memory only with a synchronising
  // cudaFree, so replays queued before cannot lose their memory.
  owned.reset();
}

int capture_begin(void* /*self*/, int32_t device_index, void* stream) noexcept {
  return guarded("capture_begin", [&] {
    const c10::DeviceIndex device = checked_device(device_index);
    const c10::cuda::CUDAStream cuda_stream = as_cuda_stream(stream, device);
    Registry& r = registry();
    {
      std::lock_guard<std::mutex> lock(r.mutex);
      TORCH_CHECK(r.captures.count(cuda_stream.stream()) == 0, "stream ", stream,
                  " is capturing already; end that capture first");
    }
    auto graph = std::make_shared<at::cuda::CUDAGraph>();
    // A pool id of our own, so that a failed capture can stop the caching
    // allocator's routing to it (CUDAGraph::pool() answers only after a
    // successful capture).
    const c10::MempoolId_t pool = at::cuda::graph_pool_handle();
    // CUDAGraph captures the current CUDA stream; presenting cudadev's stream
    // as that stream also makes torch's caching allocator serve the capture's
    // torch.cuda allocations (the fallback's outputs) from the graph's pool.
    // Thread-local mode: only the capturing thread is barred from calls that
    // cannot be captured, as other threads keep using their own streams.
    c10::cuda::CUDAStreamGuard on(cuda_stream);
    graph->capture_begin(pool, cudaStreamCaptureModeThreadLocal);
    std::lock_guard<std::mutex> lock(r.mutex);
    r.captures.emplace(cuda_stream.stream(), Registry::Capture{device, std::move(graph), pool});
    captures_in_progress.fetch_add(1);
  });
}

int capture_end(void* /*self*/, int32_t device_index, void* stream, void** out_graph) noexcept {
  return guarded("capture_end", [&] {
    TORCH_CHECK(out_graph != nullptr, "out_graph is NULL");
    const c10::DeviceIndex device = checked_device(device_index);
    const c10::cuda::CUDAStream cuda_stream = as_cuda_stream(stream, device);
    Registry::Capture capture;
    {
      Registry& r = registry();
      std::lock_guard<std::mutex> lock(r.mutex);
      auto it = r.captures.find(cuda_stream.stream());
      TORCH_CHECK(it != r.captures.end(), "stream ", stream, " is not capturing; call capture_begin first");
      TORCH_CHECK(it->second.device == device, "stream ", stream, " captures on cudadev:",
                  static_cast<int>(it->second.device), ", not cudadev:", static_cast<int>(device));
      capture = std::move(it->second);
      r.captures.erase(it);
      captures_in_progress.fetch_sub(1);
    }
    // The capture ends here whatever happens next; frees that arrived during
    // it were parked by the allocator (a stream-ordered free on a capturing
    // stream would have been captured instead of run).
    struct FlushParkedFrees {
      c10::DeviceIndex device;
      ~FlushParkedFrees() { allocator().release_parked_frees(device); }
    } flush{device};
    c10::cuda::CUDAStreamGuard on(cuda_stream);
    try {
      capture.graph->capture_end();
    } catch (...) {
      // CUDA ended the capture (an invalidated capture fails here with
      // cudaErrorStreamCaptureInvalidated); CUDAGraph did not get to stop
      // routing the stream's allocations to the pool; what the failed
      // capture allocated there stays reserved by the caching allocator.
      c10::cuda::CUDACachingAllocator::endAllocateToPool(device, capture.pool);
      throw;
    }
    *out_graph = add_handle(Handle::kGraph, std::move(capture.graph), device);
  });
}

int instantiate(void* /*self*/, void* graph, void** out_exec) noexcept {
  return guarded("instantiate", [&] {
    TORCH_CHECK(out_exec != nullptr, "out_exec is NULL");
    Handle& handle = lookup(graph, Handle::kGraph);
    *out_exec = add_handle(Handle::kExec, handle.graph, handle.device);
  });
}

int replay(void* /*self*/, void* exec, int32_t device_index, void* stream) noexcept {
  return guarded("replay", [&] {
    const c10::DeviceIndex device = checked_device(device_index);
    std::shared_ptr<at::cuda::CUDAGraph> graph;
    {
      Handle& handle = lookup(exec, Handle::kExec);
      TORCH_CHECK(handle.device == device, "the executable was captured on cudadev:",
                  static_cast<int>(handle.device), "; replay it on a stream of that device, not cudadev:",
                  static_cast<int>(device));
      graph = handle.graph;  // kept alive through the launch even if destroyed meanwhile
    }
    c10::cuda::CUDAStreamGuard on(as_cuda_stream(stream, device));
    graph->replay();
  });
}

int graph_destroy(void* /*self*/, void* graph) noexcept {
  return guarded("graph_destroy", [&] { destroy_handle(graph, Handle::kGraph); });
}

int exec_destroy(void* /*self*/, void* exec) noexcept {
  return guarded("exec_destroy", [&] { destroy_handle(exec, Handle::kExec); });
}

int capture_status(void* /*self*/, int32_t device_index, void* stream, int32_t* out_status) noexcept {
  return guarded("capture_status", [&] {
    TORCH_CHECK(out_status != nullptr, "out_status is NULL");
    const c10::DeviceIndex device = checked_device(device_index);
    if (stream == nullptr) {
      *out_status = kCaptureNone;  // the legacy stream never captures for cudadev
      return;
    }
    ScopedDevice on(device);
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    const cudaError_t result = cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status);
    if (result != cudaSuccess) {
      (void)cudaGetLastError();
      TORCH_CHECK(false, "cudaStreamIsCapturing failed: ", cudaGetErrorString(result));
    }
    *out_status = status == cudaStreamCaptureStatusActive        ? kCaptureActive
                  : status == cudaStreamCaptureStatusInvalidated ? kCaptureInvalidated
                                                                 : kCaptureNone;
  });
}

const char* get_last_error(void* /*self*/) { return last_error.c_str(); }

DevbridgeGraphAPI table = {
    {1, 0, sizeof(DevbridgeGraphAPI)},
    /*flags=*/0,  // cudadev has no submit hook: launches go straight to its streams
    /*self=*/nullptr,
    "cudadev graphs (at::cuda::CUDAGraph on cudadev streams)",
    &capture_begin,
    &capture_end,
    &instantiate,
    &replay,
    &graph_destroy,
    &exec_destroy,
    &capture_status,
    &get_last_error,
};

}  // namespace

void* graph_api() { return &table; }

bool any_capture_in_progress() noexcept { return captures_in_progress.load(std::memory_order_relaxed) > 0; }

bool stream_is_capturing(cudaStream_t stream) noexcept {
  if (!any_capture_in_progress() || stream == nullptr) {
    return false;
  }
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace cudadev
