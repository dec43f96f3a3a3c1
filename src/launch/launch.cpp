#include "launch/launch.h"

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "devbridge/error.h"
#include "launch/kernel_runtimes.h"

namespace devbridge {
namespace launch {
namespace {

std::string Hex(const void* pointer) {
  std::ostringstream out;
  out << pointer;
  return out.str();
}

[[noreturn]] void ThrowFramework(const DevbridgeRuntimeAPI& framework, const std::string& what) {
  throw Error(ErrorKind::kRuntime, "devbridge: " + what + ": " + framework.get_last_error());
}

// Scratch tokens of one launch: released (returned to the framework
// allocator) when the launch has been enqueued.
class Scratch {
 public:
  explicit Scratch(const DevbridgeRuntimeAPI& framework) : framework_(framework) {}
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    for (void* token : tokens_) (void)framework_.scratch_free(token);
  }

  // Allocates `programs * per_program` bytes aligned to `align` on the
  // kernel's device (current stream) and returns the aligned address.
  void* allocate(const LoadedKernel& kernel, uint64_t programs, uint64_t per_program, uint32_t align,
                 const char* what) {
    uint64_t bytes = 0;
    const uint64_t slack = align > 1 ? align - 1 : 0;
    if (__builtin_mul_overflow(programs, per_program, &bytes) ||
        __builtin_add_overflow(bytes, slack, &bytes)) {
      throw Error(ErrorKind::kValue, std::string("devbridge: the ") + what + " of kernel '" +
                                         kernel.name + "' (" + std::to_string(per_program) +
                                         " bytes for each of " + std::to_string(programs) +
                                         " programs) does not fit in 64 bits; launch a smaller grid");
    }
    void* pointer = nullptr;
    void* token = nullptr;
    if (framework_.scratch_alloc(kernel.dl_device_type, kernel.device_id, static_cast<size_t>(bytes),
                                 &pointer, &token) != 0) {
      ThrowFramework(framework_, std::string("allocating ") + std::to_string(bytes) + " bytes of " +
                                     what + " for kernel '" + kernel.name + "' on " + kernel.device_name);
    }
    tokens_.push_back(token);
    const uintptr_t address = reinterpret_cast<uintptr_t>(pointer);
    return reinterpret_cast<void*>(align > 1 ? (address + slack) & ~static_cast<uintptr_t>(slack) : address);
  }

  std::vector<void*> release() { return std::move(tokens_); }

 private:
  const DevbridgeRuntimeAPI& framework_;
  std::vector<void*> tokens_;
};

// A launch handed to a submit hook: owns copies of the parameter values and
// the scratch tokens until the hook runs it (exactly once).
struct Submission {
  const DevbridgeRuntimeAPI* framework = nullptr;
  std::shared_ptr<const LoadedKernel> kernel;
  DevbridgeLaunchConfig config{};
  std::vector<uint64_t> values;  // 8-byte slots; values larger than 8 bytes take several
  std::vector<void*> params;
  std::vector<size_t> sizes;
  std::vector<void*> scratch_tokens;

  ~Submission() {
    for (void* token : scratch_tokens) (void)framework->scratch_free(token);
  }
};

int RunSubmission(void* context, void* stream) {
  std::unique_ptr<Submission> submission(static_cast<Submission*>(context));
  submission->config.stream = stream;
  const LoadedKernel& kernel = *submission->kernel;
  return kernel.runtime->launch(kernel.runtime->self, kernel.device_id, kernel.handles.function,
                                &submission->config);
}

void CheckScratchStream(const DevbridgeRuntimeAPI& framework, const LoadedKernel& kernel, void* stream) {
  void* current = nullptr;
  if (framework.current_stream(kernel.dl_device_type, kernel.device_id, &current) != 0) {
    ThrowFramework(framework, "reading the current stream of " + kernel.device_name);
  }
  if (current != stream) {
    throw Error(ErrorKind::kValue,
                "devbridge: kernel '" + kernel.name + "' needs scratch memory, which comes from the " +
                    "framework allocator on the current stream of " + kernel.device_name + " (" +
                    Hex(current) + "), but it was launched on stream " + Hex(stream) +
                    "; make the launch stream current (`with torch.Stream(...)` / "
                    "torch.accelerator.set_stream) before launching");
  }
}

}  // namespace

void Launch(const DevbridgeRuntimeAPI& framework, const DevbridgeKernelSignature& signature,
            const LaunchRequest& request) {
  const LoadedKernel& kernel = *request.kernel;
  const DevbridgeLaunchMetadata& metadata = signature.metadata;
  if (request.num_params != signature.num_params + 2) {
    throw Error(ErrorKind::kValue, "devbridge: a launch of kernel '" + kernel.name + "' packs " +
                                       std::to_string(request.num_params) + " parameters, but its signature has " +
                                       std::to_string(signature.num_params) + " and the two scratch pointers");
  }
  const uint64_t programs = static_cast<uint64_t>(request.grid[0]) * request.grid[1] * request.grid[2];
  if (programs == 0) return;  // Triton launches nothing for an empty grid

  Scratch scratch(framework);
  void* global = nullptr;
  void* profile = nullptr;
  if (metadata.global_scratch_size > 0 || metadata.profile_scratch_size > 0) {
    CheckScratchStream(framework, kernel, request.stream);
    const uint64_t ctas = static_cast<uint64_t>(request.num_ctas == 0 ? 1 : request.num_ctas);
    if (metadata.global_scratch_size > 0) {
      global = scratch.allocate(kernel, programs * ctas, metadata.global_scratch_size,
                                metadata.global_scratch_align, "global scratch");
    }
    if (metadata.profile_scratch_size > 0) {
      profile = scratch.allocate(kernel, programs * ctas, metadata.profile_scratch_size,
                                 metadata.profile_scratch_align, "profile scratch");
    }
  }
  std::memcpy(request.params[request.num_params - 2], &global, sizeof(void*));
  std::memcpy(request.params[request.num_params - 1], &profile, sizeof(void*));

  DevbridgeLaunchConfig config{};
  std::memcpy(config.grid, request.grid, sizeof(config.grid));
  config.num_warps = request.num_warps;
  config.num_ctas = request.num_ctas;
  config.shared_bytes = request.shared_bytes;
  config.flags = metadata.flags;
  config.stream = request.stream;
  config.params = request.params;
  config.param_sizes = request.param_sizes;
  config.num_params = request.num_params;

  DevbridgeSubmitFn hook = nullptr;
  if (framework.get_submit_hook(kernel.dl_device_type, &hook) != 0) {
    ThrowFramework(framework, "reading the submit hook of " + kernel.device_name);
  }
  if (hook == nullptr) {
    const int status = kernel.runtime->launch(kernel.runtime->self, kernel.device_id,
                                              kernel.handles.function, &config);
    if (status != 0) {  // the message is built on failure only: this is the hot path
      CheckRuntimeStatus(*kernel.runtime, status,
                         ("launching kernel '" + kernel.name + "' on " + kernel.device_name).c_str());
    }
    return;  // ~Scratch releases the blocks: the launch is enqueued
  }

  auto submission = std::make_unique<Submission>();
  submission->framework = &framework;
  submission->kernel = request.kernel;
  submission->config = config;
  size_t slots = 0;
  for (uint32_t i = 0; i < request.num_params; ++i) slots += (request.param_sizes[i] + 7) / 8;
  submission->values.assign(slots, 0);
  submission->params.resize(request.num_params);
  submission->sizes.assign(request.param_sizes, request.param_sizes + request.num_params);
  size_t slot = 0;
  for (uint32_t i = 0; i < request.num_params; ++i) {
    submission->params[i] = &submission->values[slot];
    std::memcpy(&submission->values[slot], request.params[i], request.param_sizes[i]);
    slot += (request.param_sizes[i] + 7) / 8;
  }
  submission->config.params = submission->params.data();
  submission->config.param_sizes = submission->sizes.data();
  submission->scratch_tokens = scratch.release();
  // The hook owns the submission once it returns 0 (it calls run exactly
  // once); on -1 it has not taken it and it is freed here.
  Submission* handed = submission.release();
  if (hook(kernel.dl_device_type, kernel.device_id, request.stream, &RunSubmission, handed) != 0) {
    delete handed;
    throw Error(ErrorKind::kRuntime, "devbridge: the submit hook of " + kernel.device_name +
                                         " refused the launch of kernel '" + kernel.name + "'");
  }
}

}  // namespace launch
}  // namespace devbridge
