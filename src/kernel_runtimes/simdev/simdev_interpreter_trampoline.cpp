// The simdev kernel library behind simdev's Triton target (the interpreter).
//
// simdev has no instruction set: its Triton "binary" describes a kernel for
// Triton's interpreter (devbridge/triton/_interpreter.py). To run it through
// simdev's own module and launch API, like any other simdev kernel, each
// loaded interpreter kernel gets a copy of this small library: simdev calls
// `devbridge_interpret` once per program on the stream's worker, with the
// parameters devbridge's launcher packed, and the trampoline hands them to
// the runner its copy was set up with (devbridge's Python-side interpreter,
// which takes the GIL only for that call).
//
// Plain C ABI, no Python, no torch: the runner is a function pointer given to
// `devbridge_interpreter_setup` right after simdev loaded this copy.
#include <cstddef>
#include <cstdint>

namespace {

// simdev/runtime.h 1.1's sdKernelContext (the plugin's ABI, mirrored as the
// simdev kernel runtime mirrors its functions).
struct SimdevKernelContext {
  uint32_t program_id[3];
  uint32_t grid[3];
  int device;
  int num_args;
  const size_t* arg_sizes;
};

using Runner = int (*)(uint64_t kernel_id, const uint32_t program_id[3], const uint32_t grid[3], int device,
                       void** args, const size_t* arg_sizes, int num_args);

struct Setup {
  uint64_t kernel_id;
  Runner run;
};

Setup g_setup{0, nullptr};

}  // namespace

extern "C" __attribute__((visibility("default"))) void devbridge_interpreter_setup(const void* setup) {
  g_setup = *static_cast<const Setup*>(setup);
}

extern "C" __attribute__((visibility("default"))) int devbridge_interpret(const SimdevKernelContext* ctx,
                                                                          void** args) {
  if (g_setup.run == nullptr) return 90;  // never set up: refuse rather than guess
  return g_setup.run(g_setup.kernel_id, ctx->program_id, ctx->grid, ctx->device, args, ctx->arg_sizes,
                     ctx->num_args);
}
