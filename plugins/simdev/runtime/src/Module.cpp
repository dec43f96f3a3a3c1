// Modules are shared libraries of host-function kernels (see sdKernelFn_t),
// opened with dlopen. A launch copies the argument values and runs the grid's
// programs one after another on the stream's worker.
#include <dlfcn.h>

#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "Error.h"
#include "HandleTable.h"
#include "Stream.h"
#include "WorkFailure.h"

namespace simdev {
namespace {

struct Module {
  Module(void* library, std::string path) : library(library), path(std::move(path)) {}
  ~Module() { dlclose(library); }
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  void* const library;
  const std::string path;
  std::mutex mutex;                          // guards the two members below
  std::map<std::string, uint64_t> functions;  // name -> function handle id
  bool unloaded = false;
};

// Holds its module, so a launch still queued when the module is unloaded
// keeps the library mapped until the launch has run.
struct Function {
  std::shared_ptr<Module> module;
  sdKernelFn_t entry;
  std::string name;
};

HandleTable<Module>& modules() {
  static auto* table = new HandleTable<Module>;  // leaked like the stream registry
  return *table;
}

HandleTable<Function>& functions() {
  static auto* table = new HandleTable<Function>;
  return *table;
}

Error moduleNotLoaded(sdModule_t handle) {
  return error(sdErrorInvalidModule, "module ", static_cast<const void*>(handle),
               " is not a loaded module (unloaded, or not a handle from sdModuleLoad)");
}

std::shared_ptr<Module> findModule(sdModule_t handle) {
  auto module = modules().find(handleId(handle));
  if (!module) throw moduleNotLoaded(handle);
  return module;
}

std::shared_ptr<Function> findFunction(sdFunction_t handle) {
  auto function = functions().find(handleId(handle));
  if (!function) {
    throw error(sdErrorInvalidModule, "function ", static_cast<const void*>(handle),
                " is not a live kernel (its module was unloaded, or not a handle from sdModuleGetFunction)");
  }
  return function;
}

// Argument values copied into one buffer, each at a max_align_t boundary so a
// kernel may read any scalar type through its pointer.
struct ArgumentCopy {
  std::vector<std::max_align_t> storage;
  std::vector<size_t> offsets;  // in bytes
  std::vector<size_t> sizes;    // the launch's arg_sizes, handed to every program

  ArgumentCopy(void** args, const size_t* arg_sizes, int num_args) {
    size_t total = 0;
    for (int i = 0; i < num_args; ++i) {
      if (args[i] == nullptr && arg_sizes[i] > 0) {
        throw error(sdErrorInvalidValue, "args[", i, "] is NULL but arg_sizes[", i, "] is ", arg_sizes[i],
                    "; args[i] must point at the argument's value");
      }
      offsets.push_back(total);
      sizes.push_back(arg_sizes[i]);
      total += (arg_sizes[i] + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t) * sizeof(std::max_align_t);
    }
    storage.resize(total / sizeof(std::max_align_t));
    auto* bytes = reinterpret_cast<unsigned char*>(storage.data());
    for (int i = 0; i < num_args; ++i) {
      if (arg_sizes[i] > 0) std::memcpy(bytes + offsets[static_cast<size_t>(i)], args[i], arg_sizes[i]);
    }
  }

  std::vector<void*> pointers() {
    auto* bytes = reinterpret_cast<unsigned char*>(storage.data());
    std::vector<void*> argv;
    for (size_t offset : offsets) argv.push_back(bytes + offset);
    return argv;
  }
};

}  // namespace
}  // namespace simdev

using simdev::apiCall;
using simdev::error;

extern "C" {

SIMDEV_API sdError_t sdModuleLoad(sdModule_t* out_module, const char* path) {
  return apiCall("sdModuleLoad", [&] {
    simdev::requireOutput(out_module, "out_module");
    if (path == nullptr || *path == '\0') {
      throw error(sdErrorInvalidValue, "path is NULL or empty; pass the path of a kernel shared library");
    }
    void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* reason = dlerror();
      throw error(sdErrorInvalidModule, "cannot load '", path, "': ", reason ? reason : "unknown dlopen error",
                  "; check that the file exists and is a shared library for this platform");
    }
    auto module = std::make_shared<simdev::Module>(library, path);
    const uint64_t id = simdev::nextHandleId();
    simdev::modules().insert(id, std::move(module));
    *out_module = simdev::asHandle<sdModule_t>(id);
  });
}

SIMDEV_API sdError_t sdModuleUnload(sdModule_t module) {
  return apiCall("sdModuleUnload", [&] {
    auto m = simdev::modules().erase(simdev::handleId(module));
    if (!m) throw simdev::moduleNotLoaded(module);
    std::lock_guard<std::mutex> lock(m->mutex);
    m->unloaded = true;
    for (const auto& entry : m->functions) simdev::functions().erase(entry.second);
    // dlclose happens when the last Function (possibly in a queued launch) lets go.
  });
}

SIMDEV_API sdError_t sdModuleGetFunction(sdFunction_t* out_function, sdModule_t module, const char* name) {
  return apiCall("sdModuleGetFunction", [&] {
    simdev::requireOutput(out_function, "out_function");
    if (name == nullptr) throw error(sdErrorInvalidValue, "name is NULL; pass the kernel's symbol name");
    auto m = simdev::findModule(module);
    std::lock_guard<std::mutex> lock(m->mutex);
    if (m->unloaded) throw error(sdErrorInvalidModule, "module '", m->path, "' was unloaded concurrently");
    if (auto known = m->functions.find(name); known != m->functions.end()) {
      *out_function = simdev::asHandle<sdFunction_t>(known->second);
      return;
    }
    dlerror();  // clear any stale error
    void* symbol = dlsym(m->library, name);
    if (symbol == nullptr) {
      throw error(sdErrorNotFound, "module '", m->path, "' has no symbol '", name,
                  "'; export the kernel as extern \"C\" with default visibility");
    }
    auto function = std::make_shared<simdev::Function>(
        simdev::Function{m, reinterpret_cast<sdKernelFn_t>(symbol), name});
    const uint64_t id = simdev::nextHandleId();
    simdev::functions().insert(id, std::move(function));
    m->functions.emplace(name, id);
    *out_function = simdev::asHandle<sdFunction_t>(id);
  });
}

SIMDEV_API sdError_t sdLaunchKernel(sdFunction_t function, uint32_t grid_x, uint32_t grid_y, uint32_t grid_z,
                                    void** args, const size_t* arg_sizes, int num_args, sdStream_t stream) {
  return apiCall("sdLaunchKernel", [&] {
    auto f = simdev::findFunction(function);
    auto s = simdev::findStream(stream);
    if (grid_x == 0 || grid_y == 0 || grid_z == 0) {
      throw error(sdErrorInvalidValue, "grid (", grid_x, ", ", grid_y, ", ", grid_z,
                  ") has a zero dimension; every grid dimension must be at least 1 (skip empty launches)");
    }
    if (num_args < 0) throw error(sdErrorInvalidValue, "num_args is ", num_args, "; it must be >= 0");
    if (num_args > 0 && (args == nullptr || arg_sizes == nullptr)) {
      throw error(sdErrorInvalidValue, "num_args is ", num_args, " but args or arg_sizes is NULL");
    }
    auto arguments = std::make_shared<simdev::ArgumentCopy>(args, arg_sizes, num_args);
    const std::string where = s->describe();
    const int device = s->device();
    s->enqueue({true, [f, arguments, where, device, grid_x, grid_y, grid_z]() -> std::string {
                  if (simdev::takeInjectedKernelFault()) {
                    return "kernel '" + f->name + "' of module '" + f->module->path + "' on " + where + " " +
                           simdev::injectedFaultText();
                  }
                  std::vector<void*> argv = arguments->pointers();
                  sdKernelContext ctx{{0, 0, 0}, {grid_x, grid_y, grid_z}, device,
                                      static_cast<int>(arguments->sizes.size()), arguments->sizes.data()};
                  for (uint32_t z = 0; z < grid_z; ++z) {
                    for (uint32_t y = 0; y < grid_y; ++y) {
                      for (uint32_t x = 0; x < grid_x; ++x) {
                        ctx.program_id[0] = x;
                        ctx.program_id[1] = y;
                        ctx.program_id[2] = z;
                        simdev::clearWorkFailureMessage();
                        if (const int rc = f->entry(&ctx, argv.data()); rc != 0) {
                          std::ostringstream failure;
                          failure << "kernel '" << f->name << "' of module '" << f->module->path << "' returned "
                                  << rc << " at program (" << x << ", " << y << ", " << z << ") on " << where;
                          return simdev::withWorkFailureMessage(failure.str()) + "; the rest of the grid was skipped";
                        }
                      }
                    }
                  }
                  return {};
                }});
  });
}

}  // extern "C"
