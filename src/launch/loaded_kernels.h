// Kernels loaded on a device through a kernel runtime, named by the integer
// handles Triton passes around as `function` (and `module`).
//
// A handle is an id that is never reused, so a stale or forged integer is
// refused with an error instead of being dereferenced. A kernel is unloaded
// from its runtime when it is released *and* no launch still holds it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "devbridge/c_launch_api.h"

namespace devbridge {
namespace launch {

struct LoadedKernel {
  const DevbridgeKernelRuntime* runtime = nullptr;
  int32_t dl_device_type = 0;  // DLPack device type pointer arguments must have
  int32_t device_id = 0;
  DevbridgeLoadedKernel handles{};
  std::string name;         // the kernel's symbol
  std::string device_name;  // "simdev:0", for messages
  // The device's AI core count (Ascend block cap), read from the runtime on
  // the first launch that needs it; -1 until then.
  mutable std::atomic<int64_t> core_count{-1};

  LoadedKernel() = default;
  LoadedKernel(const LoadedKernel&) = delete;
  LoadedKernel& operator=(const LoadedKernel&) = delete;
  ~LoadedKernel();  // runtime->unload(handles.module); errors are dropped
};

// Loads `image` through `runtime` and registers the kernel. Throws
// devbridge::Error with the runtime's message on failure.
uint64_t LoadKernel(const DevbridgeKernelRuntime* runtime, int32_t dl_device_type, int32_t device_id,
                    std::string device_name, const void* image, size_t image_size,
                    const std::string& kernel_name, uint32_t shared_bytes);

// The kernel of `handle`, or nullptr when no live kernel has it.
std::shared_ptr<const LoadedKernel> FindKernel(uint64_t handle);

// Forgets `handle` (the module is unloaded once no launch holds it). Returns
// false when the handle was not live.
bool ReleaseKernel(uint64_t handle);

// Bumped by every ReleaseKernel: a cached FindKernel result is valid while it
// is unchanged.
uint64_t KernelRegistryGeneration() noexcept;

}  // namespace launch
}  // namespace devbridge
