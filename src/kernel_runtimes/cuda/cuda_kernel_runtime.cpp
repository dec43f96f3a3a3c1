// The CUDA kernel runtime: cubins loaded and launched through the driver API
// of a dlopen'ed libcuda.so.1 (never linked, so devbridge imports on machines
// without a GPU).
//
// Contexts: every device's kernels live in that device's *primary* context,
// the one the CUDA runtime API (and so PyTorch and runtime-API plugins such as
// cudadev) uses. A launch makes the launch device's primary context current
// when another one is; Triton's own launcher instead falls back to device 0's.
#include <dlfcn.h>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>

#include "launch/adapter_error.h"
#include "kernel_runtimes/cuda/cuda_driver_api.h"
#include "launch/kernel_runtimes.h"

namespace devbridge {
namespace launch {
namespace {

using namespace cuda_api;

constexpr int kMaxDevices = 128;
constexpr uint32_t kDefaultSharedLimit = 48 * 1024;

struct CudaDriver {
  DriverFunctions fn{};
  std::string load_error;  // why the driver is unusable ("" when usable)
  // Retained lazily, never released; read without the mutex on every launch.
  std::array<std::atomic<CUcontext>, kMaxDevices> primary{};
  std::mutex primary_mutex;
};

template <class F>
void Resolve(void* library, const char* name, F*& out, std::string& error) {
  out = reinterpret_cast<F*>(dlsym(library, name));
  if (out == nullptr && error.empty()) {
    error = std::string("libcuda.so.1 has no function ") + name +
            " (devbridge needs a CUDA 12 or newer driver)";
  }
}

CudaDriver& Driver() {
  static CudaDriver* driver = [] {
    auto* d = new CudaDriver();  // process lifetime: kernels may launch during exit
    void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* why = dlerror();
      d->load_error = std::string("cannot open libcuda.so.1 (the NVIDIA driver library): ") +
                      (why ? why : "unknown reason") +
                      "; CUDA kernels need a machine with an NVIDIA driver";
      return d;
    }
    std::string& e = d->load_error;
    DriverFunctions& f = d->fn;
    Resolve(library, "cuInit", f.cuInit, e);
    Resolve(library, "cuGetErrorName", f.cuGetErrorName, e);
    Resolve(library, "cuGetErrorString", f.cuGetErrorString, e);
    Resolve(library, "cuDeviceGet", f.cuDeviceGet, e);
    Resolve(library, "cuDeviceGetAttribute", f.cuDeviceGetAttribute, e);
    Resolve(library, "cuDevicePrimaryCtxRetain", f.cuDevicePrimaryCtxRetain, e);
    Resolve(library, "cuCtxGetCurrent", f.cuCtxGetCurrent, e);
    Resolve(library, "cuCtxSetCurrent", f.cuCtxSetCurrent, e);
    Resolve(library, "cuModuleLoadData", f.cuModuleLoadData, e);
    Resolve(library, "cuModuleUnload", f.cuModuleUnload, e);
    Resolve(library, "cuModuleGetFunction", f.cuModuleGetFunction, e);
    Resolve(library, "cuFuncGetAttribute", f.cuFuncGetAttribute, e);
    Resolve(library, "cuFuncSetAttribute", f.cuFuncSetAttribute, e);
    Resolve(library, "cuFuncSetCacheConfig", f.cuFuncSetCacheConfig, e);
    Resolve(library, "cuPointerGetAttribute", f.cuPointerGetAttribute, e);
    Resolve(library, "cuLaunchKernel", f.cuLaunchKernel, e);
    Resolve(library, "cuLaunchKernelEx", f.cuLaunchKernelEx, e);
    if (e.empty() && f.cuInit(0) != CUDA_SUCCESS) e = "cuInit(0) failed: no usable CUDA device";
    return d;
  }();
  if (!driver->load_error.empty()) throw std::runtime_error(driver->load_error);
  return *driver;
}

[[noreturn]] void ThrowCuda(CudaDriver& d, CUresult status, const std::string& what) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.fn.cuGetErrorName(status, &name) != CUDA_SUCCESS) name = nullptr;
  if (d.fn.cuGetErrorString(status, &text) != CUDA_SUCCESS) text = nullptr;
  std::ostringstream message;
  message << what << ": " << (name ? name : "CUDA error") << " (" << status << ")";
  if (text) message << ": " << text;
  throw std::runtime_error(message.str());
}

void Check(CudaDriver& d, CUresult status, const char* what) {
  if (status != CUDA_SUCCESS) ThrowCuda(d, status, what);
}

CUcontext PrimaryContext(CudaDriver& d, int32_t device_id) {
  if (device_id < 0 || device_id >= kMaxDevices) {
    throw std::runtime_error("device index " + std::to_string(device_id) + " is out of range");
  }
  std::lock_guard<std::mutex> lock(d.primary_mutex);
  std::atomic<CUcontext>& slot = d.primary[static_cast<size_t>(device_id)];
  CUcontext context = slot.load(std::memory_order_acquire);
  if (context == nullptr) {
    CUdevice device = 0;
    Check(d, d.fn.cuDeviceGet(&device, device_id), "cuDeviceGet");
    Check(d, d.fn.cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
    slot.store(context, std::memory_order_release);
  }
  return context;
}

// Makes `device_id`'s primary context current on this thread (a no-op when it
// already is: one cuCtxGetCurrent).
void UsePrimaryContext(CudaDriver& d, int32_t device_id) {
  CUcontext wanted = device_id >= 0 && device_id < kMaxDevices
                         ? d.primary[static_cast<size_t>(device_id)].load(std::memory_order_acquire)
                         : nullptr;
  if (wanted == nullptr) wanted = PrimaryContext(d, device_id);
  CUcontext current = nullptr;
  Check(d, d.fn.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current != wanted) Check(d, d.fn.cuCtxSetCurrent(wanted), "cuCtxSetCurrent");
}

int Load(void*, int32_t device_id, const void* image, size_t image_size, const char* kernel_name,
         uint32_t shared_bytes, DevbridgeLoadedKernel* out) {
  return AdapterCall([&] {
    if (image == nullptr || image_size == 0) throw std::runtime_error("the cubin image is empty");
    if (kernel_name == nullptr || *kernel_name == '\0') throw std::runtime_error("no kernel name");
    if (out == nullptr) throw std::runtime_error("out is NULL");
    CudaDriver& d = Driver();
    UsePrimaryContext(d, device_id);
    CUmodule module = nullptr;
    Check(d, d.fn.cuModuleLoadData(&module, image), "cuModuleLoadData");
    try {
      CUfunction function = nullptr;
      const std::string lookup = std::string("cuModuleGetFunction('") + kernel_name + "')";
      Check(d, d.fn.cuModuleGetFunction(&function, module, kernel_name), lookup.c_str());
      int regs = 0, local_bytes = 0, max_threads = 0, static_shared = 0;
      Check(d, d.fn.cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, function), "cuFuncGetAttribute");
      Check(d, d.fn.cuFuncGetAttribute(&local_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, function),
            "cuFuncGetAttribute");
      Check(d, d.fn.cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function),
            "cuFuncGetAttribute");
      if (shared_bytes > kDefaultSharedLimit) {
        // Above 48 KB a function must opt in, up to the device's limit less its
        // static shared memory (the same rule Triton's own loader applies).
        CUdevice device = 0;
        int optin = 0;
        Check(d, d.fn.cuDeviceGet(&device, device_id), "cuDeviceGet");
        Check(d, d.fn.cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                           device),
              "cuDeviceGetAttribute");
        Check(d, d.fn.cuFuncGetAttribute(&static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function),
              "cuFuncGetAttribute");
        const long long available = static_cast<long long>(optin) - static_shared;
        if (static_cast<long long>(shared_bytes) > available) {
          throw std::runtime_error("kernel '" + std::string(kernel_name) + "' needs " +
                                   std::to_string(shared_bytes) +
                                   " bytes of shared memory, but CUDA device " +
                                   std::to_string(device_id) + " allows at most " +
                                   std::to_string(available) +
                                   " per block; recompile it with smaller blocks or fewer stages");
        }
        Check(d, d.fn.cuFuncSetCacheConfig(function, CU_FUNC_CACHE_PREFER_SHARED), "cuFuncSetCacheConfig");
        Check(d, d.fn.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         static_cast<int>(available)),
              "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
      }
      out->module = module;
      out->function = function;
      out->num_regs = regs;
      out->num_spills = local_bytes / 4;
      out->max_threads = max_threads;
    } catch (...) {
      d.fn.cuModuleUnload(module);
      throw;
    }
  });
}

int Unload(void*, void* module) {
  return AdapterCall([&] {
    CudaDriver& d = Driver();
    Check(d, d.fn.cuModuleUnload(static_cast<CUmodule>(module)), "cuModuleUnload");
  });
}

int Launch(void*, int32_t device_id, void* function, const DevbridgeLaunchConfig* config) {
  return AdapterCall([&] {
    CudaDriver& d = Driver();
    UsePrimaryContext(d, device_id);
    auto* f = static_cast<CUfunction>(function);
    auto* stream = static_cast<CUstream>(config->stream);
    const unsigned int block_x = 32u * config->num_warps;
    const unsigned int num_ctas = config->num_ctas == 0 ? 1u : config->num_ctas;
    const bool plain = num_ctas == 1 && config->flags == 0;
    if (plain) {
      // The common case takes cuLaunchKernel, the cheapest entry point.
      Check(d, d.fn.cuLaunchKernel(f, config->grid[0], config->grid[1], config->grid[2], block_x, 1, 1,
                                   config->shared_bytes, stream, config->params, nullptr),
            "cuLaunchKernel");
      return;
    }
    CUlaunchAttribute attributes[4];
    std::memset(attributes, 0, sizeof(attributes));
    unsigned int count = 0;
    if (config->flags & DEVBRIDGE_LAUNCH_PDL) {
      attributes[count].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attributes[count++].value.programmaticStreamSerializationAllowed = 1;
    }
    if (config->flags & DEVBRIDGE_LAUNCH_COOPERATIVE) {
      attributes[count].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
      attributes[count++].value.cooperative = 1;
    }
    if (num_ctas != 1) {
      attributes[count].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attributes[count].value.clusterDim.x = num_ctas;
      attributes[count].value.clusterDim.y = 1;
      attributes[count++].value.clusterDim.z = 1;
      attributes[count].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
      attributes[count++].value.clusterSchedulingPolicyPreference = CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
      if (num_ctas == 16) {
        Check(d, d.fn.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
              "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)");
      }
    }
    CUlaunchConfig launch{};
    launch.gridDimX = config->grid[0] * num_ctas;
    launch.gridDimY = config->grid[1];
    launch.gridDimZ = config->grid[2];
    launch.blockDimX = block_x;
    launch.blockDimY = 1;
    launch.blockDimZ = 1;
    launch.sharedMemBytes = config->shared_bytes;
    launch.hStream = stream;
    launch.attrs = attributes;
    launch.numAttrs = count;
    Check(d, d.fn.cuLaunchKernelEx(&launch, f, config->params, nullptr), "cuLaunchKernelEx");
  });
}

int PointerDevice(void*, uint64_t address, int32_t* out_device_id) {
  return AdapterCall([&] {
    CudaDriver& d = Driver();
    int ordinal = -1;
    const CUresult status =
        d.fn.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address);
    if (status == CUDA_ERROR_INVALID_VALUE) {
      *out_device_id = -1;  // not memory CUDA knows: host memory
      return;
    }
    Check(d, status, "cuPointerGetAttribute");
    *out_device_id = ordinal;
  });
}

int DeviceProperties(void*, int32_t device_id, DevbridgeDeviceProperties* out) {
  return AdapterCall([&] {
    CudaDriver& d = Driver();
    CUdevice device = 0;
    Check(d, d.fn.cuDeviceGet(&device, device_id), "cuDeviceGet");
    auto attribute = [&](int which) {
      int value = 0;
      Check(d, d.fn.cuDeviceGetAttribute(&value, which, device), "cuDeviceGetAttribute");
      return value;
    };
    out->arch = 10 * attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) +
                attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    out->warp_size = attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    out->multiprocessor_count = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    out->max_shared_mem = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    out->max_num_regs = attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
    out->max_threads_per_block = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  });
}

const char* LastError(void*) { return AdapterLastError().c_str(); }

}  // namespace

const DevbridgeKernelRuntime* CudaKernelRuntime() noexcept {
  static const DevbridgeKernelRuntime table = MakeKernelRuntime(
      "cuda", nullptr, &Load, &Unload, &Launch, &PointerDevice, &LastError, &DeviceProperties);
  return &table;
}

}  // namespace launch
}  // namespace devbridge
