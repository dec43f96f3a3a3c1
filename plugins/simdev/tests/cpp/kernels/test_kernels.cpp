// Kernels for the module tests: a shared library loaded with sdModuleLoad.
// Each is an sdKernelFn_t; args[i] points at the i-th argument's value.
#include <simdev/runtime.h>

#include <cstdint>

#define TEST_KERNEL extern "C" __attribute__((visibility("default"))) int

namespace {
constexpr int64_t kBlock = 256;  // elements per program of vector_add

template <typename T>
T arg(void** args, int i) {
  return *static_cast<T*>(args[i]);
}
}  // namespace

// out[i] = x[i] + y[i]; args: float* x, float* y, float* out, int64_t n.
TEST_KERNEL vector_add(const sdKernelContext* ctx, void** args) {
  const auto* x = arg<const float*>(args, 0);
  const auto* y = arg<const float*>(args, 1);
  auto* out = arg<float*>(args, 2);
  const auto n = arg<int64_t>(args, 3);
  const int64_t begin = static_cast<int64_t>(ctx->program_id[0]) * kBlock;
  for (int64_t i = begin; i < begin + kBlock && i < n; ++i) out[i] = x[i] + y[i];
  return 0;
}

// Appends x + 100 * y + 10000 * z of each program to a log; args: int64_t* log
// where log[0] counts the entries that follow it.
TEST_KERNEL record_program_order(const sdKernelContext* ctx, void** args) {
  auto* log = arg<int64_t*>(args, 0);
  log[1 + log[0]++] = ctx->program_id[0] + 100 * ctx->program_id[1] + 10000 * ctx->program_id[2];
  return 0;
}

// out[0] = value, out[1] = the device; args: int64_t* out, int64_t value.
TEST_KERNEL store_value_and_device(const sdKernelContext* ctx, void** args) {
  auto* out = arg<int64_t*>(args, 0);
  out[0] = arg<int64_t>(args, 1);
  out[1] = ctx->device;
  return 0;
}

// Counts executed programs and fails (returns 42) at program x == fail_at;
// args: int32_t* executed, uint32_t fail_at.
TEST_KERNEL fail_at_program(const sdKernelContext* ctx, void** args) {
  ++*arg<int32_t*>(args, 0);
  return ctx->program_id[0] == arg<uint32_t>(args, 1) ? 42 : 0;
}

// Records what the context says of the arguments: out[0] = num_args, then each
// arg_sizes[i]; args: int64_t* out, then any arguments (their sizes are logged).
TEST_KERNEL record_arg_sizes(const sdKernelContext* ctx, void** args) {
  auto* out = arg<int64_t*>(args, 0);
  out[0] = ctx->num_args;
  for (int i = 0; i < ctx->num_args; ++i) out[1 + i] = static_cast<int64_t>(ctx->arg_sizes[i]);
  return 0;
}

// Fails at program x == fail_at after saying why (sdSetWorkFailureMessage),
// as an interpreted kernel reports its exception; args: uint32_t fail_at.
TEST_KERNEL fail_with_message(const sdKernelContext* ctx, void** args) {
  if (ctx->program_id[0] != arg<uint32_t>(args, 0)) {
    // A message set by a program that then succeeds must not leak into a later failure.
    (void)sdSetWorkFailureMessage("stale message of a program that succeeded");
    return 0;
  }
  return sdSetWorkFailureMessage("index 7 is out of bounds for the block") == sdSuccess ? 3 : 4;
}
