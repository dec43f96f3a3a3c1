// The Ascend kernel runtime: NPU binaries (triton-ascend's npubin) loaded and
// launched through CANN's AscendCL runtime API, from a dlopen'ed
// libascendcl.so (never linked, so devbridge imports on machines without
// CANN and the first call that needs it fails naming CANN).
//
// Launches take the Ascend layout only (c_launch_api.h): devbridge's launch
// core packs the argument block triton-ascend's generated launcher would have
// built, and this adapter hands it to aclrtLaunchKernelWithHostArgs (the
// runtime copies host arguments at the call) on the plugin's native stream.
// Nothing here synchronizes; errors are those of the enqueue itself.
//
// Devices: the calling thread must have the device bound (the plugin does
// that for its current device); load binds it when it is not, as
// triton-ascend's loader does with rtSetDevice.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernel_runtimes/cann/acl_api.h"
#include "launch/adapter_error.h"
#include "launch/kernel_runtimes.h"

namespace devbridge {
namespace launch {
namespace {

struct Acl {
  acl::Functions fn{};
  std::string load_error;  // why CANN is unusable ("" when usable)
  std::mutex mutex;
  // Immutable host patterns for non-zero lock fills, one per value, from
  // aclrtMallocHost (pinned, as asynchronous copies need); kept for the
  // process, since queued copies read them when they run.
  std::map<int64_t, std::pair<int64_t*, uint64_t>> patterns;
};

template <class F>
void Resolve(void* library, const char* name, F& out, std::string& error) {
  out = reinterpret_cast<F>(dlsym(library, name));
  if (out == nullptr && error.empty()) {
    error = std::string("libascendcl.so has no function ") + name +
            " (devbridge needs the AscendCL runtime API of CANN 8.2 or newer: aclrtBinaryLoadFromData, "
            "aclrtLaunchKernelWithHostArgs)";
  }
}

Acl& TheAcl() {
  static Acl* acl = [] {
    auto* a = new Acl();  // process lifetime: launches may run during exit
    const char* path = std::getenv("DEVBRIDGE_ASCENDCL_LIBRARY");
    const std::string library_name = path && *path ? path : "libascendcl.so";
    void* library = dlopen(library_name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* why = dlerror();
      a->load_error = "cannot open " + library_name + " (CANN's AscendCL runtime): " +
                      (why ? why : "unknown reason") +
                      "; Ascend kernels need CANN installed and its environment loaded (source "
                      "<ascend-toolkit>/set_env.sh, which puts its lib64 on LD_LIBRARY_PATH)";
      return a;
    }
    std::string& e = a->load_error;
    acl::Functions& f = a->fn;
    Resolve(library, "aclInit", f.aclInit, e);
    Resolve(library, "aclGetRecentErrMsg", f.aclGetRecentErrMsg, e);
    Resolve(library, "aclrtSetDevice", f.aclrtSetDevice, e);
    Resolve(library, "aclrtGetDevice", f.aclrtGetDevice, e);
    Resolve(library, "aclrtGetDeviceCount", f.aclrtGetDeviceCount, e);
    Resolve(library, "aclrtGetDeviceInfo", f.aclrtGetDeviceInfo, e);
    Resolve(library, "aclrtGetSocName", f.aclrtGetSocName, e);
    Resolve(library, "aclrtPointerGetAttributes", f.aclrtPointerGetAttributes, e);
    Resolve(library, "aclrtMallocHost", f.aclrtMallocHost, e);
    Resolve(library, "aclrtMemcpyAsync", f.aclrtMemcpyAsync, e);
    Resolve(library, "aclrtMemsetAsync", f.aclrtMemsetAsync, e);
    Resolve(library, "aclrtBinaryLoadFromData", f.aclrtBinaryLoadFromData, e);
    Resolve(library, "aclrtBinaryUnLoad", f.aclrtBinaryUnLoad, e);
    Resolve(library, "aclrtBinaryGetFunction", f.aclrtBinaryGetFunction, e);
    Resolve(library, "aclrtLaunchKernelWithHostArgs", f.aclrtLaunchKernelWithHostArgs, e);
    Resolve(library, "aclrtGetHardwareSyncAddr", f.aclrtGetHardwareSyncAddr, e);
    if (e.empty()) {
      // The plugin normally initialised ACL already; a second aclInit says so.
      const acl::Error status = f.aclInit(nullptr);
      if (status != acl::kSuccess && status != acl::kErrorRepeatInitialize) {
        e = "aclInit failed with ACL error " + std::to_string(status) + ": no usable CANN runtime or NPU";
      }
    }
    return a;
  }();
  if (!acl->load_error.empty()) throw std::runtime_error(acl->load_error);
  return *acl;
}

void Check(Acl& a, acl::Error status, const std::string& what) {
  if (status == acl::kSuccess) return;
  const char* message = a.fn.aclGetRecentErrMsg();
  throw std::runtime_error(what + " failed with ACL error " + std::to_string(status) +
                           (message && *message ? std::string(": ") + message : std::string()));
}

void BindDevice(Acl& a, int32_t device_id) {
  int32_t current = -1;
  if (a.fn.aclrtGetDevice(&current) != acl::kSuccess || current != device_id) {
    Check(a, a.fn.aclrtSetDevice(device_id), "aclrtSetDevice(" + std::to_string(device_id) + ")");
  }
}

// Kernel names come as triton-ascend gives them to load_binary:
// "<symbol> <mix_mode>"; mix_mode "aiv" is a vector-core binary.
struct KernelName {
  std::string symbol;
  bool vector_core = false;
};
KernelName ParseKernelName(const char* name) {
  KernelName parsed;
  const std::string text = name;
  const size_t space = text.find(' ');
  parsed.symbol = text.substr(0, space);
  if (space != std::string::npos) parsed.vector_core = text.substr(space + 1) == "aiv";
  return parsed;
}

struct Module {
  acl::BinHandle binary = nullptr;
};

int Load(void*, int32_t device_id, const void* image, size_t image_size, const char* kernel_name, uint32_t,
         DevbridgeLoadedKernel* out) {
  return AdapterCall([&] {
    if (image == nullptr || image_size == 0) throw std::runtime_error("the NPU binary image is empty");
    if (kernel_name == nullptr || *kernel_name == '\0') throw std::runtime_error("no kernel name");
    if (out == nullptr) throw std::runtime_error("out is NULL");
    Acl& a = TheAcl();
    BindDevice(a, device_id);
    const KernelName name = ParseKernelName(kernel_name);
    acl::BinaryLoadOption option{};
    option.type = acl::kBinaryLoadOptMagic;
    option.value.magic = name.vector_core ? acl::kBinaryMagicElfVectorCore : acl::kBinaryMagicElfAicore;
    acl::BinaryLoadOptions options{&option, 1};
    auto module = std::make_unique<Module>();
    Check(a, a.fn.aclrtBinaryLoadFromData(image, image_size, &options, &module->binary), "aclrtBinaryLoadFromData");
    acl::FuncHandle function = nullptr;
    const acl::Error found = a.fn.aclrtBinaryGetFunction(module->binary, name.symbol.c_str(), &function);
    if (found != acl::kSuccess) {
      (void)a.fn.aclrtBinaryUnLoad(module->binary);
      Check(a, found, "aclrtBinaryGetFunction('" + name.symbol + "')");
    }
    out->module = module.release();
    out->function = function;
    out->num_regs = 0;
    out->num_spills = 0;
    out->max_threads = 1 << 30;  // Triton's thread check does not apply to NPU blocks
  });
}

int Unload(void*, void* module) {
  return AdapterCall([&] {
    std::unique_ptr<Module> owned(static_cast<Module*>(module));
    Acl& a = TheAcl();
    Check(a, a.fn.aclrtBinaryUnLoad(owned->binary), "aclrtBinaryUnLoad");
  });
}

int Launch(void*, int32_t, void* function, const DevbridgeLaunchConfig* config) {
  return AdapterCall([&] {
    if (config->layout != kDevbridgeLayoutAscend || config->arg_block == nullptr) {
      throw std::runtime_error("the ascend kernel runtime launches the Ascend layout only");
    }
    if (config->grid[1] != 1 || config->grid[2] != 1) {
      throw std::runtime_error("NPU launches are 1-D: the grid must be {blocks, 1, 1}");
    }
    Acl& a = TheAcl();
    Check(a,
          a.fn.aclrtLaunchKernelWithHostArgs(function, config->grid[0], config->stream, nullptr,
                                             const_cast<void*>(config->arg_block), config->arg_block_size,
                                             nullptr, 0),
          "aclrtLaunchKernelWithHostArgs");
  });
}

int PointerDevice(void*, uint64_t address, int32_t* out_device_id) {
  return AdapterCall([&] {
    Acl& a = TheAcl();
    acl::PtrAttributes attributes{};
    const acl::Error status = a.fn.aclrtPointerGetAttributes(reinterpret_cast<const void*>(address), &attributes);
    // Any failure or a non-device location is "not device memory": the
    // launcher then names the argument (as triton-ascend's check does).
    *out_device_id = status == acl::kSuccess && attributes.location.type == acl::kMemLocationDevice
                         ? static_cast<int32_t>(attributes.location.id)
                         : -1;
  });
}

int DeviceProperties(void*, int32_t device_id, DevbridgeDeviceProperties* out) {
  return AdapterCall([&] {
    Acl& a = TheAcl();
    uint32_t count = 0;
    Check(a, a.fn.aclrtGetDeviceCount(&count), "aclrtGetDeviceCount");
    if (device_id < 0 || static_cast<uint32_t>(device_id) >= count) {
      throw std::runtime_error("NPU " + std::to_string(device_id) + " does not exist (" + std::to_string(count) +
                               " devices)");
    }
    int64_t cores = 0;
    Check(a, a.fn.aclrtGetDeviceInfo(static_cast<uint32_t>(device_id), acl::kDevAttrAicoreCoreNum, &cores),
          "aclrtGetDeviceInfo(ACL_DEV_ATTR_AICORE_CORE_NUM)");
    out->arch = 0;  // the target is a SoC name: AscendSocName()
    out->warp_size = 1;
    out->multiprocessor_count = static_cast<int32_t>(cores);
    out->max_shared_mem = 1;  // what triton-ascend's driver reports (no shared memory model)
    out->max_num_regs = 0;
    out->max_threads_per_block = 1 << 30;
  });
}

// Lock initialisation in stream order: aclrtMemsetAsync for 0, otherwise an
// asynchronous host-to-device copy of an immutable pinned pattern.
int FillAsync(void*, int32_t, void* dst, int64_t value, uint64_t count, void* stream) {
  return AdapterCall([&] {
    Acl& a = TheAcl();
    const size_t bytes = static_cast<size_t>(count) * sizeof(int64_t);
    if (value == 0) {
      Check(a, a.fn.aclrtMemsetAsync(dst, bytes, 0, bytes, stream), "aclrtMemsetAsync");
      return;
    }
    const int64_t* pattern = nullptr;
    {
      std::lock_guard<std::mutex> lock(a.mutex);
      auto& slot = a.patterns[value];
      if (slot.second < count) {  // grow; the outgrown pattern stays (queued copies may read it)
        void* host = nullptr;
        Check(a, a.fn.aclrtMallocHost(&host, bytes), "aclrtMallocHost");
        auto* words = static_cast<int64_t*>(host);
        for (uint64_t i = 0; i < count; ++i) words[i] = value;
        slot = {words, count};
      }
      pattern = slot.first;
    }
    Check(a, a.fn.aclrtMemcpyAsync(dst, bytes, pattern, bytes, acl::kMemcpyHostToDevice, stream),
          "aclrtMemcpyAsync(host to device)");
  });
}

int HardwareSyncAddress(void*, int32_t, uint64_t* out_address) {
  return AdapterCall([&] {
    Acl& a = TheAcl();
    void* address = nullptr;
    Check(a, a.fn.aclrtGetHardwareSyncAddr(&address), "aclrtGetHardwareSyncAddr");
    *out_address = reinterpret_cast<uint64_t>(address);
  });
}

const char* LastError(void*) { return AdapterLastError().c_str(); }

}  // namespace

const DevbridgeKernelRuntime* AscendKernelRuntime() noexcept {
  static const DevbridgeKernelRuntime table = [] {
    DevbridgeKernelRuntime t = MakeKernelRuntime("ascend", nullptr, &Load, &Unload, &Launch, &PointerDevice,
                                                 &LastError, &DeviceProperties);
    t.layouts = 1u << kDevbridgeLayoutAscend;
    t.fill_async = &FillAsync;
    t.hardware_sync_address = &HardwareSyncAddress;
    return t;
  }();
  return &table;
}

std::string AscendSocName() {
  Acl& a = TheAcl();
  const char* name = a.fn.aclrtGetSocName();
  if (name == nullptr || *name == '\0') throw std::runtime_error("aclrtGetSocName returned no SoC name");
  return name;
}

}  // namespace launch
}  // namespace devbridge
