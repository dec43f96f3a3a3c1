#include "launch/param_layout.h"

#include <cstring>
#include <string>

#include "devbridge/error.h"

namespace devbridge {
namespace launch {
namespace {

size_t AlignUp(size_t value, size_t align) noexcept { return (value + align - 1) & ~(align - 1); }

// triton-ascend declares 8-byte members aligned(8) and every other member
// aligned(4), inside a packed struct.
size_t AscendAlign(size_t size) noexcept { return size == 8 ? 8 : 4; }

}  // namespace

LayoutSlots SlotsOf(const DevbridgeLaunchMetadata& metadata) noexcept {
  LayoutSlots slots;
  if (metadata.layout == kDevbridgeLayoutAscend) {
    slots.leading = ((metadata.flags & DEVBRIDGE_LAUNCH_ASCEND_FFTS) ? 1u : 0u) +
                    ((metadata.flags & DEVBRIDGE_LAUNCH_ASCEND_SIMT_ONLY) ? 0u : 2u);
    slots.trailing = 3;
  } else {
    slots.trailing = 2;
  }
  return slots;
}

size_t ParamSize(uint32_t layout, DevbridgeArgType type) noexcept {
  switch (type) {
    case kDevbridgeArgI1:
    case kDevbridgeArgU1: return layout == kDevbridgeLayoutAscend ? 4 : 1;
    case kDevbridgeArgI8:
    case kDevbridgeArgU8: return 1;
    case kDevbridgeArgFP16:
    case kDevbridgeArgBF16: return layout == kDevbridgeLayoutAscend ? 4 : 2;
    case kDevbridgeArgI16:
    case kDevbridgeArgU16: return 2;
    case kDevbridgeArgI32:
    case kDevbridgeArgU32:
    case kDevbridgeArgFP32: return 4;
    case kDevbridgeArgPointer:
    case kDevbridgeArgI64:
    case kDevbridgeArgU64:
    case kDevbridgeArgFP64: return 8;
  }
  return 8;
}

size_t AscendBlockSize(const size_t* sizes, uint32_t count) noexcept {
  size_t offset = 0;
  for (uint32_t i = 0; i < count; ++i) offset = AlignUp(offset, AscendAlign(sizes[i])) + sizes[i];
  return AlignUp(offset, 8);
}

void PackAscendBlock(void* const* params, const size_t* sizes, uint32_t count, unsigned char* out) noexcept {
  const size_t total = AscendBlockSize(sizes, count);
  std::memset(out, 0, total);
  size_t offset = 0;
  for (uint32_t i = 0; i < count; ++i) {
    offset = AlignUp(offset, AscendAlign(sizes[i]));
    std::memcpy(out + offset, params[i], sizes[i]);
    offset += sizes[i];
  }
}

uint32_t AscendBlockCount(const uint32_t grid[3], uint32_t flags, uint64_t cores, const char* kernel_name) {
  // Each dimension is < 2**31 (the launcher checks), so the product fits in 128 bits; check 64 first.
  uint64_t programs = 0;
  const bool overflow = __builtin_mul_overflow(static_cast<uint64_t>(grid[0]) * grid[1], grid[2], &programs);
  if ((flags & DEVBRIDGE_LAUNCH_ASCEND_CAP_BLOCKS) && cores > 0 && (overflow || programs > cores)) {
    return static_cast<uint32_t>(cores > UINT32_MAX ? UINT32_MAX : cores);
  }
  if (overflow || programs > UINT32_MAX) {
    throw Error(ErrorKind::kValue,
                "devbridge: the grid (" + std::to_string(grid[0]) + ", " + std::to_string(grid[1]) + ", " +
                    std::to_string(grid[2]) + ") of kernel '" + kernel_name +
                    "' has more programs than the 2**32 - 1 blocks an Ascend launch takes; launch a smaller "
                    "grid (or let the kernel loop: TRITON_ALL_BLOCKS_PARALLEL=1 caps the blocks at the core count)");
  }
  return static_cast<uint32_t>(programs);
}

}  // namespace launch
}  // namespace devbridge
