// The DevbridgeRuntimeAPI table as C code sees it: return codes and
// get_last_error, never an exception.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>

#include "devbridge/c_runtime_api.h"
#include "devbridge/runtime.h"

namespace devbridge {
namespace {

constexpr int32_t kCPU = 1, kCUDA = 2, kExtDev = 12, kAscend = 21, kUnknown = 99;

class RuntimeCApi : public ::testing::Test {
 protected:
  void TearDown() override { SetOptions(Options{}); }
  std::string last_error() const { return api->get_last_error(); }
  const DevbridgeRuntimeAPI* api = RuntimeAPI();
};

TEST_F(RuntimeCApi, HeaderAndFunctions) {
  ASSERT_EQ(api, RuntimeAPI()) << "the table is a process-lifetime static";
  EXPECT_EQ(api->header.major, DEVBRIDGE_RUNTIME_API_MAJOR);
  EXPECT_EQ(api->header.minor, DEVBRIDGE_RUNTIME_API_MINOR);
  EXPECT_EQ(api->header.size, sizeof(DevbridgeRuntimeAPI));
  EXPECT_NE(api->device_count, nullptr);
  EXPECT_NE(api->get_current_device, nullptr);
  EXPECT_NE(api->set_current_device, nullptr);
  EXPECT_NE(api->current_stream, nullptr);
  EXPECT_NE(api->get_submit_hook, nullptr);
  EXPECT_NE(api->get_last_error, nullptr);
  EXPECT_NE(api->synchronize_current_stream, nullptr);
  EXPECT_NE(api->scratch_alloc, nullptr);
  EXPECT_NE(api->scratch_free, nullptr);
  EXPECT_NE(api->wait_current_stream, nullptr);  // minor 1
  EXPECT_NE(api->stream_capture_status, nullptr);  // minor 2
  EXPECT_NE(api->check_submit_hook, nullptr);
}

TEST_F(RuntimeCApi, CpuQueries) {
  int32_t count = -1, device = -1;
  ASSERT_EQ(api->device_count(kCPU, &count), 0) << last_error();
  EXPECT_EQ(count, 1);
  ASSERT_EQ(api->get_current_device(kCPU, &device), 0) << last_error();
  EXPECT_EQ(device, 0);
  EXPECT_EQ(api->set_current_device(kCPU, 0), 0) << last_error();
  void* stream = reinterpret_cast<void*>(1);
  ASSERT_EQ(api->current_stream(kCPU, 0, &stream), 0) << last_error();
  EXPECT_EQ(stream, nullptr);
  EXPECT_EQ(api->synchronize_current_stream(kCPU, 0), 0) << last_error();
}

TEST_F(RuntimeCApi, UnknownDeviceTypeFailsWithItsValue) {
  int32_t count = 0;
  EXPECT_EQ(api->device_count(kUnknown, &count), -1);
  EXPECT_NE(last_error().find("unknown (99)"), std::string::npos) << last_error();
  void* stream = nullptr;
  EXPECT_EQ(api->current_stream(kUnknown, 0, &stream), -1);
  EXPECT_EQ(api->set_current_device(kUnknown, 0), -1);
}

TEST_F(RuntimeCApi, NullOutputPointersFail) {
  EXPECT_EQ(api->device_count(kCPU, nullptr), -1);
  EXPECT_NE(last_error().find("out_count is NULL"), std::string::npos) << last_error();
  EXPECT_EQ(api->get_current_device(kCPU, nullptr), -1);
  EXPECT_EQ(api->current_stream(kCPU, 0, nullptr), -1);
  EXPECT_NE(last_error().find("out_stream is NULL"), std::string::npos) << last_error();
  EXPECT_EQ(api->get_submit_hook(kCPU, nullptr), -1);
  void* token = nullptr;
  EXPECT_EQ(api->scratch_alloc(kCPU, 0, 16, nullptr, &token), -1);
  void* ptr = nullptr;
  EXPECT_EQ(api->scratch_alloc(kCPU, 0, 16, &ptr, nullptr), -1);
}

TEST_F(RuntimeCApi, DeviceIdOutOfRangeFails) {
  void* stream = nullptr;
  EXPECT_EQ(api->current_stream(kCPU, -1, &stream), -1);
  EXPECT_NE(last_error().find("device_id -1 is out of range"), std::string::npos) << last_error();
  EXPECT_EQ(api->current_stream(kCPU, 500, &stream), -1);
  EXPECT_EQ(api->set_current_device(kCPU, 1), -1);
  EXPECT_NE(last_error().find("out of range for cpu"), std::string::npos) << last_error();
}

TEST_F(RuntimeCApi, PluginNotLoaded) {
  int32_t count = 0;
  EXPECT_EQ(api->device_count(kExtDev, &count), -1);
  EXPECT_NE(last_error().find("no PrivateUse1 backend is loaded"), std::string::npos)
      << last_error();
  void* stream = nullptr;
  EXPECT_EQ(api->current_stream(kExtDev, 0, &stream), -1);
  EXPECT_NE(last_error().find("no PrivateUse1 backend is loaded"), std::string::npos);
}

TEST_F(RuntimeCApi, AbsentBuiltInBackendFails) {
  if (DeviceRuntime::For(c10::DeviceType::CUDA).Available()) GTEST_SKIP() << "CUDA present";
  int32_t count = 0;
  EXPECT_EQ(api->device_count(kCUDA, &count), -1);
  EXPECT_NE(last_error().find("cuda"), std::string::npos) << last_error();
}

TEST_F(RuntimeCApi, AscendTypeOnlyInTransitionMode) {
  int32_t count = 0;
  EXPECT_EQ(api->device_count(kAscend, &count), -1);
  EXPECT_NE(last_error().find("accept_ascend_device_type=True"), std::string::npos)
      << last_error();
  Options options;
  options.accept_ascend_device_type = true;
  SetOptions(options);
  // Now 21 means PrivateUse1, which is not loaded in this process.
  EXPECT_EQ(api->device_count(kAscend, &count), -1);
  EXPECT_NE(last_error().find("no PrivateUse1 backend is loaded"), std::string::npos)
      << last_error();
}

TEST_F(RuntimeCApi, ScratchRoundTrip) {
  void* ptr = nullptr;
  void* token = nullptr;
  ASSERT_EQ(api->scratch_alloc(kCPU, 0, 1 << 16, &ptr, &token), 0) << last_error();
  ASSERT_NE(ptr, nullptr);
  ASSERT_NE(token, nullptr);
  std::memset(ptr, 0xab, 1 << 16);
  EXPECT_EQ(api->scratch_free(token), 0);
  EXPECT_EQ(api->scratch_free(nullptr), 0);
}

TEST_F(RuntimeCApi, SubmitHookLookup) {
  DevbridgeSubmitFn hook = reinterpret_cast<DevbridgeSubmitFn>(1);
  ASSERT_EQ(api->get_submit_hook(kCPU, &hook), 0);
  EXPECT_EQ(hook, nullptr);
  EXPECT_EQ(api->get_submit_hook(kUnknown, &hook), -1);
}

TEST_F(RuntimeCApi, LastErrorIsPerThread) {
  int32_t count = 0;
  ASSERT_EQ(api->device_count(kUnknown, &count), -1);
  std::string seen_on_other_thread = "unset";
  std::thread([&] { seen_on_other_thread = api->get_last_error(); }).join();
  EXPECT_EQ(seen_on_other_thread, "");
  EXPECT_NE(last_error(), "");
}

}  // namespace
}  // namespace devbridge
