// Where a layout (DevbridgeParamLayout, c_launch_api.h) puts a kernel's
// parameters: the slots it adds around the kernel's own, each parameter's
// size in the kernel ABI, and the Ascend layout's packed argument block.
// Shared by the Python packer (py_launcher.cpp), the launch core and every
// kernel runtime, so one definition of each layout exists. Torch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "devbridge/c_launch_api.h"

namespace devbridge {
namespace launch {

// The slots a layout adds before and after the kernel's own parameters.
//   Triton: {0, 2}   global scratch, profile scratch
//   Ascend: {[ffts] + [lock, workspace], 3}   ..., gridX, gridY, gridZ
struct LayoutSlots {
  uint32_t leading = 0;
  uint32_t trailing = 0;
};
LayoutSlots SlotsOf(const DevbridgeLaunchMetadata& metadata) noexcept;

// Bytes a parameter of `type` occupies in the layout's ABI. The Triton layout
// keeps the type's own size; the Ascend layout passes i1/u1 as 32-bit ints
// and fp16/bf16/fp32 as fp32 (triton-ascend's wrapper types).
size_t ParamSize(uint32_t layout, DevbridgeArgType type) noexcept;

// The Ascend block: each slot at an offset aligned to 8 when it is 8 bytes,
// else to 4; the total rounded up to 8. Returns the block's size.
size_t AscendBlockSize(const size_t* sizes, uint32_t count) noexcept;
// Writes the block (AscendBlockSize bytes, padding zeroed) from the slots.
void PackAscendBlock(void* const* params, const size_t* sizes, uint32_t count, unsigned char* out) noexcept;

// A kernel's 1-D block count in the Ascend layout: gx*gy*gz, or at most
// `cores` with DEVBRIDGE_LAUNCH_ASCEND_CAP_BLOCKS (cores > 0). Throws
// devbridge::Error(kValue) when it exceeds the 2**32 - 1 an NPU launch takes.
uint32_t AscendBlockCount(const uint32_t grid[3], uint32_t flags, uint64_t cores, const char* kernel_name);

}  // namespace launch
}  // namespace devbridge
