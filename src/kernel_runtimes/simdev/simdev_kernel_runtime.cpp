// The simdev kernel runtime: shared libraries of host-function kernels
// (sdKernelFn_t) loaded and launched through simdev's C API, which is looked
// up with dlsym in the simdev library the plugin itself loaded. devbridge
// links no plugin library: simdev is one vendor among others here.
//
// A binary is the bytes of a shared library. simdev loads kernels from a path
// (dlopen), so the bytes go to a temporary file that is removed right after
// the load (the mapping keeps its contents).
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "devbridge/error.h"
#include "launch/adapter_error.h"
#include "launch/kernel_runtimes.h"

namespace devbridge {
namespace launch {
namespace {

// simdev/runtime.h's functions and types, as devbridge uses them (the header
// is the plugin's; its values are stable by its own rule).
using sdError = int;
constexpr sdError kSdSuccess = 0;
constexpr sdError kSdErrorInvalidDevicePointer = 4;

struct SimdevFunctions {
  const char* (*sdGetLastErrorString)();
  const char* (*sdGetErrorName)(sdError);
  sdError (*sdModuleLoad)(void** out_module, const char* path);
  sdError (*sdModuleUnload)(void* module);
  sdError (*sdModuleGetFunction)(void** out_function, void* module, const char* name);
  sdError (*sdLaunchKernel)(void* function, uint32_t gx, uint32_t gy, uint32_t gz, void** args,
                            const size_t* arg_sizes, int num_args, void* stream);
  sdError (*sdPointerGetDevice)(const void* pointer, int* out_device);
  sdError (*sdGetDeviceCount)(int* out_count);
  sdError (*sdMalloc)(void** out_ptr, size_t size, int device);
  sdError (*sdMemsetAsync)(void* dst, int value, size_t size, void* stream);
  sdError (*sdMemcpyAsync)(void* dst, const void* src, size_t size, int kind, void* stream);
};
constexpr int kSdMemcpyHostToDevice = 1;

struct SimdevRuntime {
  SimdevFunctions fn{};
  std::string path;
  DevbridgeKernelRuntime table{};
  // The Ascend layout's stand-ins (simdev is the CI target of that layout):
  // a per-device "hardware sync" block, and immutable host patterns for lock
  // fills. Both live for the process: queued copies read the patterns when
  // they run.
  std::mutex mutex;
  std::map<int32_t, void*> sync_blocks;
  std::map<int64_t, std::unique_ptr<std::vector<int64_t>>> patterns;
  std::vector<std::unique_ptr<std::vector<int64_t>>> retired;  // outgrown patterns still queued copies may read
};

void Check(const SimdevRuntime& r, sdError status, const char* what) {
  if (status == kSdSuccess) return;
  throw std::runtime_error(std::string(what) + " failed: " + r.fn.sdGetErrorName(status) + ": " +
                           r.fn.sdGetLastErrorString());
}

// Writes `image` to a file of its own and returns the path. The name is
// unique in the process (pid + counter): the dynamic loader returns an
// already loaded library for a name it has seen, so names must never repeat
// (a /proc/self/fd path of a memfd would, once the fd number is reused).
std::string WriteImage(const void* image, size_t size) {
  static std::atomic<uint64_t> counter{0};
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/devbridge-simdev-kernels-" +
                           std::to_string(getpid()) + "-" + std::to_string(counter.fetch_add(1)) + ".so";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot create " + path + ": " + std::strerror(errno));
  const auto* bytes = static_cast<const char*>(image);
  size_t written = 0;
  while (written < size) {
    const ssize_t n = write(fd, bytes + written, size - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int saved = errno;
      close(fd);
      unlink(path.c_str());
      throw std::runtime_error("writing the kernel image to " + path + " failed: " + std::strerror(saved));
    }
    written += static_cast<size_t>(n);
  }
  close(fd);
  return path;
}

// Loads `image` as a simdev module and looks up `kernel_name`. With a
// setup symbol, calls that extern "C" function of the freshly loaded copy
// with `setup_arg` before anything can launch it (the library file is still
// there to be opened by path, and the copy is this load's own).
void LoadModule(const SimdevRuntime& r, const void* image, size_t image_size, const char* kernel_name,
                const char* setup_symbol, const void* setup_arg, DevbridgeLoadedKernel* out) {
  if (image == nullptr || image_size == 0) throw std::runtime_error("the kernel library image is empty");
  if (kernel_name == nullptr || *kernel_name == '\0') throw std::runtime_error("no kernel name");
  if (out == nullptr) throw std::runtime_error("out is NULL");
  const std::string path = WriteImage(image, image_size);
  struct Unlink {
    const std::string& path;
    ~Unlink() { unlink(path.c_str()); }  // the mapping keeps the file's contents alive
  } unlink_after{path};
  void* module = nullptr;
  Check(r, r.fn.sdModuleLoad(&module, path.c_str()), "sdModuleLoad");
  try {
    void* function = nullptr;
    const sdError found = r.fn.sdModuleGetFunction(&function, module, kernel_name);
    if (found != kSdSuccess) {
      throw std::runtime_error(std::string("sdModuleGetFunction('") + kernel_name + "') failed: " +
                               r.fn.sdGetErrorName(found) + ": " + r.fn.sdGetLastErrorString());
    }
    if (setup_symbol != nullptr) {
      void* copy = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);  // the copy simdev loaded
      void* setup = copy ? dlsym(copy, setup_symbol) : nullptr;
      if (setup == nullptr) {
        if (copy) dlclose(copy);
        throw std::runtime_error(std::string("the kernel library has no function ") + setup_symbol);
      }
      reinterpret_cast<void (*)(const void*)>(setup)(setup_arg);
      dlclose(copy);
    }
    out->module = module;
    out->function = function;
    out->num_regs = 0;
    out->num_spills = 0;
    out->max_threads = 1 << 30;  // a program is one host call: no thread limit
  } catch (...) {
    r.fn.sdModuleUnload(module);
    throw;
  }
}

int Load(void* self, int32_t, const void* image, size_t image_size, const char* kernel_name, uint32_t,
         DevbridgeLoadedKernel* out) {
  // simdev modules serve every device; launches name theirs.
  return AdapterCall([&] {
    LoadModule(*static_cast<const SimdevRuntime*>(self), image, image_size, kernel_name, nullptr, nullptr, out);
  });
}

int Unload(void* self, void* module) {
  return AdapterCall([&] {
    const auto& r = *static_cast<const SimdevRuntime*>(self);
    Check(r, r.fn.sdModuleUnload(module), "sdModuleUnload");
  });
}

int Launch(void* self, int32_t, void* function, const DevbridgeLaunchConfig* config) {
  return AdapterCall([&] {
    const auto& r = *static_cast<const SimdevRuntime*>(self);
    if (config->layout == kDevbridgeLayoutAscend) {
      // As an NPU kernel receives it: one packed argument block, a 1-D grid
      // of blocks; args[0] points at simdev's copy of the block.
      void* block = const_cast<void*>(config->arg_block);
      const size_t size = config->arg_block_size;
      Check(r, r.fn.sdLaunchKernel(function, config->grid[0], 1, 1, &block, &size, 1, config->stream),
            "sdLaunchKernel");
      return;
    }
    // simdev programs are host calls: warps, clusters and shared memory do
    // not apply; the grid is the program grid.
    Check(r,
          r.fn.sdLaunchKernel(function, config->grid[0], config->grid[1], config->grid[2], config->params,
                              config->param_sizes, static_cast<int>(config->num_params), config->stream),
          "sdLaunchKernel");
  });
}

int PointerDevice(void* self, uint64_t address, int32_t* out_device_id) {
  return AdapterCall([&] {
    const auto& r = *static_cast<const SimdevRuntime*>(self);
    int device = -1;
    const sdError status = r.fn.sdPointerGetDevice(reinterpret_cast<const void*>(address), &device);
    if (status == kSdErrorInvalidDevicePointer) {
      *out_device_id = -1;
      return;
    }
    Check(r, status, "sdPointerGetDevice");
    *out_device_id = device;
  });
}

// simdev has no instruction set: a program is one host call, and there is one
// "multiprocessor" (the stream's worker). It has no warps either; it reports
// 32, the width Triton's and Inductor's heuristics are written for (with 1,
// Inductor's reduction splitting builds graphs its own checks reject).
int DeviceProperties(void* self, int32_t device_id, DevbridgeDeviceProperties* out) {
  return AdapterCall([&] {
    const auto& r = *static_cast<const SimdevRuntime*>(self);
    int count = 0;
    Check(r, r.fn.sdGetDeviceCount(&count), "sdGetDeviceCount");
    if (device_id < 0 || device_id >= count) {
      throw std::runtime_error("simdev device " + std::to_string(device_id) + " does not exist (" +
                               std::to_string(count) + " devices)");
    }
    FillInterpretedDeviceProperties(out);
  });
}

// Lock fills as the CANN runtime does them: a stream-ordered memset for 0,
// otherwise an asynchronous host-to-device copy of an immutable pattern.
int FillAsync(void* self, int32_t, void* dst, int64_t value, uint64_t count, void* stream) {
  return AdapterCall([&] {
    auto& r = *static_cast<SimdevRuntime*>(self);
    const size_t bytes = static_cast<size_t>(count) * sizeof(int64_t);
    if (value == 0) {
      Check(r, r.fn.sdMemsetAsync(dst, 0, bytes, stream), "sdMemsetAsync");
      return;
    }
    const int64_t* pattern = nullptr;
    {
      std::lock_guard<std::mutex> lock(r.mutex);
      auto& slot = r.patterns[value];
      if (!slot || slot->size() < count) {
        if (slot) r.retired.push_back(std::move(slot));
        slot = std::make_unique<std::vector<int64_t>>(static_cast<size_t>(count), value);
      }
      pattern = slot->data();
    }
    Check(r, r.fn.sdMemcpyAsync(dst, pattern, bytes, kSdMemcpyHostToDevice, stream), "sdMemcpyAsync");
  });
}

// simdev's stand-in for Ascend's FFTS address: a 64-byte device block per
// device, allocated on first use and kept for the process.
int HardwareSyncAddress(void* self, int32_t device_id, uint64_t* out_address) {
  return AdapterCall([&] {
    auto& r = *static_cast<SimdevRuntime*>(self);
    std::lock_guard<std::mutex> lock(r.mutex);
    void*& block = r.sync_blocks[device_id];
    if (block == nullptr) Check(r, r.fn.sdMalloc(&block, 64, device_id), "sdMalloc");
    *out_address = reinterpret_cast<uint64_t>(block);
  });
}

const char* LastError(void*) { return AdapterLastError().c_str(); }

template <class F>
void Resolve(void* library, const std::string& path, const char* name, F*& out) {
  out = reinterpret_cast<F*>(dlsym(library, name));
  if (out == nullptr) {
    throw Error(ErrorKind::kRuntime, "devbridge: '" + path + "' has no function " + name +
                             "; pass the simdev runtime library (torch_simdev.runtime_library_path())");
  }
}

std::unique_ptr<SimdevRuntime> OpenSimdev(const std::string& path) {
  // RTLD_NOLOAD is not used: opening the same path the plugin loaded returns
  // the plugin's own copy (one process-wide simdev state); opening it first
  // here is also fine, the plugin then shares this copy.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    throw Error(ErrorKind::kRuntime, "devbridge: cannot open the simdev runtime library '" + path +
                             "': " + (why ? why : "unknown reason"));
  }
  auto runtime = std::make_unique<SimdevRuntime>();
  runtime->path = path;
  SimdevFunctions& f = runtime->fn;
  Resolve(library, path, "sdGetLastErrorString", f.sdGetLastErrorString);
  Resolve(library, path, "sdGetErrorName", f.sdGetErrorName);
  Resolve(library, path, "sdModuleLoad", f.sdModuleLoad);
  Resolve(library, path, "sdModuleUnload", f.sdModuleUnload);
  Resolve(library, path, "sdModuleGetFunction", f.sdModuleGetFunction);
  Resolve(library, path, "sdLaunchKernel", f.sdLaunchKernel);
  Resolve(library, path, "sdPointerGetDevice", f.sdPointerGetDevice);
  Resolve(library, path, "sdGetDeviceCount", f.sdGetDeviceCount);
  Resolve(library, path, "sdMalloc", f.sdMalloc);
  Resolve(library, path, "sdMemsetAsync", f.sdMemsetAsync);
  Resolve(library, path, "sdMemcpyAsync", f.sdMemcpyAsync);
  runtime->table = MakeKernelRuntime("simdev", runtime.get(), &Load, &Unload, &Launch, &PointerDevice,
                                     &LastError, &DeviceProperties);
  runtime->table.layouts = (1u << kDevbridgeLayoutTriton) | (1u << kDevbridgeLayoutAscend);
  runtime->table.fill_async = &FillAsync;
  runtime->table.hardware_sync_address = &HardwareSyncAddress;
  return runtime;
}

}  // namespace

void LoadSimdevModuleWithSetup(const DevbridgeKernelRuntime* simdev, const void* image, size_t image_size,
                               const char* kernel_name, const char* setup_symbol, const void* setup_arg,
                               DevbridgeLoadedKernel* out) {
  if (simdev == nullptr || simdev->load != &Load) {
    throw Error(ErrorKind::kValue, "devbridge: LoadSimdevModuleWithSetup needs devbridge's simdev kernel runtime");
  }
  try {
    LoadModule(*static_cast<const SimdevRuntime*>(simdev->self), image, image_size, kernel_name, setup_symbol,
               setup_arg, out);
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kRuntime, std::string("devbridge: loading kernel '") + kernel_name +
                                         "' on the simdev kernel runtime failed: " + e.what());
  }
}

const DevbridgeKernelRuntime* SimdevKernelRuntime(const std::string& library_path) {
  static std::mutex mutex;
  // Never destroyed: launches may run during process exit.
  static auto* runtimes = new std::map<std::string, std::unique_ptr<SimdevRuntime>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = runtimes->find(library_path);
  if (it == runtimes->end()) it = runtimes->emplace(library_path, OpenSimdev(library_path)).first;
  return &it->second->table;
}

}  // namespace launch
}  // namespace devbridge
