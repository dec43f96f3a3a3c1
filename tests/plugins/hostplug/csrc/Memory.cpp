// Device memory is plain host memory (what devbridge's host Triton target
// requires: a data pointer the CPU can read and write). No caching and no
// stream bookkeeping: every operator queued on a stream holds the storages it
// touches until it has run (Ops.h), so a block is freed only when no stream
// can still use it. Also the PrivateUse1 hooks, which ask about memory and
// generators, and which torch.accelerator requires to be registered.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "Ops.h"
#include "Runtime.h"

namespace hostplug {
namespace {

// Which device each live block belongs to, for getDeviceFromPtr.
std::mutex blocks_mutex;
std::map<uintptr_t, std::pair<size_t, c10::DeviceIndex>> blocks;

void freeBlock(void* data) {
  {
    std::lock_guard<std::mutex> lock(blocks_mutex);
    blocks.erase(reinterpret_cast<uintptr_t>(data));
  }
  std::free(data);
}

struct HostAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::DeviceIndex device = currentDevice();  // factories set the device first
    const c10::Device where(c10::DeviceType::PrivateUse1, device);
    if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &freeBlock, where);
    void* data = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
    TORCH_CHECK(data != nullptr, "hostplug: out of memory allocating ", nbytes, " bytes");
    {
      std::lock_guard<std::mutex> lock(blocks_mutex);
      blocks[reinterpret_cast<uintptr_t>(data)] = {nbytes, device};
    }
    return c10::DataPtr(data, data, &freeBlock, where);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &freeBlock; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

HostAllocator allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &allocator);

struct Hooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }  // nothing to initialise
  c10::DeviceIndex deviceCount() const override { return kDeviceCount; }
  void setCurrentDevice(c10::DeviceIndex device) const override { hostplug::setCurrentDevice(device); }
  c10::DeviceIndex getCurrentDevice() const override { return currentDevice(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const c10::DeviceIndex previous = currentDevice();
    hostplug::setCurrentDevice(device);
    return previous;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override { return exchangeDevice(device); }
  at::Device getDeviceFromPtr(void* data) const override {
    const auto address = reinterpret_cast<uintptr_t>(data);
    std::lock_guard<std::mutex> lock(blocks_mutex);
    auto after = blocks.upper_bound(address);
    TORCH_CHECK(after != blocks.begin(), "hostplug: ", data, " is not hostplug memory");
    const auto& [start, block] = *std::prev(after);
    TORCH_CHECK(address < start + block.first, "hostplug: ", data, " is not hostplug memory");
    return at::Device(c10::DeviceType::PrivateUse1, block.second);
  }
  // No generator of its own: random operators run on the CPU through the
  // fallback (Fallback.cpp) and draw from the CPU default generator.
  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override {
    return at::detail::getDefaultCPUGenerator();
  }
  bool isPinnedPtr(const void*) const override { return false; }
  c10::Allocator* getPinnedMemoryAllocator() const override { return c10::GetCPUAllocator(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t nbytes) const override {
    resizeStorage(storage, nbytes);
  }
};

[[maybe_unused]] const bool hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new Hooks());
  return true;
}();

}  // namespace
}  // namespace hostplug
