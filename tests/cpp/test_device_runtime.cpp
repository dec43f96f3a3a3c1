// DeviceRuntime on the devices a CPU-only libtorch has: CPU, and a
// PrivateUse1 type with no backend loaded.
#include <gtest/gtest.h>

#include "devbridge/runtime.h"

namespace devbridge {
namespace {

TEST(DeviceRuntime, CpuHasOneDeviceAndNoStreams) {
  const DeviceRuntime& cpu = DeviceRuntime::For(c10::DeviceType::CPU);
  EXPECT_EQ(cpu.type(), c10::DeviceType::CPU);
  EXPECT_TRUE(cpu.available());
  EXPECT_EQ(cpu.device_count(), 1);
  EXPECT_EQ(cpu.current_native_stream(0), nullptr);
  EXPECT_EQ(cpu.native_stream_source(0), NativeStreamSource::kNoStreams);
  EXPECT_EQ(cpu.name(), "cpu");
}

TEST(DeviceRuntime, OneViewPerType) {
  EXPECT_EQ(&DeviceRuntime::For(c10::DeviceType::CPU), &DeviceRuntime::For(c10::DeviceType::CPU));
  EXPECT_NE(&DeviceRuntime::For(c10::DeviceType::CPU),
            &DeviceRuntime::For(c10::DeviceType::PrivateUse1));
}

TEST(DeviceRuntime, PluginNotLoadedIsReportedWithTheFix) {
  const DeviceRuntime& plugin = DeviceRuntime::For(c10::DeviceType::PrivateUse1);
  EXPECT_FALSE(plugin.available());
  EXPECT_EQ(plugin.device_count(), 0);
  EXPECT_EQ(plugin.native_stream_source(0), NativeStreamSource::kNoBackend);
  try {
    plugin.current_native_stream(0);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kRuntime);
    EXPECT_NE(std::string(error.what()).find("no PrivateUse1 backend is loaded"),
              std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("Import the device plugin"), std::string::npos);
  }
}

TEST(DeviceRuntime, CudaAbsentFromCpuBuildNamesTheDevice) {
  const DeviceRuntime& cuda = DeviceRuntime::For(c10::DeviceType::CUDA);
  if (cuda.available()) GTEST_SKIP() << "this libtorch has CUDA";
  try {
    cuda.current_stream(0);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("no support for cuda devices"), std::string::npos)
        << error.what();
  }
}

TEST(DeviceRuntime, DeviceIndexIsBoundsChecked) {
  const DeviceRuntime& cpu = DeviceRuntime::For(c10::DeviceType::CPU);
  try {
    cpu.set_current_device(3);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kValue);
    EXPECT_NE(std::string(error.what()).find("device index 3 is out of range for cpu, which has 1"),
              std::string::npos)
        << error.what();
  }
}

TEST(DeviceRuntime, ScratchComesFromTheDeviceAllocatorAndIsUsable) {
  const DeviceRuntime& cpu = DeviceRuntime::For(c10::DeviceType::CPU);
  const c10::Stream stream = cpu.current_stream(0);
  c10::DataPtr scratch = cpu.allocate_scratch(4096, stream);
  ASSERT_NE(scratch.get(), nullptr);
  EXPECT_EQ(scratch.device().type(), c10::DeviceType::CPU);
  std::memset(scratch.get(), 0x5a, 4096);
  EXPECT_EQ(static_cast<unsigned char*>(scratch.get())[4095], 0x5a);
  cpu.record_use(scratch, stream);  // CPU: a no-op that must be accepted
}

TEST(DeviceRuntime, ScratchOnAStreamOfAnotherTypeIsRejected) {
  const DeviceRuntime& plugin = DeviceRuntime::For(c10::DeviceType::PrivateUse1);
  const c10::Stream cpu_stream = DeviceRuntime::For(c10::DeviceType::CPU).current_stream(0);
  EXPECT_THROW(plugin.allocate_scratch(16, cpu_stream), Error);
  EXPECT_THROW(plugin.native_handle(cpu_stream), Error);
}

TEST(DeviceRuntime, NativeStreamSourceNames) {
  EXPECT_STREQ(ToString(NativeStreamSource::kGuard), "guard");
  EXPECT_STREQ(ToString(NativeStreamSource::kResolver), "resolver");
  EXPECT_STREQ(ToString(NativeStreamSource::kMissing), "missing");
}

}  // namespace
}  // namespace devbridge
