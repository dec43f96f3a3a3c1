// Devices: count, per-thread current device, device-wide synchronize.
#include <atomic>
#include <thread>

#include "test_util.h"

namespace {

using simdev_test::Gate;
using simdev_test::SimdevTest;
using DeviceTest = SimdevTest;

TEST_F(DeviceTest, CountIsTwoByDefault) {
  int count = 0;
  SD_ASSERT_OK(sdGetDeviceCount(&count));
  EXPECT_EQ(count, 2);
}

TEST_F(DeviceTest, SetDeviceChangesCurrentDevice) {
  int device = -1;
  SD_ASSERT_OK(sdGetDevice(&device));
  EXPECT_EQ(device, 0);
  SD_ASSERT_OK(sdSetDevice(1));
  SD_ASSERT_OK(sdGetDevice(&device));
  EXPECT_EQ(device, 1);
}

TEST_F(DeviceTest, SetDeviceRejectsOutOfRangeAndKeepsCurrent) {
  SD_ASSERT_OK(sdSetDevice(1));
  SD_EXPECT_ERROR(sdSetDevice(2), sdErrorInvalidDevice, "simdev has 2 devices");
  SD_EXPECT_ERROR(sdSetDevice(-1), sdErrorInvalidDevice, "device -1 is out of range");
  int device = -1;
  SD_ASSERT_OK(sdGetDevice(&device));
  EXPECT_EQ(device, 1);
}

TEST_F(DeviceTest, CurrentDeviceIsPerThread) {
  SD_ASSERT_OK(sdSetDevice(1));
  int seen_by_new_thread = -1;
  int after_own_set = -1;
  std::thread other([&] {
    sdGetDevice(&seen_by_new_thread);
    sdSetDevice(1);
    sdSetDevice(0);
    sdGetDevice(&after_own_set);
  });
  other.join();
  EXPECT_EQ(seen_by_new_thread, 0);  // every thread starts on device 0
  EXPECT_EQ(after_own_set, 0);
  int device = -1;
  SD_ASSERT_OK(sdGetDevice(&device));
  EXPECT_EQ(device, 1);  // untouched by the other thread's sdSetDevice(0)
}

TEST_F(DeviceTest, SynchronizeWaitsForEveryStreamOfTheDevice) {
  SD_ASSERT_OK(sdSetOpDelay(20000));
  sdStream_t created = nullptr;
  SD_ASSERT_OK(sdStreamCreate(0, &created));
  std::atomic<int> ran{0};
  auto count = [](void* counter) {
    ++*static_cast<std::atomic<int>*>(counter);
    return 0;
  };
  SD_ASSERT_OK(sdLaunchHostFunc(default_stream(0), count, &ran));
  SD_ASSERT_OK(sdLaunchHostFunc(created, count, &ran));
  SD_ASSERT_OK(sdDeviceSynchronize(0));
  EXPECT_EQ(ran.load(), 2);
  SD_ASSERT_OK(sdStreamDestroy(created));
}

TEST_F(DeviceTest, SynchronizeIgnoresOtherDevices) {
  Gate gate;  // device 1's stream stays blocked while device 0 synchronizes
  SD_ASSERT_OK(sdLaunchHostFunc(default_stream(1), Gate::wait_fn, &gate));
  SD_ASSERT_OK(sdLaunchHostFunc(default_stream(0), [](void*) { return 0; }, nullptr));
  SD_ASSERT_OK(sdDeviceSynchronize(0));
  EXPECT_EQ(sdStreamQuery(default_stream(1)), sdErrorNotReady);
  gate.open();
  SD_ASSERT_OK(sdDeviceSynchronize(1));
}

TEST_F(DeviceTest, SynchronizeRejectsBadDevice) {
  SD_EXPECT_ERROR(sdDeviceSynchronize(2), sdErrorInvalidDevice, "sdDeviceSynchronize: device 2");
}

TEST_F(DeviceTest, SynchronizeReportsStreamFailureOnce) {
  SD_ASSERT_OK(sdLaunchHostFunc(default_stream(1), [](void*) { return 3; }, nullptr));
  SD_EXPECT_ERROR(sdDeviceSynchronize(1), sdErrorLaunchFailure, "returned 3");
  SD_ASSERT_OK(sdDeviceSynchronize(1));
}

TEST_F(DeviceTest, OpDelayRoundTrips) {
  uint32_t delay = 1;
  SD_ASSERT_OK(sdGetOpDelay(&delay));
  EXPECT_EQ(delay, 0u);
  SD_ASSERT_OK(sdSetOpDelay(1500));
  SD_ASSERT_OK(sdGetOpDelay(&delay));
  EXPECT_EQ(delay, 1500u);
}

}  // namespace
