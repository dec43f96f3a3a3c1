/*!
 * \file simdev_ascend_kernels.cc
 * \brief simdev kernels that receive their arguments in the Ascend layout,
 *  as an NPU kernel compiled by triton-ascend does: one packed argument
 *  block (args[0]), launched over a 1-D grid of blocks.
 *
 * Each kernel declares the block as triton-ascend's generated launcher
 * declares it (a packed struct whose 8-byte members are aligned(8) and every
 * other member aligned(4); i1 as int32, fp16/bf16/fp32 as float) and checks
 * the size devbridge packed against sizeof that struct, so a layout slip in
 * devbridge shows up as a wrong field or a size mismatch.
 */
#include <simdev/runtime.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#define KERNEL extern "C" __attribute__((visibility("default"))) int
#define A4 __attribute__((aligned(4)))
#define A8 __attribute__((aligned(8)))

namespace {

template <class T>
uint64_t Bits(T value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

// Refuses a block whose size is not the struct's (returns the error the
// stream then reports at its next synchronization).
template <class Block>
const Block* BlockOf(const sdKernelContext* ctx, void** args) {
  if (ctx->num_args != 1 || ctx->arg_sizes[0] != sizeof(Block)) return nullptr;
  return static_cast<const Block*>(args[0]);
}

}  // namespace

/*! Every scalar kind of the ABI, with ffts, lock and workspace:
 *  probe(out: *i64, a: i1, b: i8, c: i16, d: i32, e: i64, f: fp16, g: bf16,
 *        h: fp32, k: fp64, u: u32, p: *fp32).
 *  Block 0 writes out[0..] = size, ffts, lock, workspace, then each field's
 *  bits, then gridX, gridY, gridZ and the block count. */
struct __attribute__((packed)) ProbeBlock {
  void* ffts_addr A8;
  void* syncBlockLock A8;
  void* workspace_addr A8;
  void* out A8;
  int32_t a A4;
  int8_t b A4;
  int16_t c A4;
  int32_t d A4;
  int64_t e A8;
  float f A4;
  float g A4;
  float h A4;
  double k A8;
  uint32_t u A4;
  void* p A8;
  int32_t gridX A4;
  int32_t gridY A4;
  int32_t gridZ A4;
};

KERNEL ascend_probe(const sdKernelContext* ctx, void** args) {
  const ProbeBlock* block = BlockOf<ProbeBlock>(ctx, args);
  if (block == nullptr) return 3;
  if (ctx->program_id[0] != 0) return 0;
  auto* out = static_cast<uint64_t*>(block->out);
  const uint64_t values[] = {sizeof(ProbeBlock), Bits(block->ffts_addr), Bits(block->syncBlockLock),
                             Bits(block->workspace_addr), Bits(block->a), Bits(block->b), Bits(block->c),
                             Bits(block->d), Bits(block->e), Bits(block->f), Bits(block->g), Bits(block->h),
                             Bits(block->k), Bits(block->u), Bits(block->p), Bits(block->gridX),
                             Bits(block->gridY), Bits(block->gridZ), ctx->grid[0]};
  std::memcpy(out, values, sizeof(values));
  return 0;
}

/*! Without FFTS and with simt_only: no leading slots at all.
 *  plain(out: *i64, x: i32) + grid. out[block] = the program id the kernel
 *  rebuilds from the block index and the trailing grid (x + 1000 y +
 *  1000000 z), out[blocks] = x. */
struct __attribute__((packed)) PlainBlock {
  void* out A8;
  int32_t x A4;
  int32_t gridX A4;
  int32_t gridY A4;
  int32_t gridZ A4;
};

KERNEL ascend_plain(const sdKernelContext* ctx, void** args) {
  const PlainBlock* block = BlockOf<PlainBlock>(ctx, args);
  if (block == nullptr) return 3;
  auto* out = static_cast<int64_t*>(block->out);
  const int64_t id = ctx->program_id[0];
  const int64_t x = id % block->gridX, y = (id / block->gridX) % block->gridY,
                z = id / (static_cast<int64_t>(block->gridX) * block->gridY);
  out[id] = 1 + x + 1000 * y + 1000000 * z;
  if (id == 0) out[ctx->grid[0]] = block->x;
  return 0;
}

/*! With lock and workspace, no FFTS: uses them as a kernel does.
 *  locks(out: *i64, lock_num: i32, tag: i64, wait_ms: i32) + grid.
 *  Block 0 records the lock words it found (out[1 + i]), sleeps wait_ms,
 *  then overwrites every lock word with 999 (a kernel leaves its locks
 *  changed). Each block b writes tag + b into its 8-byte workspace slot,
 *  waits, reads it back into out[100 + b]. out[0] = the block count. */
struct __attribute__((packed)) LockBlock {
  void* syncBlockLock A8;
  void* workspace_addr A8;
  void* out A8;
  int32_t lock_num A4;
  int64_t tag A8;
  int32_t wait_ms A4;
  int32_t gridX A4;
  int32_t gridY A4;
  int32_t gridZ A4;
};

KERNEL ascend_locks(const sdKernelContext* ctx, void** args) {
  const LockBlock* block = BlockOf<LockBlock>(ctx, args);
  if (block == nullptr) return 3;
  auto* out = static_cast<int64_t*>(block->out);
  auto* lock = static_cast<int64_t*>(block->syncBlockLock);
  auto* workspace = static_cast<int64_t*>(block->workspace_addr);
  const uint32_t id = ctx->program_id[0];
  if (workspace != nullptr) workspace[id] = block->tag + id;
  if (id == 0) {
    out[0] = ctx->grid[0];
    for (int32_t i = 0; i < block->lock_num; ++i) out[1 + i] = lock[i];
  }
  if (block->wait_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(block->wait_ms));
  if (id == 0) {
    for (int32_t i = 0; i < block->lock_num; ++i) lock[i] = 999;
  }
  out[100 + id] = workspace != nullptr ? workspace[id] : -1;
  return 0;
}
