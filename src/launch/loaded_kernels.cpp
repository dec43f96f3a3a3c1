#include "launch/loaded_kernels.h"

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "devbridge/error.h"
#include "launch/kernel_runtimes.h"

namespace devbridge {
namespace launch {
namespace {

struct Registry {
  std::shared_mutex mutex;
  std::unordered_map<uint64_t, std::shared_ptr<const LoadedKernel>> kernels;
  uint64_t next_handle = 1;
  std::atomic<uint64_t> generation{0};
};

Registry& TheRegistry() {
  static auto* registry = new Registry();  // never destroyed: kernels may be released at exit
  return *registry;
}

}  // namespace

LoadedKernel::~LoadedKernel() {
  if (runtime != nullptr && handles.module != nullptr) (void)runtime->unload(runtime->self, handles.module);
}

uint64_t LoadKernel(const DevbridgeKernelRuntime* runtime, int32_t dl_device_type, int32_t device_id,
                    std::string device_name, const void* image, size_t image_size,
                    const std::string& kernel_name, uint32_t shared_bytes) {
  ValidateKernelRuntime(runtime);
  auto kernel = std::make_shared<LoadedKernel>();
  DevbridgeLoadedKernel handles{};
  const int status = runtime->load(runtime->self, device_id, image, image_size, kernel_name.c_str(),
                                   shared_bytes, &handles);
  CheckRuntimeStatus(*runtime, status, ("loading kernel '" + kernel_name + "' on " + device_name).c_str());
  kernel->runtime = runtime;
  kernel->dl_device_type = dl_device_type;
  kernel->device_id = device_id;
  kernel->handles = handles;
  kernel->name = kernel_name;
  kernel->device_name = std::move(device_name);
  Registry& registry = TheRegistry();
  std::unique_lock<std::shared_mutex> lock(registry.mutex);
  const uint64_t handle = registry.next_handle++;
  registry.kernels.emplace(handle, std::move(kernel));
  return handle;
}

std::shared_ptr<const LoadedKernel> FindKernel(uint64_t handle) {
  Registry& registry = TheRegistry();
  std::shared_lock<std::shared_mutex> lock(registry.mutex);
  auto it = registry.kernels.find(handle);
  return it == registry.kernels.end() ? nullptr : it->second;
}

bool ReleaseKernel(uint64_t handle) {
  std::shared_ptr<const LoadedKernel> released;  // destroyed after the lock is dropped
  Registry& registry = TheRegistry();
  {
    std::unique_lock<std::shared_mutex> lock(registry.mutex);
    auto it = registry.kernels.find(handle);
    if (it == registry.kernels.end()) return false;
    released = std::move(it->second);
    registry.kernels.erase(it);
    registry.generation.fetch_add(1, std::memory_order_acq_rel);
  }
  return true;
}

uint64_t KernelRegistryGeneration() noexcept {
  return TheRegistry().generation.load(std::memory_order_acquire);
}

}  // namespace launch
}  // namespace devbridge
