// The simdev kernel library behind Python kernel runtimes
// (src/python/py_kernel_runtime.cpp, devbridge.launch.python_kernel_runtime).
//
// A Python kernel's "binary" is a description that Python code runs. To run
// it through simdev's own module and launch API, like any other simdev
// kernel, each loaded Python kernel gets a copy of this small library:
// simdev calls `devbridge_interpret` (Python code interprets the
// description) once per program on the stream's worker, with the parameters
// devbridge's launcher packed, and the trampoline hands them to the runner
// its copy was set up with (which takes the GIL only for that call).
//
// Plain C ABI, no Python, no torch: the runner is a function pointer given to
// `devbridge_interpret_setup` right after simdev loaded this copy.
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

using Runner = int (*)(const void* runtime, uint64_t kernel_id, const uint32_t program_id[3], const uint32_t grid[3],
                       int device, void** args, const size_t* arg_sizes, int num_args);

struct Setup {
  const void* runtime;
  uint64_t kernel_id;
  Runner run;
};

Setup g_setup{nullptr, 0, nullptr};

}  // namespace

extern "C" __attribute__((visibility("default"))) void devbridge_interpret_setup(const void* setup) {
  g_setup = *static_cast<const Setup*>(setup);
}

extern "C" __attribute__((visibility("default"))) int devbridge_interpret(const SimdevKernelContext* ctx,
                                                                               void** args) {
  if (g_setup.run == nullptr) return 90;  // never set up: refuse rather than guess
  return g_setup.run(g_setup.runtime, g_setup.kernel_id, ctx->program_id, ctx->grid, ctx->device, args,
                     ctx->arg_sizes, ctx->num_args);
}
