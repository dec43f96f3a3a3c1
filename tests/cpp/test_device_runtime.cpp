// DeviceRuntime on the devices a CPU-only libtorch has: CPU, and a
// PrivateUse1 type with no backend loaded.
#include <gtest/gtest.h>

#include "devbridge/runtime.h"

namespace devbridge {
namespace {

TEST(DeviceRuntime, CpuHasOneDeviceAndNoStreams) {
  const DeviceRuntime& cpu = DeviceRuntime::For(c10::DeviceType::CPU);
  EXPECT_EQ(cpu.type(), c10::DeviceType::CPU);
  EXPECT_TRUE(cpu.Available());
  EXPECT_EQ(cpu.DeviceCount(), 1);
  EXPECT_EQ(cpu.CurrentNativeStream(0), nullptr);
  EXPECT_EQ(cpu.NativeStreamSourceOf(0), NativeStreamSource::kNoStreams);
  EXPECT_EQ(cpu.Name(), "cpu");
}

TEST(DeviceRuntime, OneViewPerType) {
  EXPECT_EQ(&DeviceRuntime::For(c10::DeviceType::CPU), &DeviceRuntime::For(c10::DeviceType::CPU));
  EXPECT_NE(&DeviceRuntime::For(c10::DeviceType::CPU),
            &DeviceRuntime::For(c10::DeviceType::PrivateUse1));
}

TEST(DeviceRuntime, PluginNotLoadedIsReportedWithTheFix) {
  const DeviceRuntime& plugin = DeviceRuntime::For(c10::DeviceType::PrivateUse1);
  EXPECT_FALSE(plugin.Available());
  EXPECT_EQ(plugin.DeviceCount(), 0);
  EXPECT_EQ(plugin.NativeStreamSourceOf(0), NativeStreamSource::kNoBackend);
  try {
    plugin.CurrentNativeStream(0);
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
  if (cuda.Available()) GTEST_SKIP() << "this libtorch has CUDA";
  try {
    cuda.CurrentStream(0);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("no support for cuda devices"), std::string::npos)
        << error.what();
  }
}

TEST(DeviceRuntime, DeviceIndexIsBoundsChecked) {
  const DeviceRuntime& cpu = DeviceRuntime::For(c10::DeviceType::CPU);
  try {
    cpu.SetCurrentDevice(3);
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
  const c10::Stream stream = cpu.CurrentStream(0);
  c10::DataPtr scratch = cpu.AllocateScratch(4096, stream);
  ASSERT_NE(scratch.get(), nullptr);
  EXPECT_EQ(scratch.device().type(), c10::DeviceType::CPU);
  std::memset(scratch.get(), 0x5a, 4096);
  EXPECT_EQ(static_cast<unsigned char*>(scratch.get())[4095], 0x5a);
  cpu.RecordUse(scratch, stream);  // CPU: a no-op that must be accepted
}

TEST(DeviceRuntime, ScratchOnAStreamOfAnotherTypeIsRejected) {
  const DeviceRuntime& plugin = DeviceRuntime::For(c10::DeviceType::PrivateUse1);
  const c10::Stream cpu_stream = DeviceRuntime::For(c10::DeviceType::CPU).CurrentStream(0);
  EXPECT_THROW(plugin.AllocateScratch(16, cpu_stream), Error);
  EXPECT_THROW(plugin.NativeHandle(cpu_stream), Error);
}

TEST(DeviceRuntime, NativeStreamSourceNames) {
  EXPECT_STREQ(ToString(NativeStreamSource::kGuard), "guard");
  EXPECT_STREQ(ToString(NativeStreamSource::kResolver), "resolver");
  EXPECT_STREQ(ToString(NativeStreamSource::kMissing), "missing");
}

}  // namespace
}  // namespace devbridge
