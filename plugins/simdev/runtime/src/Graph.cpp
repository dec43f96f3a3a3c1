// Graphs: stream capture and replay (runtime.h, "graphs").
//
// A capture is the stream's Recording (Stream.h): the work items that
// enqueue() would have queued, in order. A graph and its executables share
// that list, immutable once the capture ended; a replay queues a copy of
// each item on the replay stream, so every replay runs the same closures
// (with the same pointers and argument values) as freshly queued work, and
// whatever the closures keep alive (argument copies, a host function's
// owned user data) lives until the graph, its executables and the replays
// already queued have all let go.
#include <memory>
#include <vector>

#include "Error.h"
#include "HandleTable.h"
#include "Stream.h"

namespace simdev {
namespace {

using Items = std::shared_ptr<const std::vector<WorkItem>>;

struct Graph {
  int device;
  Items items;
};

struct GraphExec {
  int device;
  Items items;
};

// Leaked like the stream registry: graphs may be destroyed from other
// libraries' static destructors.
HandleTable<Graph>& graphs() {
  static auto* table = new HandleTable<Graph>;
  return *table;
}

HandleTable<GraphExec>& executables() {
  static auto* table = new HandleTable<GraphExec>;
  return *table;
}

std::shared_ptr<Graph> findGraph(sdGraph_t handle) {
  if (handle == nullptr) throw error(sdErrorInvalidGraph, "graph is NULL; pass a graph from sdStreamEndCapture");
  auto graph = graphs().find(handleId(handle));
  if (!graph) {
    throw error(sdErrorInvalidGraph, "graph ", static_cast<const void*>(handle),
                " is not a live graph (destroyed, or not a handle from sdStreamEndCapture)");
  }
  return graph;
}

std::shared_ptr<GraphExec> findExec(sdGraphExec_t handle) {
  if (handle == nullptr) {
    throw error(sdErrorInvalidGraph, "exec is NULL; pass an executable graph from sdGraphInstantiate");
  }
  auto exec = executables().find(handleId(handle));
  if (!exec) {
    const bool is_graph = graphs().find(handleId(handle)) != nullptr;
    throw error(sdErrorInvalidGraph, "exec ", static_cast<const void*>(handle),
                is_graph ? " is a captured graph, not an executable one; instantiate it with sdGraphInstantiate "
                           "and launch the result"
                         : " is not a live executable graph (destroyed, or not a handle from sdGraphInstantiate)");
  }
  return exec;
}

}  // namespace
}  // namespace simdev

using simdev::apiCall;
using simdev::error;

extern "C" {

SIMDEV_API sdError_t sdStreamBeginCapture(sdStream_t stream) {
  return apiCall("sdStreamBeginCapture", [&] { simdev::findStream(stream)->beginCapture(); });
}

SIMDEV_API sdError_t sdStreamEndCapture(sdStream_t stream, sdGraph_t* out_graph) {
  return apiCall("sdStreamEndCapture", [&] {
    simdev::requireOutput(out_graph, "out_graph");
    auto s = simdev::findStream(stream);
    simdev::Recording recording = s->endCapture();
    if (!recording.invalidated.empty()) {
      throw error(sdErrorStreamCaptureInvalidated, "the capture on ", s->describe(), " was invalidated by ",
                  recording.invalidated, "; the capture has ended without a graph. Capture again without it");
    }
    auto graph = std::make_shared<simdev::Graph>();
    graph->device = s->device();
    graph->items = std::make_shared<const std::vector<simdev::WorkItem>>(std::move(recording.items));
    const uint64_t id = simdev::nextHandleId();
    simdev::graphs().insert(id, std::move(graph));
    *out_graph = simdev::asHandle<sdGraph_t>(id);
  });
}

SIMDEV_API sdError_t sdStreamGetCaptureStatus(sdStream_t stream, sdStreamCaptureStatus* out_status) {
  return apiCall("sdStreamGetCaptureStatus", [&] {
    simdev::requireOutput(out_status, "out_status");
    *out_status = simdev::findStream(stream)->captureStatus();
  });
}

SIMDEV_API sdError_t sdGraphGetNodeCount(sdGraph_t graph, size_t* out_count) {
  return apiCall("sdGraphGetNodeCount", [&] {
    simdev::requireOutput(out_count, "out_count");
    *out_count = simdev::findGraph(graph)->items->size();
  });
}

SIMDEV_API sdError_t sdGraphInstantiate(sdGraphExec_t* out_exec, sdGraph_t graph) {
  return apiCall("sdGraphInstantiate", [&] {
    simdev::requireOutput(out_exec, "out_exec");
    auto g = simdev::findGraph(graph);
    const uint64_t id = simdev::nextHandleId();
    simdev::executables().insert(id, std::make_shared<simdev::GraphExec>(simdev::GraphExec{g->device, g->items}));
    *out_exec = simdev::asHandle<sdGraphExec_t>(id);
  });
}

SIMDEV_API sdError_t sdGraphLaunch(sdGraphExec_t exec, sdStream_t stream) {
  return apiCall("sdGraphLaunch", [&] {
    auto e = simdev::findExec(exec);
    auto s = simdev::findStream(stream);
    if (s->device() != e->device) {
      throw error(sdErrorInvalidValue, "the graph was captured on device ", e->device, ", but ", s->describe(),
                  " belongs to device ", s->device(),
                  "; its work uses device ", e->device, "'s memory, so replay it on a stream of device ", e->device);
    }
    s->enqueueAll(*e->items);
  });
}

SIMDEV_API sdError_t sdGraphDestroy(sdGraph_t graph) {
  return apiCall("sdGraphDestroy", [&] {
    simdev::findGraph(graph);
    if (!simdev::graphs().erase(simdev::handleId(graph))) {
      throw error(sdErrorInvalidGraph, "graph ", static_cast<const void*>(graph),
                  " was destroyed concurrently by another thread");
    }
  });
}

SIMDEV_API sdError_t sdGraphExecDestroy(sdGraphExec_t exec) {
  return apiCall("sdGraphExecDestroy", [&] {
    simdev::findExec(exec);
    if (!simdev::executables().erase(simdev::handleId(exec))) {
      throw error(sdErrorInvalidGraph, "exec ", static_cast<const void*>(exec),
                  " was destroyed concurrently by another thread");
    }
  });
}

}  // extern "C"
