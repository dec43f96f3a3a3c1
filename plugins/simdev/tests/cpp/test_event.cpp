// Events: capture points, cross-stream waits, timing, error paths.
#include <atomic>
#include <cstdint>
#include <vector>

#include "test_util.h"

namespace {

using simdev_test::Gate;
using simdev_test::SimdevTest;

class EventTest : public SimdevTest {
 protected:
  static sdEvent_t make_event(unsigned flags = sdEventDefault) {
    sdEvent_t event = nullptr;
    EXPECT_EQ(sdEventCreate(&event, flags), sdSuccess) << sdGetLastErrorString();
    return event;
  }
  static sdStream_t make_stream(int device) {
    sdStream_t stream = nullptr;
    EXPECT_EQ(sdStreamCreate(device, &stream), sdSuccess) << sdGetLastErrorString();
    return stream;
  }
};

TEST_F(EventTest, CreateRejectsUnknownFlags) {
  sdEvent_t event = nullptr;
  SD_EXPECT_ERROR(sdEventCreate(&event, 0x4), sdErrorInvalidValue, "flags 0x4 has unknown bits");
}

TEST_F(EventTest, DestroyedNullAndForeignEventsAreRejected) {
  sdEvent_t event = make_event();
  SD_ASSERT_OK(sdEventDestroy(event));
  SD_EXPECT_ERROR(sdEventDestroy(event), sdErrorInvalidEvent, "is not a live event");
  SD_EXPECT_ERROR(sdEventQuery(event), sdErrorInvalidEvent, "sdEventQuery: event");
  SD_EXPECT_ERROR(sdEventSynchronize(event), sdErrorInvalidEvent, "is not a live event");
  SD_EXPECT_ERROR(sdEventRecord(event, default_stream()), sdErrorInvalidEvent, "is not a live event");
  SD_EXPECT_ERROR(sdStreamWaitEvent(default_stream(), event), sdErrorInvalidEvent, "is not a live event");
  SD_EXPECT_ERROR(sdEventQuery(nullptr), sdErrorInvalidEvent, "event is NULL");
  SD_EXPECT_ERROR(sdEventQuery(reinterpret_cast<sdEvent_t>(default_stream())), sdErrorInvalidEvent,
                  "is not a live event");
}

TEST_F(EventTest, NeverRecordedEventIsComplete) {
  sdEvent_t event = make_event();
  SD_ASSERT_OK(sdEventQuery(event));
  SD_ASSERT_OK(sdEventSynchronize(event));
  SD_ASSERT_OK(sdStreamWaitEvent(default_stream(), event));  // nothing to wait for
  SD_ASSERT_OK(sdStreamSynchronize(default_stream()));
  SD_ASSERT_OK(sdEventDestroy(event));
}

TEST_F(EventTest, CompletesWhenTheStreamPassesTheCapture) {
  Gate before, after;
  sdStream_t stream = make_stream(0);
  sdEvent_t event = make_event();
  SD_ASSERT_OK(sdLaunchHostFunc(stream, Gate::wait_fn, &before));
  SD_ASSERT_OK(sdEventRecord(event, stream));
  SD_ASSERT_OK(sdLaunchHostFunc(stream, Gate::wait_fn, &after));
  EXPECT_EQ(sdEventQuery(event), sdErrorNotReady);
  before.open();
  // The capture completes although work queued after it is still blocked.
  SD_ASSERT_OK(sdEventSynchronize(event));
  SD_ASSERT_OK(sdEventQuery(event));
  EXPECT_EQ(sdStreamQuery(stream), sdErrorNotReady);
  after.open();
  SD_ASSERT_OK(sdStreamDestroy(stream));
  SD_ASSERT_OK(sdEventDestroy(event));
}

TEST_F(EventTest, ReRecordingReplacesTheCapture) {
  Gate gate;
  sdStream_t blocked = make_stream(0), idle = make_stream(1);
  sdEvent_t event = make_event();
  SD_ASSERT_OK(sdLaunchHostFunc(blocked, Gate::wait_fn, &gate));
  SD_ASSERT_OK(sdEventRecord(event, blocked));
  EXPECT_EQ(sdEventQuery(event), sdErrorNotReady);
  SD_ASSERT_OK(sdEventRecord(event, idle));
  SD_ASSERT_OK(sdEventSynchronize(event));  // would block forever on the old capture
  SD_ASSERT_OK(sdEventQuery(event));
  gate.open();
  SD_ASSERT_OK(sdStreamDestroy(blocked));
  SD_ASSERT_OK(sdStreamDestroy(idle));
  SD_ASSERT_OK(sdEventDestroy(event));
}

TEST_F(EventTest, ElapsedTimeMeasuresDelayedWork) {
  SD_ASSERT_OK(sdSetOpDelay(10000));  // 10 ms before the host function
  sdEvent_t start = make_event(), end = make_event();
  sdStream_t stream = default_stream(1);
  SD_ASSERT_OK(sdEventRecord(start, stream));
  SD_ASSERT_OK(sdLaunchHostFunc(stream, [](void*) { return 0; }, nullptr));
  SD_ASSERT_OK(sdEventRecord(end, stream));
  SD_ASSERT_OK(sdEventSynchronize(end));
  float ms = -1;
  SD_ASSERT_OK(sdEventElapsedTime(&ms, start, end));
  EXPECT_GE(ms, 9.99f);  // markers are not delayed; the host function's sleep is between them
  EXPECT_LT(ms, 10000.0f);
  SD_ASSERT_OK(sdEventElapsedTime(&ms, end, start));
  EXPECT_LT(ms, 0.0f);  // reversed order gives a negative time, as on CUDA
  SD_ASSERT_OK(sdEventDestroy(start));
  SD_ASSERT_OK(sdEventDestroy(end));
}

TEST_F(EventTest, ElapsedTimeErrors) {
  sdEvent_t recorded = make_event(), never = make_event(), untimed = make_event(sdEventDisableTiming);
  SD_ASSERT_OK(sdEventRecord(recorded, default_stream()));
  SD_ASSERT_OK(sdEventRecord(untimed, default_stream()));
  SD_ASSERT_OK(sdEventSynchronize(untimed));
  float ms = 0;
  SD_EXPECT_ERROR(sdEventElapsedTime(&ms, recorded, never), sdErrorInvalidEvent, "end was never recorded");
  SD_EXPECT_ERROR(sdEventElapsedTime(&ms, never, recorded), sdErrorInvalidEvent, "start was never recorded");
  SD_EXPECT_ERROR(sdEventElapsedTime(&ms, recorded, untimed), sdErrorTimingDisabled, "sdEventDisableTiming");
  SD_EXPECT_ERROR(sdEventElapsedTime(&ms, recorded, nullptr), sdErrorInvalidEvent, "end is NULL");
  // An untimed event still orders work and completes.
  SD_ASSERT_OK(sdEventQuery(untimed));

  Gate gate;
  sdEvent_t pending = make_event();
  SD_ASSERT_OK(sdLaunchHostFunc(default_stream(), Gate::wait_fn, &gate));
  SD_ASSERT_OK(sdEventRecord(pending, default_stream()));
  EXPECT_EQ(sdEventElapsedTime(&ms, recorded, pending), sdErrorNotReady);
  gate.open();
  SD_ASSERT_OK(sdEventSynchronize(pending));
  SD_ASSERT_OK(sdEventElapsedTime(&ms, recorded, pending));
  for (sdEvent_t event : {recorded, never, untimed, pending}) SD_ASSERT_OK(sdEventDestroy(event));
}

// Producer/consumer through device memory. The producer stream has three
// delayed items before its write, so with a delay D it writes at about 4D,
// while an unsynchronized consumer reads at about D.
class CrossStreamTest : public EventTest {
 protected:
  static constexpr uint32_t kDelayUs = 30000;
  static constexpr int32_t kOld = 111, kNew = 222;

  void SetUp() override {
    EventTest::SetUp();
    SD_ASSERT_OK(sdMalloc(reinterpret_cast<void**>(&data_), sizeof(int32_t), 0));
    SD_ASSERT_OK(sdMemcpy(data_, &kOld, sizeof(int32_t), sdMemcpyHostToDevice, default_stream(0)));
    SD_ASSERT_OK(sdSetOpDelay(kDelayUs));
  }
  void TearDown() override {
    sdSetOpDelay(0);
    sdDeviceSynchronize(0);
    sdDeviceSynchronize(1);
    sdFree(data_);
    EventTest::TearDown();
  }

  // Queues the slow write of kNew on `producer`, then records `written`.
  void produce(sdStream_t producer, sdEvent_t written) {
    for (int i = 0; i < 3; ++i) SD_ASSERT_OK(sdLaunchHostFunc(producer, [](void*) { return 0; }, nullptr));
    SD_ASSERT_OK(sdMemcpyAsync(data_, &kNew, sizeof(int32_t), sdMemcpyHostToDevice, producer));
    SD_ASSERT_OK(sdEventRecord(written, producer));
  }

  int32_t* data_ = nullptr;
};

TEST_F(CrossStreamTest, ConsumerThatWaitsSeesProducersData) {
  sdStream_t producer = make_stream(0), consumer = make_stream(0);
  sdEvent_t written = make_event();
  produce(producer, written);
  int32_t seen = 0;
  SD_ASSERT_OK(sdStreamWaitEvent(consumer, written));
  SD_ASSERT_OK(sdMemcpyAsync(&seen, data_, sizeof(int32_t), sdMemcpyDeviceToHost, consumer));
  SD_ASSERT_OK(sdStreamSynchronize(consumer));
  EXPECT_EQ(seen, kNew);
  SD_ASSERT_OK(sdStreamDestroy(producer));
  SD_ASSERT_OK(sdStreamDestroy(consumer));
  SD_ASSERT_OK(sdEventDestroy(written));
}

TEST_F(CrossStreamTest, ConsumerWithoutWaitSeesStaleData) {
  sdStream_t producer = make_stream(0), consumer = make_stream(0);
  sdEvent_t written = make_event();
  produce(producer, written);
  int32_t seen = 0;
  SD_ASSERT_OK(sdMemcpyAsync(&seen, data_, sizeof(int32_t), sdMemcpyDeviceToHost, consumer));
  SD_ASSERT_OK(sdStreamSynchronize(consumer));
  EXPECT_EQ(seen, kOld);  // the ordering bug is visible, as the delay intends
  SD_ASSERT_OK(sdStreamDestroy(producer));
  SD_ASSERT_OK(sdStreamDestroy(consumer));
  SD_ASSERT_OK(sdEventDestroy(written));
}

TEST_F(CrossStreamTest, WaitWorksAcrossDevices) {
  sdStream_t producer = make_stream(0), consumer = make_stream(1);
  sdEvent_t written = make_event();
  int32_t* on1 = nullptr;
  SD_ASSERT_OK(sdMalloc(reinterpret_cast<void**>(&on1), sizeof(int32_t), 1));
  produce(producer, written);
  SD_ASSERT_OK(sdStreamWaitEvent(consumer, written));
  SD_ASSERT_OK(sdMemcpyAsync(on1, data_, sizeof(int32_t), sdMemcpyDeviceToDevice, consumer));
  int32_t seen = 0;
  SD_ASSERT_OK(sdMemcpy(&seen, on1, sizeof(int32_t), sdMemcpyDeviceToHost, consumer));
  EXPECT_EQ(seen, kNew);
  SD_ASSERT_OK(sdFree(on1));
  SD_ASSERT_OK(sdStreamDestroy(producer));
  SD_ASSERT_OK(sdStreamDestroy(consumer));
  SD_ASSERT_OK(sdEventDestroy(written));
}

TEST_F(EventTest, WaitBlocksTheStreamNotTheHost) {
  Gate gate;
  sdStream_t producer = make_stream(0), consumer = make_stream(1);
  sdEvent_t event = make_event();
  SD_ASSERT_OK(sdLaunchHostFunc(producer, Gate::wait_fn, &gate));
  SD_ASSERT_OK(sdEventRecord(event, producer));
  SD_ASSERT_OK(sdStreamWaitEvent(consumer, event));  // returns at once
  std::atomic<bool> consumer_ran{false};
  SD_ASSERT_OK(sdLaunchHostFunc(
      consumer,
      [](void* flag) {
        static_cast<std::atomic<bool>*>(flag)->store(true);
        return 0;
      },
      &consumer_ran));
  SD_ASSERT_OK(sdEventDestroy(event));  // the queued wait keeps its capture
  EXPECT_EQ(sdStreamQuery(consumer), sdErrorNotReady);
  EXPECT_FALSE(consumer_ran.load());
  gate.open();
  SD_ASSERT_OK(sdStreamSynchronize(consumer));
  EXPECT_TRUE(consumer_ran.load());
  SD_ASSERT_OK(sdStreamDestroy(producer));
  SD_ASSERT_OK(sdStreamDestroy(consumer));
}

TEST_F(EventTest, SynchronizeReportsTheStreamsFailure) {
  sdStream_t stream = make_stream(0);
  sdEvent_t event = make_event();
  SD_ASSERT_OK(sdLaunchHostFunc(stream, [](void*) { return 5; }, nullptr));
  SD_ASSERT_OK(sdEventRecord(event, stream));
  SD_EXPECT_ERROR(sdEventSynchronize(event), sdErrorLaunchFailure, "sdEventSynchronize: host function");
  SD_ASSERT_OK(sdStreamSynchronize(stream));  // already reported
  SD_ASSERT_OK(sdStreamDestroy(stream));
  SD_ASSERT_OK(sdEventDestroy(event));
}

TEST_F(EventTest, AStreamWaitingForFailedWorkFailsToo) {
  // Since 1.4: the failure travels with the event to the stream that waits.
  sdStream_t producer = make_stream(0);
  sdStream_t consumer = make_stream(0);
  sdEvent_t event = make_event();
  SD_ASSERT_OK(sdLaunchHostFunc(producer, [](void*) { return 5; }, nullptr));
  SD_ASSERT_OK(sdEventRecord(event, producer));
  SD_ASSERT_OK(sdStreamWaitEvent(consumer, event));
  SD_EXPECT_ERROR(sdStreamSynchronize(consumer), sdErrorLaunchFailure,
                  "waited for an event recorded on stream 0x");
  SD_EXPECT_ERROR(sdStreamSynchronize(producer), sdErrorLaunchFailure, "host function");  // its own, still
  // A failure reported before the event was recorded is not passed on.
  SD_ASSERT_OK(sdLaunchHostFunc(producer, [](void*) { return 6; }, nullptr));
  EXPECT_EQ(sdStreamSynchronize(producer), sdErrorLaunchFailure);
  SD_ASSERT_OK(sdEventRecord(event, producer));
  SD_ASSERT_OK(sdStreamWaitEvent(consumer, event));
  SD_ASSERT_OK(sdStreamSynchronize(consumer));
  SD_ASSERT_OK(sdStreamDestroy(producer));
  SD_ASSERT_OK(sdStreamDestroy(consumer));
  SD_ASSERT_OK(sdEventDestroy(event));
}

struct EventFromWorker {
  sdEvent_t before = nullptr, after = nullptr;
  sdError_t sync_before = sdErrorUnknown, sync_after = sdErrorUnknown;
};

TEST_F(EventTest, WorkerWaitingForALaterCaptureOnItsStreamIsDeadlock) {
  EventFromWorker state;
  state.before = make_event();
  state.after = make_event();
  sdStream_t stream = make_stream(1);
  Gate gate;  // holds the worker until both events are recorded
  SD_ASSERT_OK(sdLaunchHostFunc(stream, Gate::wait_fn, &gate));
  SD_ASSERT_OK(sdEventRecord(state.before, stream));
  SD_ASSERT_OK(sdLaunchHostFunc(
      stream,
      [](void* p) {
        auto* s = static_cast<EventFromWorker*>(p);
        s->sync_before = sdEventSynchronize(s->before);  // already passed: fine
        s->sync_after = sdEventSynchronize(s->after);    // queued behind this function
        return 0;
      },
      &state));
  SD_ASSERT_OK(sdEventRecord(state.after, stream));
  gate.open();
  SD_ASSERT_OK(sdStreamSynchronize(stream));
  EXPECT_EQ(state.sync_before, sdSuccess);
  EXPECT_EQ(state.sync_after, sdErrorDeadlock);
  SD_ASSERT_OK(sdStreamDestroy(stream));
  SD_ASSERT_OK(sdEventDestroy(state.before));
  SD_ASSERT_OK(sdEventDestroy(state.after));
}

}  // namespace
