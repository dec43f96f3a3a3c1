/*!
 * \file simdev_launch_kernels.cc
 * \brief simdev host-function kernels for the launcher tests, compiled at test
 *  time (tests/python/launch_support.py) into a shared library whose bytes are
 *  loaded through devbridge's simdev kernel runtime.
 *
 * Each kernel is an sdKernelFn_t: args[i] points at the i-th parameter's
 * value, laid out as devbridge's launcher packed it, the two scratch pointers
 * last. The kernels mirror the parameter lists of real Triton kernels, so the
 * launcher under test is the one a compiled kernel would get.
 */
#include <simdev/runtime.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#define KERNEL extern "C" __attribute__((visibility("default"))) int

namespace {

template <typename T>
T Arg(void** args, int i) {
  T value;
  std::memcpy(&value, args[i], sizeof(T));
  return value;
}

uint64_t LinearId(const sdKernelContext* ctx) {
  return ctx->program_id[0] + static_cast<uint64_t>(ctx->grid[0]) *
                                  (ctx->program_id[1] + static_cast<uint64_t>(ctx->grid[1]) * ctx->program_id[2]);
}

}  // namespace

/*! Records the launch as the kernel saw it, at program 0 only:
 *  out[0] = num_args, then for each argument i: out[1 + 2i] = its size,
 *  out[2 + 2i] = its bytes zero-extended into 8 bytes (little-endian).
 *  args: uint64_t* out, then anything. */
KERNEL probe_args(const sdKernelContext* ctx, void** args) {
  if (LinearId(ctx) != 0) return 0;
  auto* out = Arg<uint64_t*>(args, 0);
  out[0] = static_cast<uint64_t>(ctx->num_args);
  for (int i = 0; i < ctx->num_args; ++i) {
    const size_t size = ctx->arg_sizes[i];
    uint64_t bytes = 0;
    std::memcpy(&bytes, args[i], size < 8 ? size : 8);
    out[1 + 2 * i] = size;
    out[2 + 2 * i] = bytes;
  }
  return 0;
}

/*! The parameter list of the Triton kernel add(x, y, out, n: i32, alpha: fp32,
 *  BLOCK: constexpr): out[i] = x[i] * alpha + y[i], 128 elements per program. */
KERNEL add_f32(const sdKernelContext* ctx, void** args) {
  const auto* x = Arg<const float*>(args, 0);
  const auto* y = Arg<const float*>(args, 1);
  auto* out = Arg<float*>(args, 2);
  const int32_t n = Arg<int32_t>(args, 3);
  const float alpha = Arg<float>(args, 4);
  const int64_t begin = static_cast<int64_t>(ctx->program_id[0]) * 128;
  for (int64_t i = begin; i < begin + 128 && i < n; ++i) out[i] = x[i] * alpha + y[i];
  return 0;
}

/*! out[linear program id] = x + 1000 * y + 1000000 * z + 1 (0 = never ran).
 *  args: int64_t* out. */
KERNEL record_programs(const sdKernelContext* ctx, void** args) {
  auto* out = Arg<int64_t*>(args, 0);
  out[LinearId(ctx)] = 1 + ctx->program_id[0] + 1000 * ctx->program_id[1] + 1000000 * ctx->program_id[2];
  return 0;
}

/*! Uses global scratch the way a kernel's spill space is used: program p
 *  writes `tag` into its 8-byte slot, waits `wait_ms` (program 0 only), reads
 *  the slot back. out[3p] = what it read back, out[3p + 1] = the global
 *  scratch address, out[3p + 2] = the profile scratch address.
 *  args: int64_t* out, int64_t tag, int32_t wait_ms, scratch, scratch. */
KERNEL scratch_roundtrip(const sdKernelContext* ctx, void** args) {
  auto* out = Arg<int64_t*>(args, 0);
  const int64_t tag = Arg<int64_t>(args, 1);
  const int32_t wait_ms = Arg<int32_t>(args, 2);
  auto* global = Arg<int64_t*>(args, 3);
  auto* profile = Arg<int64_t*>(args, 4);
  const uint64_t p = LinearId(ctx);
  global[p] = tag;
  if (p == 0 && wait_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  out[3 * p] = global[p];
  out[3 * p + 1] = reinterpret_cast<int64_t>(global);
  out[3 * p + 2] = reinterpret_cast<int64_t>(profile);
  return 0;
}

/*! out[0] = in[0] + 1, after sleeping `wait_ms`: a slow consumer/producer for
 *  stream-order tests. args: const int64_t* in, int64_t* out, int32_t wait_ms. */
KERNEL slow_increment(const sdKernelContext*, void** args) {
  const auto* in = Arg<const int64_t*>(args, 0);
  auto* out = Arg<int64_t*>(args, 1);
  const int32_t wait_ms = Arg<int32_t>(args, 2);
  if (wait_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  out[0] = in[0] + 1;
  return 0;
}

/*! Fails: the stream reports sdErrorLaunchFailure at its next synchronization. */
KERNEL always_fail(const sdKernelContext*, void**) { return 7; }
