// Device memory: allocation, capacity, pointer validation, copies, memset.
#include <cstdint>
#include <cstring>
#include <set>
#include <sstream>
#include <vector>

#include "test_util.h"

namespace {

using simdev_test::SimdevTest;

class MemoryTest : public SimdevTest {
 protected:
  static size_t used(int device) {
    size_t in_use = 0, capacity = 0;
    EXPECT_EQ(sdMemGetInfo(device, &in_use, &capacity), sdSuccess) << sdGetLastErrorString();
    return in_use;
  }
  static size_t capacity() {
    size_t in_use = 0, bytes = 0;
    EXPECT_EQ(sdMemGetInfo(0, &in_use, &bytes), sdSuccess) << sdGetLastErrorString();
    return bytes;
  }
  static std::string text(const void* ptr) {
    std::ostringstream out;
    out << ptr;
    return out.str();
  }
};

TEST_F(MemoryTest, MallocAndFreeAccountPerDevice) {
  const size_t before0 = used(0), before1 = used(1);
  void* a = nullptr;
  void* b = nullptr;
  SD_ASSERT_OK(sdMalloc(&a, 1000, 0));
  SD_ASSERT_OK(sdMalloc(&b, 24, 1));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(used(0), before0 + 1000);
  EXPECT_EQ(used(1), before1 + 24);
  std::memset(a, 0x5a, 1000);  // the whole range is real, writable memory
  SD_ASSERT_OK(sdFree(a));
  SD_ASSERT_OK(sdFree(b));
  EXPECT_EQ(used(0), before0);
  EXPECT_EQ(used(1), before1);
}

TEST_F(MemoryTest, ZeroByteAllocationsAreUniqueNonNullAndFreeable) {
  std::set<void*> seen;
  std::vector<void*> ptrs(8);
  for (void*& ptr : ptrs) {
    SD_ASSERT_OK(sdMalloc(&ptr, 0, 0));
    EXPECT_NE(ptr, nullptr);
    EXPECT_TRUE(seen.insert(ptr).second);
    int device = -1;
    SD_ASSERT_OK(sdPointerGetDevice(ptr, &device));
  }
  for (void* ptr : ptrs) SD_ASSERT_OK(sdFree(ptr));
}

TEST_F(MemoryTest, AllocationsAreAlignedLikeADevice) {
  for (size_t size : {1, 3, 255, 257, 4096}) {
    void* ptr = nullptr;
    SD_ASSERT_OK(sdMalloc(&ptr, size, 1));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(ptr) % 256, 0u) << size;
    SD_ASSERT_OK(sdFree(ptr));
  }
}

TEST_F(MemoryTest, MallocRejectsBadDevice) {
  void* ptr = reinterpret_cast<void*>(0x1);
  SD_EXPECT_ERROR(sdMalloc(&ptr, 8, 2), sdErrorInvalidDevice, "sdMalloc: device 2 is out of range");
  SD_EXPECT_ERROR(sdMalloc(&ptr, 8, -3), sdErrorInvalidDevice, "device -3");
  EXPECT_EQ(ptr, reinterpret_cast<void*>(0x1));  // output untouched on failure
}

TEST_F(MemoryTest, CapacityIsEnforcedPerDevice) {
  const size_t cap = capacity();
  ASSERT_EQ(used(0), 0u) << "a test leaked device memory";
  void* whole = nullptr;
  SD_EXPECT_ERROR(sdMalloc(&whole, cap + 1, 0), sdErrorMemoryAllocation, "raise SIMDEV_MEMORY_CAPACITY");
  EXPECT_EQ(used(0), 0u);

  void* half1 = nullptr;
  void* half2 = nullptr;
  SD_ASSERT_OK(sdMalloc(&half1, cap / 2, 0));
  SD_ASSERT_OK(sdMalloc(&half2, cap - cap / 2, 0));
  void* extra = nullptr;
  SD_EXPECT_ERROR(sdMalloc(&extra, 1, 0), sdErrorMemoryAllocation, "cannot allocate 1 bytes on device 0");
  SD_ASSERT_OK(sdMalloc(&extra, 1, 1));  // device 1 has its own capacity
  SD_ASSERT_OK(sdFree(extra));
  SD_ASSERT_OK(sdFree(half1));
  SD_ASSERT_OK(sdMalloc(&extra, 1, 0));  // freed bytes are available again
  SD_ASSERT_OK(sdFree(extra));
  SD_ASSERT_OK(sdFree(half2));
}

TEST_F(MemoryTest, FreeOfNullIsANoOp) { SD_ASSERT_OK(sdFree(nullptr)); }

TEST_F(MemoryTest, FreeRejectsPointersNotFromMalloc) {
  int host = 0;
  SD_EXPECT_ERROR(sdFree(&host), sdErrorInvalidDevicePointer, "sdFree: " + text(&host));
  EXPECT_NE(std::string(sdGetLastErrorString()).find("not a live simdev allocation"), std::string::npos);
}

TEST_F(MemoryTest, DoubleFreeIsRejected) {
  void* ptr = nullptr;
  SD_ASSERT_OK(sdMalloc(&ptr, 64, 0));
  SD_ASSERT_OK(sdFree(ptr));
  SD_EXPECT_ERROR(sdFree(ptr), sdErrorInvalidDevicePointer, text(ptr) + " is not a live simdev allocation");
}

TEST_F(MemoryTest, FreeOfInteriorPointerNamesTheBase) {
  void* ptr = nullptr;
  SD_ASSERT_OK(sdMalloc(&ptr, 64, 0));
  SD_EXPECT_ERROR(sdFree(static_cast<char*>(ptr) + 8), sdErrorInvalidDevicePointer,
                  "points inside the allocation at " + text(ptr));
  SD_ASSERT_OK(sdFree(ptr));
}

TEST_F(MemoryTest, PointerGetDeviceCoversExactlyTheAllocation) {
  char* ptr = nullptr;
  SD_ASSERT_OK(sdMalloc(reinterpret_cast<void**>(&ptr), 100, 1));
  for (const char* inside : {ptr, ptr + 50, ptr + 99}) {
    int device = -1;
    SD_ASSERT_OK(sdPointerGetDevice(inside, &device));
    EXPECT_EQ(device, 1);
  }
  int device = -1;
  SD_EXPECT_ERROR(sdPointerGetDevice(ptr + 100, &device), sdErrorInvalidDevicePointer, "not simdev device memory");
  SD_EXPECT_ERROR(sdPointerGetDevice(&device, &device), sdErrorInvalidDevicePointer, text(&device));
  SD_ASSERT_OK(sdFree(ptr));
  SD_EXPECT_ERROR(sdPointerGetDevice(ptr, &device), sdErrorInvalidDevicePointer, "freed");
}

TEST_F(MemoryTest, MemGetInfoRejectsBadDevice) {
  size_t in_use = 0, bytes = 0;
  SD_EXPECT_ERROR(sdMemGetInfo(9, &in_use, &bytes), sdErrorInvalidDevice, "sdMemGetInfo: device 9");
}

TEST_F(MemoryTest, CopiesRoundTripThroughDevices) {
  std::vector<int32_t> input(1000), output(1000, -1);
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<int32_t>(i * 7);
  const size_t bytes = input.size() * sizeof(int32_t);
  void* on0 = nullptr;
  void* on1 = nullptr;
  SD_ASSERT_OK(sdMalloc(&on0, bytes, 0));
  SD_ASSERT_OK(sdMalloc(&on1, bytes, 1));
  SD_ASSERT_OK(sdMemcpyAsync(on0, input.data(), bytes, sdMemcpyHostToDevice, default_stream(0)));
  SD_ASSERT_OK(sdStreamSynchronize(default_stream(0)));
  // Device to device may cross devices, on a stream of either device.
  SD_ASSERT_OK(sdMemcpy(on1, on0, bytes, sdMemcpyDeviceToDevice, default_stream(0)));
  SD_ASSERT_OK(sdMemcpy(output.data(), on1, bytes, sdMemcpyDeviceToHost, default_stream(1)));
  EXPECT_EQ(output, input);
  std::vector<int32_t> host_copy(1000);
  SD_ASSERT_OK(sdMemcpy(host_copy.data(), input.data(), bytes, sdMemcpyHostToHost, default_stream(0)));
  EXPECT_EQ(host_copy, input);
  SD_ASSERT_OK(sdFree(on0));
  SD_ASSERT_OK(sdFree(on1));
}

TEST_F(MemoryTest, OverlappingDeviceCopyBehavesLikeMemmove) {
  char* ptr = nullptr;
  SD_ASSERT_OK(sdMalloc(reinterpret_cast<void**>(&ptr), 16, 0));
  const char initial[] = "0123456789abcdef";
  SD_ASSERT_OK(sdMemcpy(ptr, initial, 16, sdMemcpyHostToDevice, default_stream()));
  SD_ASSERT_OK(sdMemcpy(ptr + 2, ptr, 8, sdMemcpyDeviceToDevice, default_stream()));
  char result[17] = {};
  SD_ASSERT_OK(sdMemcpy(result, ptr, 16, sdMemcpyDeviceToHost, default_stream()));
  EXPECT_STREQ(result, "0101234567abcdef");
  SD_ASSERT_OK(sdFree(ptr));
}

TEST_F(MemoryTest, CopyValidatesDeviceRangesWhenQueued) {
  sdStream_t stream = default_stream(0);
  char host[64] = {};
  char* ptr = nullptr;
  SD_ASSERT_OK(sdMalloc(reinterpret_cast<void**>(&ptr), 32, 0));
  SD_EXPECT_ERROR(sdMemcpyAsync(ptr, host, 33, sdMemcpyHostToDevice, stream), sdErrorInvalidDevicePointer,
                  "sdMemcpyAsync: destination range");
  EXPECT_NE(std::string(sdGetLastErrorString()).find("runs past the end of the 32-byte allocation"),
            std::string::npos);
  SD_EXPECT_ERROR(sdMemcpyAsync(host, ptr + 16, 17, sdMemcpyDeviceToHost, stream), sdErrorInvalidDevicePointer,
                  "source range");
  SD_EXPECT_ERROR(sdMemcpyAsync(host, host + 32, 8, sdMemcpyDeviceToHost, stream), sdErrorInvalidDevicePointer,
                  "check the copy kind");
  SD_EXPECT_ERROR(sdMemcpyAsync(ptr, host, 8, sdMemcpyDeviceToDevice, stream), sdErrorInvalidDevicePointer,
                  "source");
  SD_ASSERT_OK(sdMemcpyAsync(ptr + 16, host, 16, sdMemcpyHostToDevice, stream));  // exactly fits
  SD_ASSERT_OK(sdStreamSynchronize(stream));
  SD_ASSERT_OK(sdFree(ptr));
  SD_EXPECT_ERROR(sdMemcpyAsync(ptr, host, 8, sdMemcpyHostToDevice, stream), sdErrorInvalidDevicePointer,
                  "freed");
}

TEST_F(MemoryTest, HostToDeviceNeedsMemoryOfTheStreamsDevice) {
  void* on1 = nullptr;
  SD_ASSERT_OK(sdMalloc(&on1, 8, 1));
  char host[8] = {};
  SD_EXPECT_ERROR(sdMemcpyAsync(on1, host, 8, sdMemcpyHostToDevice, default_stream(0)),
                  sdErrorInvalidDevicePointer, "is memory of device 1, but the stream belongs to device 0");
  SD_EXPECT_ERROR(sdMemcpyAsync(host, on1, 8, sdMemcpyDeviceToHost, default_stream(0)),
                  sdErrorInvalidDevicePointer, "device 1");
  SD_EXPECT_ERROR(sdMemsetAsync(on1, 0, 8, default_stream(0)), sdErrorInvalidDevicePointer, "device 1");
  SD_ASSERT_OK(sdFree(on1));
}

TEST_F(MemoryTest, CopyRejectsBadKindNullHostPointerAndBadStream) {
  char host[8] = {};
  void* ptr = nullptr;
  SD_ASSERT_OK(sdMalloc(&ptr, 8, 0));
  SD_EXPECT_ERROR(sdMemcpyAsync(ptr, host, 8, static_cast<sdMemcpyKind>(0), default_stream()), sdErrorInvalidValue,
                  "kind 0 is not an sdMemcpyKind");
  SD_EXPECT_ERROR(sdMemcpyAsync(ptr, nullptr, 8, sdMemcpyHostToDevice, default_stream()), sdErrorInvalidValue,
                  "source (host) is NULL");
  SD_EXPECT_ERROR(sdMemcpyAsync(nullptr, host, 8, sdMemcpyHostToHost, default_stream()), sdErrorInvalidValue,
                  "destination (host) is NULL");
  SD_EXPECT_ERROR(sdMemcpyAsync(ptr, host, 8, sdMemcpyHostToDevice, nullptr), sdErrorInvalidStream,
                  "use sdStreamGetDefault");
  SD_EXPECT_ERROR(sdMemcpy(ptr, host, 8, sdMemcpyHostToDevice, nullptr), sdErrorInvalidStream, "sdMemcpy:");
  SD_ASSERT_OK(sdFree(ptr));
}

TEST_F(MemoryTest, ZeroSizeCopyAndMemsetAreNoOps) {
  SD_ASSERT_OK(sdMemcpyAsync(nullptr, nullptr, 0, sdMemcpyDeviceToDevice, default_stream()));
  SD_ASSERT_OK(sdMemcpyAsync(nullptr, nullptr, 0, sdMemcpyHostToDevice, default_stream()));
  SD_ASSERT_OK(sdMemsetAsync(nullptr, 0, 0, default_stream()));
  SD_ASSERT_OK(sdStreamSynchronize(default_stream()));
}

TEST_F(MemoryTest, MemsetFillsAndValidates) {
  unsigned char* ptr = nullptr;
  SD_ASSERT_OK(sdMalloc(reinterpret_cast<void**>(&ptr), 64, 1));
  SD_ASSERT_OK(sdMemsetAsync(ptr, 0, 64, default_stream(1)));
  SD_ASSERT_OK(sdMemsetAsync(ptr + 8, 0x1ab, 16, default_stream(1)));  // value is taken as a byte
  unsigned char result[64];
  SD_ASSERT_OK(sdMemcpy(result, ptr, 64, sdMemcpyDeviceToHost, default_stream(1)));
  for (int i = 0; i < 64; ++i) EXPECT_EQ(result[i], (i >= 8 && i < 24) ? 0xab : 0) << i;
  SD_EXPECT_ERROR(sdMemsetAsync(ptr + 60, 0, 8, default_stream(1)), sdErrorInvalidDevicePointer,
                  "sdMemsetAsync: destination range");
  SD_ASSERT_OK(sdFree(ptr));
}

}  // namespace
