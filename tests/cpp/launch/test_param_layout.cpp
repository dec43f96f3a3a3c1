// The parameter layouts (src/launch/param_layout.h): slots, sizes, the
// Ascend block and its block count.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "devbridge/error.h"
#include "launch/kernel_runtimes.h"
#include "launch/param_layout.h"

namespace devbridge {
namespace launch {
namespace {

TEST(ParamLayout, SlotsOfEachLayout) {
  DevbridgeLaunchMetadata md{};
  EXPECT_EQ(SlotsOf(md).leading, 0u);
  EXPECT_EQ(SlotsOf(md).trailing, 2u);
  md.layout = kDevbridgeLayoutAscend;
  EXPECT_EQ(SlotsOf(md).leading, 2u);  // lock, workspace
  EXPECT_EQ(SlotsOf(md).trailing, 3u); // gridX, gridY, gridZ
  md.flags = DEVBRIDGE_LAUNCH_ASCEND_FFTS;
  EXPECT_EQ(SlotsOf(md).leading, 3u);
  md.flags = DEVBRIDGE_LAUNCH_ASCEND_FFTS | DEVBRIDGE_LAUNCH_ASCEND_SIMT_ONLY;
  EXPECT_EQ(SlotsOf(md).leading, 1u);
}

TEST(ParamLayout, AscendPassesHalfFloatsAsFloatAndBoolsAsInt32) {
  EXPECT_EQ(ParamSize(kDevbridgeLayoutTriton, kDevbridgeArgFP16), 2u);
  EXPECT_EQ(ParamSize(kDevbridgeLayoutAscend, kDevbridgeArgFP16), 4u);
  EXPECT_EQ(ParamSize(kDevbridgeLayoutAscend, kDevbridgeArgBF16), 4u);
  EXPECT_EQ(ParamSize(kDevbridgeLayoutTriton, kDevbridgeArgI1), 1u);
  EXPECT_EQ(ParamSize(kDevbridgeLayoutAscend, kDevbridgeArgI1), 4u);
  EXPECT_EQ(ParamSize(kDevbridgeLayoutAscend, kDevbridgeArgU1), 4u);
  EXPECT_EQ(ParamSize(kDevbridgeLayoutAscend, kDevbridgeArgI8), 1u);
  EXPECT_EQ(ParamSize(kDevbridgeLayoutAscend, kDevbridgeArgFP64), 8u);
}

TEST(ParamLayout, AscendBlockAlignsEightByteSlotsToEightAndOthersToFour) {
  // ptr, i8, i64, i16, i32 grid: 0..8, 8..9, 16..24, 24..26, 28..32 -> 32
  const size_t sizes[] = {8, 1, 8, 2, 4};
  EXPECT_EQ(AscendBlockSize(sizes, 5), 32u);
  uint64_t p = 0x1122334455667788ull, e = 0x0102030405060708ull;
  uint8_t b = 0xab;
  uint16_t c = 0xcdef;
  uint32_t g = 0x99887766u;
  void* params[] = {&p, &b, &e, &c, &g};
  std::vector<unsigned char> block(32, 0x5a);
  PackAscendBlock(params, sizes, 5, block.data());
  uint64_t read64 = 0;
  std::memcpy(&read64, &block[0], 8);
  EXPECT_EQ(read64, p);
  EXPECT_EQ(block[8], 0xab);
  for (int i = 9; i < 16; ++i) EXPECT_EQ(block[i], 0) << "padding " << i << " is zeroed";
  std::memcpy(&read64, &block[16], 8);
  EXPECT_EQ(read64, e);
  uint16_t read16 = 0;
  std::memcpy(&read16, &block[24], 2);
  EXPECT_EQ(read16, c);
  uint32_t read32 = 0;
  std::memcpy(&read32, &block[28], 4);
  EXPECT_EQ(read32, g);
  const size_t odd[] = {4, 4, 4};  // three int32: 12 bytes, rounded up to 16
  EXPECT_EQ(AscendBlockSize(odd, 3), 16u);
}

TEST(ParamLayout, BlockCountIsTheGridProductCappedAtTheCores) {
  const uint32_t grid[3] = {4, 3, 2};
  EXPECT_EQ(AscendBlockCount(grid, 0, 0, "k"), 24u);
  EXPECT_EQ(AscendBlockCount(grid, DEVBRIDGE_LAUNCH_ASCEND_CAP_BLOCKS, 20, "k"), 20u);
  EXPECT_EQ(AscendBlockCount(grid, DEVBRIDGE_LAUNCH_ASCEND_CAP_BLOCKS, 40, "k"), 24u);
  EXPECT_EQ(AscendBlockCount(grid, 0, 20, "k"), 24u);  // no cap asked
  const uint32_t huge[3] = {0x7fffffffu, 0x7fffffffu, 2};
  try {
    AscendBlockCount(huge, 0, 0, "big");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("of kernel 'big' has more programs than the 2**32 - 1 blocks"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(AscendBlockCount(huge, DEVBRIDGE_LAUNCH_ASCEND_CAP_BLOCKS, 48, "big"), 48u);
}

TEST(KernelRuntimeTable, MinorOneFieldsReadOnlyWhenTheTableHasThem) {
  DevbridgeKernelRuntime table = *AscendKernelRuntime();
  EXPECT_EQ(RuntimeLayouts(table), 1u << kDevbridgeLayoutAscend);
  EXPECT_NE(RuntimeFillAsync(table), nullptr);
  table.minor = 0;  // a 1.0 producer: the fields beyond its size are not read
  table.size = offsetof(DevbridgeKernelRuntime, layouts);
  EXPECT_EQ(RuntimeLayouts(table), 1u << kDevbridgeLayoutTriton);
  EXPECT_EQ(RuntimeFillAsync(table), nullptr);
  EXPECT_EQ(RuntimeHardwareSyncAddress(table), nullptr);
  EXPECT_NO_THROW(ValidateKernelRuntime(&table));
  table.minor = 1;  // claims 1.1 with a 1.0 size
  EXPECT_THROW(ValidateKernelRuntime(&table), Error);
}

TEST(AscendKernelRuntime, NamesCannWhenLibascendclIsMissing) {
  const DevbridgeKernelRuntime* runtime = AscendKernelRuntime();
  DevbridgeDeviceProperties properties{};
  ASSERT_EQ(runtime->device_properties(runtime->self, 0, &properties), -1);
  EXPECT_NE(std::string(runtime->get_last_error(runtime->self)).find("CANN"), std::string::npos);
}

}  // namespace
}  // namespace launch
}  // namespace devbridge
