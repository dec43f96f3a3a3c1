// Error reporting: names, per-thread last-error messages, NULL outputs.
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {

using simdev_test::SimdevTest;
using ErrorsTest = SimdevTest;

TEST_F(ErrorsTest, EveryCodeHasItsName) {
  const std::vector<std::pair<sdError_t, std::string>> names = {
      {sdSuccess, "sdSuccess"},
      {sdErrorNotReady, "sdErrorNotReady"},
      {sdErrorInvalidValue, "sdErrorInvalidValue"},
      {sdErrorInvalidDevice, "sdErrorInvalidDevice"},
      {sdErrorInvalidDevicePointer, "sdErrorInvalidDevicePointer"},
      {sdErrorMemoryAllocation, "sdErrorMemoryAllocation"},
      {sdErrorInvalidStream, "sdErrorInvalidStream"},
      {sdErrorInvalidEvent, "sdErrorInvalidEvent"},
      {sdErrorTimingDisabled, "sdErrorTimingDisabled"},
      {sdErrorInvalidModule, "sdErrorInvalidModule"},
      {sdErrorNotFound, "sdErrorNotFound"},
      {sdErrorLaunchFailure, "sdErrorLaunchFailure"},
      {sdErrorDeadlock, "sdErrorDeadlock"},
      {sdErrorUnknown, "sdErrorUnknown"},
  };
  for (const auto& [code, name] : names) EXPECT_EQ(sdGetErrorName(code), name);
  EXPECT_STREQ(sdGetErrorName(static_cast<sdError_t>(12345)), "sdErrorUnrecognized");
}

TEST_F(ErrorsTest, MessageNamesFunctionProblemAndFix) {
  SD_EXPECT_ERROR(sdSetDevice(5), sdErrorInvalidDevice, "sdSetDevice: device 5 is out of range");
  EXPECT_NE(std::string(sdGetLastErrorString()).find("set SIMDEV_DEVICE_COUNT"), std::string::npos);
}

TEST_F(ErrorsTest, LastErrorIsPerThreadAndStartsEmpty) {
  SD_EXPECT_ERROR(sdSetDevice(-1), sdErrorInvalidDevice, "device -1");
  std::string other_thread_before, other_thread_after;
  std::thread other([&] {
    other_thread_before = sdGetLastErrorString();
    sdFree(reinterpret_cast<void*>(0x1234));
    other_thread_after = sdGetLastErrorString();
  });
  other.join();
  EXPECT_EQ(other_thread_before, "");
  EXPECT_NE(other_thread_after.find("sdFree"), std::string::npos);
  // The other thread's failure did not touch this thread's message.
  EXPECT_NE(std::string(sdGetLastErrorString()).find("device -1"), std::string::npos);
}

TEST_F(ErrorsTest, SuccessAndNotReadyKeepTheLastMessage) {
  SD_EXPECT_ERROR(sdSetDevice(7), sdErrorInvalidDevice, "device 7");
  const std::string failure = sdGetLastErrorString();
  int device = -1;
  SD_ASSERT_OK(sdGetDevice(&device));
  EXPECT_EQ(sdGetLastErrorString(), failure);

  simdev_test::Gate gate;
  sdStream_t stream = default_stream();
  SD_ASSERT_OK(sdLaunchHostFunc(stream, simdev_test::Gate::wait_fn, &gate));
  EXPECT_EQ(sdStreamQuery(stream), sdErrorNotReady);  // a status, not a failure
  EXPECT_EQ(sdGetLastErrorString(), failure);
  gate.open();
  SD_ASSERT_OK(sdStreamSynchronize(stream));
}

TEST_F(ErrorsTest, EveryNullOutputIsRejectedByName) {
  sdStream_t stream = default_stream();
  sdEvent_t event = nullptr;
  SD_ASSERT_OK(sdEventCreate(&event, sdEventDefault));
  sdModule_t module = nullptr;
  SD_ASSERT_OK(sdModuleLoad(&module, SIMDEV_TEST_KERNELS_PATH));
  void* ptr = nullptr;
  SD_ASSERT_OK(sdMalloc(&ptr, 16, 0));
  size_t bytes = 0;

  const std::vector<std::pair<std::function<sdError_t()>, const char*>> calls = {
      {[] { return sdGetDeviceCount(nullptr); }, "out_count"},
      {[] { return sdGetDevice(nullptr); }, "out_device"},
      {[] { return sdGetOpDelay(nullptr); }, "out_microseconds"},
      {[] { return sdMalloc(nullptr, 16, 0); }, "out_ptr"},
      {[&] { return sdPointerGetDevice(ptr, nullptr); }, "out_device"},
      {[&] { return sdMemGetInfo(0, nullptr, &bytes); }, "out_used"},
      {[&] { return sdMemGetInfo(0, &bytes, nullptr); }, "out_capacity"},
      {[] { return sdStreamGetDefault(0, nullptr); }, "out_stream"},
      {[] { return sdStreamCreate(0, nullptr); }, "out_stream"},
      {[&] { return sdStreamGetDevice(stream, nullptr); }, "out_device"},
      {[] { return sdEventCreate(nullptr, sdEventDefault); }, "out_event"},
      {[&] { return sdEventElapsedTime(nullptr, event, event); }, "out_ms"},
      {[] { return sdModuleLoad(nullptr, SIMDEV_TEST_KERNELS_PATH); }, "out_module"},
      {[&] { return sdModuleGetFunction(nullptr, module, "vector_add"); }, "out_function"},
  };
  for (const auto& [call, parameter] : calls) {
    SD_EXPECT_ERROR(call(), sdErrorInvalidValue, std::string(parameter) + " is NULL");
  }
  SD_ASSERT_OK(sdFree(ptr));
  SD_ASSERT_OK(sdModuleUnload(module));
  SD_ASSERT_OK(sdEventDestroy(event));
}

}  // namespace
