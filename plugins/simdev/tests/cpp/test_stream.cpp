// Streams: handles, in-order execution, asynchrony, sticky failures, deadlock
// detection for calls made from a stream's own worker.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "test_util.h"

namespace {

using simdev_test::Gate;
using simdev_test::SimdevTest;
using StreamTest = SimdevTest;

TEST_F(StreamTest, DefaultStreamIsOnePerDevice) {
  sdStream_t first = default_stream(0), again = default_stream(0), other = default_stream(1);
  EXPECT_NE(first, nullptr);
  EXPECT_EQ(first, again);
  EXPECT_NE(first, other);
  int device = -1;
  SD_ASSERT_OK(sdStreamGetDevice(other, &device));
  EXPECT_EQ(device, 1);
  sdStream_t stream = nullptr;
  SD_EXPECT_ERROR(sdStreamGetDefault(2, &stream), sdErrorInvalidDevice, "sdStreamGetDefault: device 2");
}

TEST_F(StreamTest, DefaultStreamCannotBeDestroyed) {
  SD_EXPECT_ERROR(sdStreamDestroy(default_stream(1)), sdErrorInvalidValue, "is a default stream");
  SD_ASSERT_OK(sdStreamQuery(default_stream(1)));
}

TEST_F(StreamTest, CreateGivesDistinctStreamsOnTheDevice) {
  sdStream_t a = nullptr, b = nullptr;
  SD_ASSERT_OK(sdStreamCreate(1, &a));
  SD_ASSERT_OK(sdStreamCreate(1, &b));
  EXPECT_NE(a, b);
  EXPECT_NE(a, default_stream(1));
  int device = -1;
  SD_ASSERT_OK(sdStreamGetDevice(a, &device));
  EXPECT_EQ(device, 1);
  SD_ASSERT_OK(sdStreamDestroy(a));
  SD_ASSERT_OK(sdStreamDestroy(b));
  SD_EXPECT_ERROR(sdStreamCreate(2, &a), sdErrorInvalidDevice, "sdStreamCreate: device 2");
}

TEST_F(StreamTest, DestroyedStreamIsRejectedEverywhere) {
  sdStream_t stream = nullptr;
  SD_ASSERT_OK(sdStreamCreate(0, &stream));
  SD_ASSERT_OK(sdStreamDestroy(stream));
  int device = 0;
  char host[4] = {};
  sdEvent_t event = nullptr;
  SD_ASSERT_OK(sdEventCreate(&event, sdEventDefault));
  const char* why = "is not a live stream";
  SD_EXPECT_ERROR(sdStreamQuery(stream), sdErrorInvalidStream, why);
  SD_EXPECT_ERROR(sdStreamSynchronize(stream), sdErrorInvalidStream, why);
  SD_EXPECT_ERROR(sdStreamDestroy(stream), sdErrorInvalidStream, why);
  SD_EXPECT_ERROR(sdStreamGetDevice(stream, &device), sdErrorInvalidStream, why);
  SD_EXPECT_ERROR(sdLaunchHostFunc(stream, [](void*) { return 0; }, nullptr), sdErrorInvalidStream, why);
  SD_EXPECT_ERROR(sdMemcpyAsync(host, host, 4, sdMemcpyHostToHost, stream), sdErrorInvalidStream, why);
  SD_EXPECT_ERROR(sdEventRecord(event, stream), sdErrorInvalidStream, why);
  SD_EXPECT_ERROR(sdStreamWaitEvent(stream, event), sdErrorInvalidStream, why);
  SD_ASSERT_OK(sdEventDestroy(event));
}

TEST_F(StreamTest, NullAndForeignHandlesAreRejected) {
  SD_EXPECT_ERROR(sdStreamQuery(nullptr), sdErrorInvalidStream, "stream is NULL");
  sdEvent_t event = nullptr;  // a live handle, but of another kind
  SD_ASSERT_OK(sdEventCreate(&event, sdEventDefault));
  SD_EXPECT_ERROR(sdStreamSynchronize(reinterpret_cast<sdStream_t>(event)), sdErrorInvalidStream,
                  "is not a live stream");
  SD_ASSERT_OK(sdEventDestroy(event));
}

TEST_F(StreamTest, WorkRunsInQueueOrderDespiteDelay) {
  SD_ASSERT_OK(sdSetOpDelay(1000));
  sdStream_t stream = nullptr;
  SD_ASSERT_OK(sdStreamCreate(0, &stream));
  constexpr int kItems = 40;
  int32_t* slot = nullptr;
  SD_ASSERT_OK(sdMalloc(reinterpret_cast<void**>(&slot), sizeof(int32_t), 0));
  std::vector<int32_t> values(kItems), results(kItems, -1);
  std::vector<int> host_order;  // touched only by the worker until synchronized
  for (int i = 0; i < kItems; ++i) {
    values[i] = i;
    // Each round trips through one device slot: any reordering of the
    // upload/download pairs shows up as a wrong value.
    SD_ASSERT_OK(sdMemcpyAsync(slot, &values[i], sizeof(int32_t), sdMemcpyHostToDevice, stream));
    SD_ASSERT_OK(sdMemcpyAsync(&results[i], slot, sizeof(int32_t), sdMemcpyDeviceToHost, stream));
    SD_ASSERT_OK(sdLaunchHostFunc(
        stream,
        [](void* order) {
          auto* list = static_cast<std::vector<int>*>(order);
          list->push_back(static_cast<int>(list->size()));
          return 0;
        },
        &host_order));
  }
  SD_ASSERT_OK(sdStreamSynchronize(stream));
  EXPECT_EQ(results, values);
  ASSERT_EQ(host_order.size(), static_cast<size_t>(kItems));
  SD_ASSERT_OK(sdStreamDestroy(stream));
  SD_ASSERT_OK(sdFree(slot));
}

TEST_F(StreamTest, EnqueueNeverWaitsAndQueryTracksProgress) {
  Gate gate;
  sdStream_t stream = default_stream(1);
  std::atomic<int> ran{0};
  SD_ASSERT_OK(sdLaunchHostFunc(stream, Gate::wait_fn, &gate));
  for (int i = 0; i < 10; ++i) {
    SD_ASSERT_OK(sdLaunchHostFunc(
        stream,
        [](void* counter) {
          ++*static_cast<std::atomic<int>*>(counter);
          return 0;
        },
        &ran));
  }
  EXPECT_EQ(sdStreamQuery(stream), sdErrorNotReady);
  EXPECT_EQ(ran.load(), 0);
  gate.open();
  SD_ASSERT_OK(sdStreamSynchronize(stream));
  EXPECT_EQ(ran.load(), 10);
  SD_ASSERT_OK(sdStreamQuery(stream));
}

TEST_F(StreamTest, DestroyWaitsForQueuedWork) {
  SD_ASSERT_OK(sdSetOpDelay(20000));
  sdStream_t stream = nullptr;
  SD_ASSERT_OK(sdStreamCreate(0, &stream));
  std::atomic<bool> ran{false};
  SD_ASSERT_OK(sdLaunchHostFunc(
      stream,
      [](void* flag) {
        static_cast<std::atomic<bool>*>(flag)->store(true);
        return 0;
      },
      &ran));
  SD_ASSERT_OK(sdStreamDestroy(stream));
  EXPECT_TRUE(ran.load());
}

// Two host functions that each wait for the other to start can only both
// finish if the two streams' workers run at the same time.
struct Rendezvous {
  std::mutex mutex;
  std::condition_variable arrived_cv;
  int arrived = 0;
  static int meet(void* self_ptr) {
    auto* self = static_cast<Rendezvous*>(self_ptr);
    std::unique_lock<std::mutex> lock(self->mutex);
    ++self->arrived;
    self->arrived_cv.notify_all();
    return self->arrived_cv.wait_for(lock, std::chrono::seconds(30), [self] { return self->arrived == 2; }) ? 0 : 1;
  }
};

TEST_F(StreamTest, StreamsRunConcurrently) {
  sdStream_t a = nullptr, b = nullptr;
  SD_ASSERT_OK(sdStreamCreate(0, &a));
  SD_ASSERT_OK(sdStreamCreate(0, &b));  // same device: still independent queues
  Rendezvous rendezvous;
  SD_ASSERT_OK(sdLaunchHostFunc(a, Rendezvous::meet, &rendezvous));
  SD_ASSERT_OK(sdLaunchHostFunc(b, Rendezvous::meet, &rendezvous));
  SD_ASSERT_OK(sdStreamSynchronize(a));
  SD_ASSERT_OK(sdStreamSynchronize(b));
  SD_ASSERT_OK(sdStreamDestroy(a));
  SD_ASSERT_OK(sdStreamDestroy(b));
}

TEST_F(StreamTest, DelayAppliesBeforeQueuedItems) {
  // The delay must hold back queued work (that is what makes ordering bugs
  // visible). Overlap of the two streams is proven deterministically by
  // StreamsRunConcurrently; no upper time bound here, CI machines are noisy.
  SD_ASSERT_OK(sdSetOpDelay(200000));
  sdStream_t a = nullptr, b = nullptr;
  SD_ASSERT_OK(sdStreamCreate(0, &a));
  SD_ASSERT_OK(sdStreamCreate(1, &b));
  const auto start = std::chrono::steady_clock::now();
  SD_ASSERT_OK(sdLaunchHostFunc(a, [](void*) { return 0; }, nullptr));
  SD_ASSERT_OK(sdLaunchHostFunc(b, [](void*) { return 0; }, nullptr));
  SD_ASSERT_OK(sdStreamSynchronize(a));
  SD_ASSERT_OK(sdStreamSynchronize(b));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, std::chrono::milliseconds(200));
  SD_ASSERT_OK(sdStreamDestroy(a));
  SD_ASSERT_OK(sdStreamDestroy(b));
}

int fail_with_7(void*) { return 7; }

TEST_F(StreamTest, HostFunctionFailureIsReportedOnceBySynchronize) {
  sdStream_t stream = nullptr;
  SD_ASSERT_OK(sdStreamCreate(0, &stream));
  std::atomic<bool> later_ran{false};
  SD_ASSERT_OK(sdLaunchHostFunc(stream, fail_with_7, nullptr));
  SD_ASSERT_OK(sdLaunchHostFunc(
      stream,
      [](void* flag) {
        static_cast<std::atomic<bool>*>(flag)->store(true);
        return 0;
      },
      &later_ran));
  SD_EXPECT_ERROR(sdStreamSynchronize(stream), sdErrorLaunchFailure, "sdStreamSynchronize: host function ");
  EXPECT_NE(std::string(sdGetLastErrorString()).find("returned 7 on stream"), std::string::npos);
  EXPECT_TRUE(later_ran.load());
  SD_ASSERT_OK(sdStreamSynchronize(stream));  // reported, therefore cleared
  SD_ASSERT_OK(sdStreamDestroy(stream));
}

TEST_F(StreamTest, QueryReportsFailure) {
  SD_ASSERT_OK(sdLaunchHostFunc(default_stream(0), fail_with_7, nullptr));
  SD_ASSERT_OK(sdDeviceSynchronize(1));  // another device's sync does not consume it
  sdStream_t stream = default_stream(0);
  // Wait without consuming the failure: a later item signals completion.
  Gate done;
  SD_ASSERT_OK(sdLaunchHostFunc(
      stream,
      [](void* gate) {
        static_cast<Gate*>(gate)->open();
        return 0;
      },
      &done));
  ASSERT_EQ(Gate::wait_fn(&done), 0);
  sdError_t status;
  while ((status = sdStreamQuery(stream)) == sdErrorNotReady) {
  }
  EXPECT_EQ(status, sdErrorLaunchFailure);
  EXPECT_NE(std::string(sdGetLastErrorString()).find("sdStreamQuery: host function"), std::string::npos);
  while ((status = sdStreamQuery(stream)) == sdErrorNotReady) {
  }
  EXPECT_EQ(status, sdSuccess);  // reported, therefore cleared
}

TEST_F(StreamTest, DestroyReportsUnreportedFailure) {
  sdStream_t stream = nullptr;
  SD_ASSERT_OK(sdStreamCreate(1, &stream));
  SD_ASSERT_OK(sdLaunchHostFunc(stream, fail_with_7, nullptr));
  SD_EXPECT_ERROR(sdStreamDestroy(stream), sdErrorLaunchFailure, "the stream was destroyed, but its queued work failed");
  SD_EXPECT_ERROR(sdStreamQuery(stream), sdErrorInvalidStream, "not a live stream");  // destroyed regardless
}

TEST_F(StreamTest, LaunchHostFuncRejectsNullFunction) {
  SD_EXPECT_ERROR(sdLaunchHostFunc(default_stream(), nullptr, nullptr), sdErrorInvalidValue, "fn is NULL");
}

// Results of the blocking calls a host function makes on its own stream.
struct SelfCalls {
  sdStream_t stream = nullptr;
  int device = 0;
  sdError_t sync = sdSuccess, device_sync = sdSuccess, destroy = sdSuccess, blocking_copy = sdSuccess,
            enqueue_more = sdErrorUnknown;
  std::string sync_message;
  std::atomic<bool> follow_up_ran{false};
};

TEST_F(StreamTest, BlockingOnOwnStreamFromItsWorkerIsDeadlockNotHang) {
  SelfCalls calls;
  SD_ASSERT_OK(sdStreamCreate(1, &calls.stream));
  calls.device = 1;
  SD_ASSERT_OK(sdLaunchHostFunc(
      calls.stream,
      [](void* ptr) {
        auto* c = static_cast<SelfCalls*>(ptr);
        c->sync = sdStreamSynchronize(c->stream);
        c->sync_message = sdGetLastErrorString();
        c->device_sync = sdDeviceSynchronize(c->device);
        c->destroy = sdStreamDestroy(c->stream);
        char byte = 0;
        c->blocking_copy = sdMemcpy(&byte, &byte, 1, sdMemcpyHostToHost, c->stream);
        // Queueing more work on its own stream is fine: it runs afterwards.
        c->enqueue_more = sdLaunchHostFunc(
            c->stream,
            [](void* p) {
              static_cast<SelfCalls*>(p)->follow_up_ran = true;
              return 0;
            },
            c);
        return 0;
      },
      &calls));
  SD_ASSERT_OK(sdStreamSynchronize(calls.stream));
  EXPECT_EQ(calls.sync, sdErrorDeadlock);
  EXPECT_NE(calls.sync_message.find("sdStreamSynchronize: called from a host function"), std::string::npos);
  EXPECT_EQ(calls.device_sync, sdErrorDeadlock);
  EXPECT_EQ(calls.destroy, sdErrorDeadlock);
  EXPECT_EQ(calls.blocking_copy, sdErrorDeadlock);
  EXPECT_EQ(calls.enqueue_more, sdSuccess);
  SD_ASSERT_OK(sdStreamSynchronize(calls.stream));
  EXPECT_TRUE(calls.follow_up_ran.load());
  SD_ASSERT_OK(sdStreamDestroy(calls.stream));
}

TEST_F(StreamTest, WorkerMaySynchronizeAnotherStream) {
  struct Pair {
    sdStream_t other;
    sdError_t result = sdErrorUnknown;
    std::atomic<bool> other_done{false};
  } pair;
  SD_ASSERT_OK(sdStreamCreate(0, &pair.other));
  SD_ASSERT_OK(sdSetOpDelay(10000));
  SD_ASSERT_OK(sdLaunchHostFunc(
      pair.other,
      [](void* p) {
        static_cast<Pair*>(p)->other_done = true;
        return 0;
      },
      &pair));
  SD_ASSERT_OK(sdLaunchHostFunc(
      default_stream(0),
      [](void* p) {
        auto* self = static_cast<Pair*>(p);
        self->result = sdStreamSynchronize(self->other);
        return self->other_done.load() ? 0 : 1;
      },
      &pair));
  SD_ASSERT_OK(sdStreamSynchronize(default_stream(0)));
  EXPECT_EQ(pair.result, sdSuccess);
  SD_ASSERT_OK(sdStreamDestroy(pair.other));
}

}  // namespace

namespace {

int print_a(void*) {
  std::fputs("a ran;", stderr);
  return 0;
}
int print_b(void*) {
  std::fputs("b ran;", stderr);
  return 0;
}

// Leaves delayed work queued on two streams, B waiting on A through an event,
// and exits without synchronizing.
void queue_work_then_exit() {
  sdSetOpDelay(20000);
  sdStream_t a = nullptr, b = nullptr;
  sdEvent_t event = nullptr;
  sdStreamCreate(0, &a);
  sdStreamGetDefault(1, &b);
  sdEventCreate(&event, sdEventDefault);
  sdLaunchHostFunc(a, print_a, nullptr);
  sdEventRecord(event, a);
  sdStreamWaitEvent(b, event);
  sdLaunchHostFunc(b, print_b, nullptr);
  std::exit(0);
}

// At exit the runtime lets every worker drain its queue and joins it: the
// process ends cleanly (code 0, sanitizers quiet) with all work run in order.
TEST(StreamExitTest, ExitDrainsQueuedWorkAndJoinsWorkers) {
  EXPECT_EXIT(queue_work_then_exit(), ::testing::ExitedWithCode(0), "a ran;b ran;");
}

}  // namespace
