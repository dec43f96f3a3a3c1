// Graphs: stream capture records work instead of running it, replays run it
// in order on any stream of the device, uncapturable operations invalidate
// the capture instead of hanging, and bad handles are refused by name.
#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {

using simdev_test::SimdevTest;
using GraphTest = SimdevTest;

int count_call(void* counter) {
  static_cast<std::atomic<int>*>(counter)->fetch_add(1);
  return 0;
}

// Appends an id to a shared log: the order replays ran their items in.
struct OrderLog {
  std::mutex mutex;
  std::vector<int> ids;
};
struct LogEntry {
  OrderLog* log;
  int id;
};
int append_id(void* entry) {
  auto* e = static_cast<LogEntry*>(entry);
  std::lock_guard<std::mutex> lock(e->log->mutex);
  e->log->ids.push_back(e->id);
  return 0;
}

sdStream_t new_stream(int device = 0) {
  sdStream_t stream = nullptr;
  EXPECT_EQ(sdStreamCreate(device, &stream), sdSuccess) << sdGetLastErrorString();
  return stream;
}

sdStreamCaptureStatus status_of(sdStream_t stream) {
  sdStreamCaptureStatus status = sdStreamCaptureStatusNone;
  EXPECT_EQ(sdStreamGetCaptureStatus(stream, &status), sdSuccess) << sdGetLastErrorString();
  return status;
}

TEST_F(GraphTest, CaptureRecordsAndReplaysRunTheWork) {
  sdStream_t stream = new_stream();
  std::atomic<int> calls{0};
  SD_ASSERT_OK(sdStreamBeginCapture(stream));
  EXPECT_EQ(status_of(stream), sdStreamCaptureStatusActive);
  SD_ASSERT_OK(sdLaunchHostFunc(stream, &count_call, &calls));
  SD_ASSERT_OK(sdLaunchHostFunc(stream, &count_call, &calls));
  sdGraph_t graph = nullptr;
  SD_ASSERT_OK(sdStreamEndCapture(stream, &graph));
  EXPECT_EQ(status_of(stream), sdStreamCaptureStatusNone);
  SD_ASSERT_OK(sdStreamSynchronize(stream));
  EXPECT_EQ(calls.load(), 0) << "captured work must not run at capture";
  size_t nodes = 0;
  SD_ASSERT_OK(sdGraphGetNodeCount(graph, &nodes));
  EXPECT_EQ(nodes, 2u);

  sdGraphExec_t exec = nullptr;
  SD_ASSERT_OK(sdGraphInstantiate(&exec, graph));
  SD_ASSERT_OK(sdGraphDestroy(graph));  // the executable keeps the work
  for (int i = 0; i < 3; ++i) SD_ASSERT_OK(sdGraphLaunch(exec, stream));
  SD_ASSERT_OK(sdStreamSynchronize(stream));
  EXPECT_EQ(calls.load(), 6);
  SD_ASSERT_OK(sdGraphExecDestroy(exec));
  SD_ASSERT_OK(sdStreamDestroy(stream));
}

// With the debug delay, a replay whose items ran out of order, or
// concurrently with each other, would read stale data: host -> x -> y -> host.
TEST_F(GraphTest, ReplayRunsCopiesInOrderOnAnotherStream) {
  sdStream_t capture = new_stream(), replay = new_stream();
  void* x = nullptr;
  void* y = nullptr;
  SD_ASSERT_OK(sdMalloc(&x, sizeof(int64_t), 0));
  SD_ASSERT_OK(sdMalloc(&y, sizeof(int64_t), 0));
  int64_t in = 0, out = -1;
  OrderLog log;
  LogEntry first{&log, 1}, second{&log, 2};
  SD_ASSERT_OK(sdStreamBeginCapture(capture));
  SD_ASSERT_OK(sdLaunchHostFunc(capture, &append_id, &first));
  SD_ASSERT_OK(sdMemcpyAsync(x, &in, sizeof(in), sdMemcpyHostToDevice, capture));
  SD_ASSERT_OK(sdMemcpyAsync(y, x, sizeof(in), sdMemcpyDeviceToDevice, capture));
  SD_ASSERT_OK(sdMemcpyAsync(&out, y, sizeof(out), sdMemcpyDeviceToHost, capture));
  SD_ASSERT_OK(sdLaunchHostFunc(capture, &append_id, &second));
  sdGraph_t graph = nullptr;
  SD_ASSERT_OK(sdStreamEndCapture(capture, &graph));
  sdGraphExec_t exec = nullptr;
  SD_ASSERT_OK(sdGraphInstantiate(&exec, graph));

  SD_ASSERT_OK(sdSetOpDelay(2000));
  for (int64_t value : {7, 11, 13}) {
    in = value;  // the recorded copy reads the host buffer when it runs
    SD_ASSERT_OK(sdGraphLaunch(exec, replay));
    SD_ASSERT_OK(sdStreamSynchronize(replay));
    EXPECT_EQ(out, value);
  }
  EXPECT_EQ(log.ids, (std::vector<int>{1, 2, 1, 2, 1, 2}));
  SD_ASSERT_OK(sdSetOpDelay(0));
  SD_ASSERT_OK(sdGraphExecDestroy(exec));
  SD_ASSERT_OK(sdGraphDestroy(graph));
  SD_ASSERT_OK(sdFree(x));
  SD_ASSERT_OK(sdFree(y));
  SD_ASSERT_OK(sdStreamDestroy(capture));
  SD_ASSERT_OK(sdStreamDestroy(replay));
}

TEST_F(GraphTest, CapturedKernelKeepsItsArgumentValues) {
  sdModule_t module = nullptr;
  SD_ASSERT_OK(sdModuleLoad(&module, SIMDEV_TEST_KERNELS_PATH));
  sdFunction_t store = nullptr;
  SD_ASSERT_OK(sdModuleGetFunction(&store, module, "store_value_and_device"));
  sdStream_t stream = new_stream(1);
  void* out = nullptr;
  SD_ASSERT_OK(sdMalloc(&out, 2 * sizeof(int64_t), 1));
  int64_t value = 5;
  void* args[] = {&out, &value};
  const size_t sizes[] = {sizeof(out), sizeof(value)};
  SD_ASSERT_OK(sdStreamBeginCapture(stream));
  SD_ASSERT_OK(sdLaunchKernel(store, 1, 1, 1, args, sizes, 2, stream));
  sdGraph_t graph = nullptr;
  SD_ASSERT_OK(sdStreamEndCapture(stream, &graph));
  value = 99;  // copied at capture, as at launch: the replay still stores 5
  sdGraphExec_t exec = nullptr;
  SD_ASSERT_OK(sdGraphInstantiate(&exec, graph));
  SD_ASSERT_OK(sdGraphLaunch(exec, stream));
  int64_t host[2] = {0, 0};
  SD_ASSERT_OK(sdMemcpy(host, out, sizeof(host), sdMemcpyDeviceToHost, stream));
  EXPECT_EQ(host[0], 5);
  EXPECT_EQ(host[1], 1);
  SD_ASSERT_OK(sdGraphExecDestroy(exec));
  SD_ASSERT_OK(sdGraphDestroy(graph));
  SD_ASSERT_OK(sdFree(out));
  SD_ASSERT_OK(sdStreamDestroy(stream));
  SD_ASSERT_OK(sdModuleUnload(module));
}

// Every operation that needs the queue's progress refuses, names itself,
// invalidates the capture; later work and the end of the capture say so, and
// the stream works normally afterwards.
TEST_F(GraphTest, UncapturableOperationsInvalidateTheCapture) {
  sdStream_t stream = new_stream();
  sdStream_t other = new_stream();
  sdEvent_t event = nullptr;
  SD_ASSERT_OK(sdEventCreate(&event, sdEventDefault));
  SD_ASSERT_OK(sdEventRecord(event, other));
  void* buffer = nullptr;
  SD_ASSERT_OK(sdMalloc(&buffer, 64, 0));
  char host[64] = {};
  struct Case {
    const char* name;
    std::function<sdError_t()> call;
  };
  const std::vector<Case> cases = {
      {"sdStreamSynchronize", [&] { return sdStreamSynchronize(stream); }},
      {"sdStreamQuery", [&] { return sdStreamQuery(stream); }},
      {"sdMemcpy", [&] { return sdMemcpy(host, buffer, 64, sdMemcpyDeviceToHost, stream); }},
      {"sdEventRecord", [&] { return sdEventRecord(event, stream); }},
      {"sdStreamWaitEvent", [&] { return sdStreamWaitEvent(stream, event); }},
      {"sdDeviceSynchronize", [&] { return sdDeviceSynchronize(0); }},
      {"sdStreamDestroy", [&] { return sdStreamDestroy(stream); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SD_ASSERT_OK(sdStreamBeginCapture(stream));
    SD_EXPECT_ERROR(c.call(), sdErrorStreamCaptureUnsupported, "cannot be captured: stream");
    EXPECT_EQ(status_of(stream), sdStreamCaptureStatusInvalidated);
    SD_EXPECT_ERROR(sdMemsetAsync(buffer, 1, 64, stream), sdErrorStreamCaptureInvalidated,
                    "end it with sdStreamEndCapture");
    sdGraph_t graph = nullptr;
    SD_EXPECT_ERROR(sdStreamEndCapture(stream, &graph), sdErrorStreamCaptureInvalidated, c.name);
    EXPECT_EQ(graph, nullptr);
    EXPECT_EQ(status_of(stream), sdStreamCaptureStatusNone);
    SD_ASSERT_OK(sdMemsetAsync(buffer, 2, 64, stream));  // the stream works again
    SD_ASSERT_OK(sdStreamSynchronize(stream));
  }
  // Other streams of the device are not affected by a capture.
  SD_ASSERT_OK(sdStreamBeginCapture(stream));
  SD_ASSERT_OK(sdEventRecord(event, other));
  SD_ASSERT_OK(sdStreamSynchronize(other));
  sdGraph_t graph = nullptr;
  SD_ASSERT_OK(sdStreamEndCapture(stream, &graph));
  SD_ASSERT_OK(sdGraphDestroy(graph));
  SD_ASSERT_OK(sdEventDestroy(event));
  SD_ASSERT_OK(sdFree(buffer));
  SD_ASSERT_OK(sdStreamDestroy(stream));
  SD_ASSERT_OK(sdStreamDestroy(other));
}

TEST_F(GraphTest, BadHandlesAndStatesAreRefusedByName) {
  sdStream_t stream = new_stream();
  sdGraph_t graph = nullptr;
  sdGraphExec_t exec = nullptr;
  SD_EXPECT_ERROR(sdStreamEndCapture(stream, &graph), sdErrorInvalidValue, "is not capturing");
  SD_ASSERT_OK(sdStreamBeginCapture(stream));
  SD_EXPECT_ERROR(sdStreamBeginCapture(stream), sdErrorInvalidValue, "is already capturing");
  SD_EXPECT_ERROR(sdStreamEndCapture(stream, nullptr), sdErrorInvalidValue, "out_graph is NULL");
  SD_ASSERT_OK(sdStreamEndCapture(stream, &graph));
  size_t nodes = 1;
  SD_ASSERT_OK(sdGraphGetNodeCount(graph, &nodes));
  EXPECT_EQ(nodes, 0u);

  SD_EXPECT_ERROR(sdGraphLaunch(reinterpret_cast<sdGraphExec_t>(graph), stream), sdErrorInvalidGraph,
                  "is a captured graph, not an executable one; instantiate it");
  SD_EXPECT_ERROR(sdGraphLaunch(nullptr, stream), sdErrorInvalidGraph, "exec is NULL");
  SD_EXPECT_ERROR(sdGraphInstantiate(&exec, nullptr), sdErrorInvalidGraph, "graph is NULL");
  SD_ASSERT_OK(sdGraphInstantiate(&exec, graph));
  SD_EXPECT_ERROR(sdGraphLaunch(exec, nullptr), sdErrorInvalidStream, "stream is NULL");
  sdStream_t on_device_1 = new_stream(1);
  SD_EXPECT_ERROR(sdGraphLaunch(exec, on_device_1), sdErrorInvalidValue, "replay it on a stream of device 0");
  SD_EXPECT_ERROR(sdGraphDestroy(reinterpret_cast<sdGraph_t>(exec)), sdErrorInvalidGraph, "is not a live graph");
  SD_ASSERT_OK(sdGraphDestroy(graph));
  SD_EXPECT_ERROR(sdGraphDestroy(graph), sdErrorInvalidGraph, "is not a live graph");
  SD_EXPECT_ERROR(sdGraphInstantiate(&exec, graph), sdErrorInvalidGraph, "is not a live graph");
  SD_ASSERT_OK(sdGraphLaunch(exec, stream));  // an empty graph launches nothing
  SD_ASSERT_OK(sdGraphExecDestroy(exec));
  SD_EXPECT_ERROR(sdGraphExecDestroy(exec), sdErrorInvalidGraph, "is not a live executable graph");
  SD_EXPECT_ERROR(sdGraphLaunch(exec, stream), sdErrorInvalidGraph, "is not a live executable graph");
  SD_EXPECT_ERROR(sdStreamBeginCapture(nullptr), sdErrorInvalidStream, "stream is NULL");
  sdStreamCaptureStatus status;
  SD_EXPECT_ERROR(sdStreamGetCaptureStatus(stream, nullptr), sdErrorInvalidValue, "out_status is NULL");
  SD_EXPECT_ERROR(sdStreamGetCaptureStatus(nullptr, &status), sdErrorInvalidStream, "stream is NULL");
  SD_ASSERT_OK(sdStreamDestroy(on_device_1));
  SD_ASSERT_OK(sdStreamDestroy(stream));
}

struct Owned {
  std::atomic<int> runs{0};
  std::atomic<int> cleanups{0};
};
int run_owned(void* owned) {
  static_cast<Owned*>(owned)->runs.fetch_add(1);
  return 0;
}
void clean_owned(void* owned) { static_cast<Owned*>(owned)->cleanups.fetch_add(1); }

TEST_F(GraphTest, OwnedUserDataLivesAsLongAsQueuedOrCapturedWork) {
  sdStream_t stream = new_stream();
  Owned eager;
  SD_ASSERT_OK(sdLaunchHostFuncWithCleanup(stream, &run_owned, &eager, &clean_owned));
  SD_ASSERT_OK(sdStreamSynchronize(stream));
  EXPECT_EQ(eager.runs.load(), 1);
  EXPECT_EQ(eager.cleanups.load(), 1);

  Owned captured;
  SD_ASSERT_OK(sdStreamBeginCapture(stream));
  SD_ASSERT_OK(sdLaunchHostFuncWithCleanup(stream, &run_owned, &captured, &clean_owned));
  sdGraph_t graph = nullptr;
  SD_ASSERT_OK(sdStreamEndCapture(stream, &graph));
  sdGraphExec_t exec = nullptr;
  SD_ASSERT_OK(sdGraphInstantiate(&exec, graph));
  SD_ASSERT_OK(sdGraphDestroy(graph));
  SD_ASSERT_OK(sdGraphLaunch(exec, stream));
  SD_ASSERT_OK(sdGraphLaunch(exec, stream));
  SD_ASSERT_OK(sdGraphExecDestroy(exec));  // queued replays still hold the work
  SD_ASSERT_OK(sdStreamSynchronize(stream));
  EXPECT_EQ(captured.runs.load(), 2);
  EXPECT_EQ(captured.cleanups.load(), 1);

  Owned refused;
  SD_EXPECT_ERROR(sdLaunchHostFuncWithCleanup(stream, &run_owned, &refused, nullptr), sdErrorInvalidValue,
                  "cleanup is NULL");
  SD_EXPECT_ERROR(sdLaunchHostFuncWithCleanup(nullptr, &run_owned, &refused, &clean_owned),
                  sdErrorInvalidStream, "stream is NULL");
  SD_ASSERT_OK(sdStreamBeginCapture(stream));
  SD_EXPECT_ERROR(sdStreamQuery(stream), sdErrorStreamCaptureUnsupported, "cannot be captured");
  SD_EXPECT_ERROR(sdLaunchHostFuncWithCleanup(stream, &run_owned, &refused, &clean_owned),
                  sdErrorStreamCaptureInvalidated, "was invalidated");
  EXPECT_EQ(refused.cleanups.load(), 0) << "a refused launch leaves user_data to the caller";
  SD_EXPECT_ERROR(sdStreamEndCapture(stream, &graph), sdErrorStreamCaptureInvalidated, "sdStreamQuery");
  SD_ASSERT_OK(sdStreamDestroy(stream));
}

// Under TSan: replays of one executable on two streams at once, and eager
// work on other streams while a third thread captures.
TEST_F(GraphTest, ConcurrentReplaysAndCaptures) {
  std::atomic<int> calls{0};
  sdStream_t capture = new_stream();
  SD_ASSERT_OK(sdStreamBeginCapture(capture));
  for (int i = 0; i < 4; ++i) SD_ASSERT_OK(sdLaunchHostFunc(capture, &count_call, &calls));
  sdGraph_t graph = nullptr;
  SD_ASSERT_OK(sdStreamEndCapture(capture, &graph));
  sdGraphExec_t exec = nullptr;
  SD_ASSERT_OK(sdGraphInstantiate(&exec, graph));

  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      sdStream_t stream = new_stream();
      for (int i = 0; i < 20; ++i) EXPECT_EQ(sdGraphLaunch(exec, stream), sdSuccess) << sdGetLastErrorString();
      EXPECT_EQ(sdStreamSynchronize(stream), sdSuccess) << sdGetLastErrorString();
      EXPECT_EQ(sdStreamDestroy(stream), sdSuccess) << sdGetLastErrorString();
    });
  }
  std::atomic<int> captured_calls{0};
  threads.emplace_back([&] {
    sdStream_t stream = new_stream();
    for (int round = 0; round < 20; ++round) {
      EXPECT_EQ(sdStreamBeginCapture(stream), sdSuccess) << sdGetLastErrorString();
      EXPECT_EQ(sdLaunchHostFunc(stream, &count_call, &captured_calls), sdSuccess) << sdGetLastErrorString();
      sdGraph_t g = nullptr;
      EXPECT_EQ(sdStreamEndCapture(stream, &g), sdSuccess) << sdGetLastErrorString();
      EXPECT_EQ(sdGraphDestroy(g), sdSuccess) << sdGetLastErrorString();
    }
    EXPECT_EQ(sdStreamDestroy(stream), sdSuccess) << sdGetLastErrorString();
  });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(calls.load(), 2 * 20 * 4);
  EXPECT_EQ(captured_calls.load(), 0);
  SD_ASSERT_OK(sdGraphExecDestroy(exec));
  SD_ASSERT_OK(sdGraphDestroy(graph));
  SD_ASSERT_OK(sdStreamDestroy(capture));
}

}  // namespace
