#include "launch/launch.h"

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "devbridge/error.h"
#include "launch/kernel_runtimes.h"
#include "launch/param_layout.h"

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

// The Ascend sync-block lock's initialisation, enqueued right before the
// kernel on the kernel's stream (stream order, no host write).
struct LockFill {
  void* lock = nullptr;
  int64_t value = 0;
  uint64_t words = 0;
};

// A launch handed to a submit hook: owns copies of the parameter values, the
// argument block and the scratch tokens until the hook runs it (exactly once).
struct Submission {
  const DevbridgeRuntimeAPI* framework = nullptr;
  std::shared_ptr<const LoadedKernel> kernel;
  DevbridgeLaunchConfig config{};
  std::vector<uint64_t> values;  // 8-byte slots; values larger than 8 bytes take several
  std::vector<void*> params;
  std::vector<size_t> sizes;
  std::vector<unsigned char> block;
  bool fill = false;
  LockFill lock_fill;
  std::vector<void*> scratch_tokens;

  ~Submission() {
    for (void* token : scratch_tokens) (void)framework->scratch_free(token);
  }
};

int FillLock(const LoadedKernel& kernel, const LockFill& fill, void* stream) {
  return RuntimeFillAsync(*kernel.runtime)(kernel.runtime->self, kernel.device_id, fill.lock, fill.value,
                                           fill.words, stream);
}

int RunSubmission(void* context, void* stream) {
  std::unique_ptr<Submission> submission(static_cast<Submission*>(context));
  submission->config.stream = stream;
  const LoadedKernel& kernel = *submission->kernel;
  if (submission->fill && FillLock(kernel, submission->lock_fill, stream) != 0) return -1;
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

// Enqueues the launch `config` describes (and the lock fill before it) on its
// stream, or hands both to the device type's submit hook. The scratch blocks
// are released once enqueued (direct) or once the hook ran the closure.
void Dispatch(const DevbridgeRuntimeAPI& framework, const LaunchRequest& request, const DevbridgeLaunchConfig& config,
              Scratch& scratch, const LockFill* fill) {
  const LoadedKernel& kernel = *request.kernel;
  DevbridgeSubmitFn hook = nullptr;
  if (framework.get_submit_hook(kernel.dl_device_type, &hook) != 0) {
    ThrowFramework(framework, "reading the submit hook of " + kernel.device_name);
  }
  if (hook == nullptr) {
    if (fill != nullptr && FillLock(kernel, *fill, request.stream) != 0) {
      CheckRuntimeStatus(*kernel.runtime, -1,
                         ("initialising the sync-block lock of kernel '" + kernel.name + "' on " +
                          kernel.device_name).c_str());
    }
    const int status = kernel.runtime->launch(kernel.runtime->self, kernel.device_id,
                                              kernel.handles.function, &config);
    if (status != 0) {  // the message is built on failure only: this is the hot path
      CheckRuntimeStatus(*kernel.runtime, status,
                         ("launching kernel '" + kernel.name + "' on " + kernel.device_name).c_str());
    }
    return;  // ~Scratch releases the blocks: the launch is enqueued
  }

  // Under a capture the hook's queue would run the launch later, outside it:
  // devbridge's runtime table refuses unless the plugin declared its hook
  // capture-safe (c_graph_api.h). Asked only on the hook path.
  if (framework.header.minor >= 2 && framework.check_submit_hook != nullptr &&
      framework.check_submit_hook(kernel.dl_device_type, kernel.device_id, request.stream) != 0) {
    ThrowFramework(framework, "launching kernel '" + kernel.name + "' through the submit hook of " +
                                  kernel.device_name);
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
  if (config.arg_block != nullptr) {
    const auto* bytes = static_cast<const unsigned char*>(config.arg_block);
    submission->block.assign(bytes, bytes + config.arg_block_size);
    submission->config.arg_block = submission->block.data();
  }
  if (fill != nullptr) {
    submission->fill = true;
    submission->lock_fill = *fill;
  }
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

const char* LayoutName(uint32_t layout) { return layout == kDevbridgeLayoutAscend ? "Ascend" : "Triton"; }

// The AI cores (or vector cores, twice as many) an Ascend block count is
// capped at, read once per loaded kernel.
uint64_t CoreCount(const LoadedKernel& kernel, uint32_t flags) {
  int64_t cores = kernel.core_count.load(std::memory_order_acquire);
  if (cores < 0) {
    DevbridgeDeviceProperties properties{};
    CheckRuntimeStatus(*kernel.runtime,
                       kernel.runtime->device_properties(kernel.runtime->self, kernel.device_id, &properties),
                       ("reading the core count of " + kernel.device_name).c_str());
    cores = properties.multiprocessor_count > 0 ? properties.multiprocessor_count : 0;
    kernel.core_count.store(cores, std::memory_order_release);
  }
  return static_cast<uint64_t>(cores) * ((flags & DEVBRIDGE_LAUNCH_ASCEND_VECTOR_CORES) ? 2u : 1u);
}

void Store64(void* slot, uint64_t value) { std::memcpy(slot, &value, sizeof(value)); }

// The launch configuration as the request and the signature's metadata give
// it (Triton's layout); the Ascend launch changes its grid and layout.
DevbridgeLaunchConfig ConfigOf(const LaunchRequest& request, const DevbridgeLaunchMetadata& metadata) {
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
  return config;
}

// The Ascend layout: [ffts] [lock, workspace] args gridX gridY gridZ, packed
// into one block, launched 1-D.
void LaunchAscend(const DevbridgeRuntimeAPI& framework, const DevbridgeKernelSignature& signature,
                  const LaunchRequest& request, uint64_t programs) {
  const LoadedKernel& kernel = *request.kernel;
  const DevbridgeLaunchMetadata& metadata = signature.metadata;
  const LayoutSlots slots = SlotsOf(metadata);
  const uint64_t cores = (metadata.flags & DEVBRIDGE_LAUNCH_ASCEND_CAP_BLOCKS) ? CoreCount(kernel, metadata.flags) : 0;
  const uint32_t blocks = AscendBlockCount(request.grid, metadata.flags, cores, kernel.name.c_str());
  const bool simt_only = (metadata.flags & DEVBRIDGE_LAUNCH_ASCEND_SIMT_ONLY) != 0;

  uint32_t slot = 0;
  if (metadata.flags & DEVBRIDGE_LAUNCH_ASCEND_FFTS) {
    auto sync_address = RuntimeHardwareSyncAddress(*kernel.runtime);
    if (sync_address == nullptr) {
      throw Error(ErrorKind::kValue, "devbridge: kernel '" + kernel.name + "' takes an ffts_addr, but the " +
                                         kernel.runtime->name + " kernel runtime has no hardware_sync_address; " +
                                         "launch it on the ascend runtime, or compile it without FFTS "
                                         "(TRITON_DISABLE_FFTS=1)");
    }
    uint64_t address = 0;
    CheckRuntimeStatus(*kernel.runtime, sync_address(kernel.runtime->self, kernel.device_id, &address),
                       ("reading the hardware sync address of " + kernel.device_name).c_str());
    Store64(request.params[slot++], address);
  }

  Scratch scratch(framework);
  void* lock = nullptr;
  void* workspace = nullptr;
  if (!simt_only && (metadata.lock_num > 0 || metadata.workspace_size > 0)) {
    CheckScratchStream(framework, kernel, request.stream);
    if (metadata.lock_num > 0) {
      if (RuntimeFillAsync(*kernel.runtime) == nullptr) {
        throw Error(ErrorKind::kValue, "devbridge: kernel '" + kernel.name + "' uses a sync-block lock, but the " +
                                           kernel.runtime->name + " kernel runtime has no fill_async to "
                                           "initialise it in stream order");
      }
      lock = scratch.allocate(kernel, metadata.lock_num, sizeof(int64_t), 8, "sync-block lock");
    }
    if (metadata.workspace_size > 0) {
      workspace = scratch.allocate(kernel, programs, metadata.workspace_size, 8, "workspace");
    }
  }
  if (!simt_only) {
    Store64(request.params[slot++], reinterpret_cast<uint64_t>(lock));
    Store64(request.params[slot++], reinterpret_cast<uint64_t>(workspace));
  }
  const uint32_t first_grid = request.num_params - slots.trailing;
  for (uint32_t axis = 0; axis < 3; ++axis) {
    const int32_t value = static_cast<int32_t>(request.grid[axis]);
    std::memset(request.params[first_grid + axis], 0, 8);
    std::memcpy(request.params[first_grid + axis], &value, sizeof(value));
  }

  const size_t block_size = AscendBlockSize(request.param_sizes, request.num_params);
  unsigned char stack_block[512];
  std::vector<unsigned char> heap_block;
  unsigned char* block = stack_block;
  if (block_size > sizeof(stack_block)) {
    heap_block.resize(block_size);
    block = heap_block.data();
  }
  PackAscendBlock(request.params, request.param_sizes, request.num_params, block);

  DevbridgeLaunchConfig config = ConfigOf(request, metadata);
  config.grid[0] = blocks;
  config.grid[1] = 1;
  config.grid[2] = 1;
  config.num_ctas = 1;
  config.layout = kDevbridgeLayoutAscend;
  config.arg_block = block;
  config.arg_block_size = block_size;
  LockFill fill{lock, metadata.lock_init_value, metadata.lock_num};
  Dispatch(framework, request, config, scratch, lock != nullptr ? &fill : nullptr);
}

}  // namespace

void Launch(const DevbridgeRuntimeAPI& framework, const DevbridgeKernelSignature& signature,
            const LaunchRequest& request) {
  const LoadedKernel& kernel = *request.kernel;
  const DevbridgeLaunchMetadata& metadata = signature.metadata;
  const LayoutSlots slots = SlotsOf(metadata);
  if (request.num_params != signature.num_params + slots.leading + slots.trailing) {
    throw Error(ErrorKind::kValue, "devbridge: a launch of kernel '" + kernel.name + "' packs " +
                                       std::to_string(request.num_params) + " parameters, but its signature has " +
                                       std::to_string(signature.num_params) + " and its " +
                                       LayoutName(metadata.layout) + " layout adds " +
                                       std::to_string(slots.leading + slots.trailing));
  }
  if ((RuntimeLayouts(*kernel.runtime) & (1u << metadata.layout)) == 0) {
    throw Error(ErrorKind::kValue, std::string("devbridge: kernel '") + kernel.name + "' is laid out for the " +
                                       LayoutName(metadata.layout) + " ABI, which the " + kernel.runtime->name +
                                       " kernel runtime does not launch; load it on a runtime of its hardware");
  }
  const uint64_t programs = static_cast<uint64_t>(request.grid[0]) * request.grid[1] * request.grid[2];
  if (programs == 0) return;  // Triton launches nothing for an empty grid
  if (metadata.layout == kDevbridgeLayoutAscend) {
    LaunchAscend(framework, signature, request, programs);
    return;
  }

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

  Dispatch(framework, request, ConfigOf(request, metadata), scratch, nullptr);
}

}  // namespace launch
}  // namespace devbridge
