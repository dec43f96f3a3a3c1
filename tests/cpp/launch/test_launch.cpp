// The torch-free launch core (src/launch: kernel runtimes, loaded kernels,
// Launch) over the real simdev runtime, built into this test: no torch, no
// Python, so the suite also runs under ThreadSanitizer.
//
// The framework side of a launch comes through a DevbridgeRuntimeAPI table.
// Here that table is a small stream-ordered one over simdev itself (current
// stream = the device's default stream or the one the test sets; scratch from
// sdMalloc, freed by a host function queued on the stream, so a block is
// never reused before the work that used it has run), standing in for the
// torch-backed table that the Python tests exercise.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <simdev/runtime.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "devbridge/c_launch_api.h"
#include "devbridge/c_runtime_api.h"
#include "devbridge/error.h"
#include "launch/kernel_runtimes.h"
#include "launch/launch.h"
#include "launch/loaded_kernels.h"

namespace devbridge {
namespace launch {
namespace {

constexpr int32_t kExtDev = 12;

// ---------------------------------------------------------------- framework table

thread_local sdStream_t t_current_stream[2] = {nullptr, nullptr};
std::atomic<DevbridgeSubmitFn> g_submit_hook{nullptr};
thread_local std::string t_framework_error;

sdStream_t CurrentStream(int32_t device) {
  if (t_current_stream[device] == nullptr) sdStreamGetDefault(device, &t_current_stream[device]);
  return t_current_stream[device];
}

struct ScratchToken {
  void* pointer;
  sdStream_t stream;
};

int FreeOnStream(void* token) {
  auto* t = static_cast<ScratchToken*>(token);
  sdFree(t->pointer);
  delete t;
  return 0;
}

DevbridgeRuntimeAPI MakeFrameworkTable() {
  DevbridgeRuntimeAPI api{};
  api.header = {DEVBRIDGE_RUNTIME_API_MAJOR, DEVBRIDGE_RUNTIME_API_MINOR, sizeof(DevbridgeRuntimeAPI)};
  api.current_stream = [](int32_t, int32_t device, void** out) {
    *out = CurrentStream(device);
    return 0;
  };
  api.get_submit_hook = [](int32_t, DevbridgeSubmitFn* out) {
    *out = g_submit_hook.load();
    return 0;
  };
  api.get_last_error = [] { return t_framework_error.c_str(); };
  api.scratch_alloc = [](int32_t, int32_t device, size_t nbytes, void** out_ptr, void** out_token) {
    void* pointer = nullptr;
    if (sdMalloc(&pointer, nbytes, device) != sdSuccess) {
      t_framework_error = sdGetLastErrorString();
      return -1;
    }
    *out_ptr = pointer;
    *out_token = new ScratchToken{pointer, CurrentStream(device)};
    return 0;
  };
  api.scratch_free = [](void* token) {
    auto* t = static_cast<ScratchToken*>(token);
    return sdLaunchHostFunc(t->stream, &FreeOnStream, t) == sdSuccess ? 0 : -1;
  };
  return api;
}

const DevbridgeRuntimeAPI kFramework = MakeFrameworkTable();

// ---------------------------------------------------------------- helpers

std::string ReadFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

const DevbridgeKernelRuntime* Simdev() { return SimdevKernelRuntime(DEVBRIDGE_TEST_SIMDEV_LIBRARY); }

uint64_t LoadTestKernel(const char* name, int32_t device = 0) {
  static const std::string image = ReadFile(DEVBRIDGE_TEST_SIMDEV_KERNELS);
  return LoadKernel(Simdev(), kExtDev, device, "simdev:" + std::to_string(device), image.data(), image.size(),
                    name, 0);
}

template <class T>
T* DeviceAlloc(size_t count, int device = 0) {
  void* pointer = nullptr;
  EXPECT_EQ(sdMalloc(&pointer, count * sizeof(T), device), sdSuccess) << sdGetLastErrorString();
  return static_cast<T*>(pointer);
}

template <class T>
std::vector<T> Read(const T* device_pointer, size_t count, int device = 0) {
  std::vector<T> host(count);
  sdStream_t stream = CurrentStream(device);
  EXPECT_EQ(sdMemcpy(host.data(), device_pointer, count * sizeof(T), sdMemcpyDeviceToHost, stream), sdSuccess)
      << sdGetLastErrorString();
  return host;
}

// Parameters of one launch: values in 8-byte slots, the scratch pair last.
struct Params {
  std::vector<uint64_t> slots;
  std::vector<size_t> sizes;
  std::vector<void*> pointers;

  std::vector<DevbridgeArgType> types;

  template <class T>
  Params& add(T value) {
    uint64_t slot = 0;
    std::memcpy(&slot, &value, sizeof(T));
    slots.push_back(slot);
    sizes.push_back(sizeof(T));
    types.push_back(std::is_pointer<T>::value ? kDevbridgeArgPointer
                    : sizeof(T) == 8         ? kDevbridgeArgI64
                    : sizeof(T) == 4         ? kDevbridgeArgI32
                    : sizeof(T) == 2         ? kDevbridgeArgI16
                                             : kDevbridgeArgI8);
    return *this;
  }
  // The descriptor of what was added (the scratch pair is not part of it).
  DevbridgeKernelSignature signature(const DevbridgeLaunchMetadata& metadata) const {
    return DevbridgeKernelSignature{static_cast<uint32_t>(types.size() - 2), types.data(), metadata};
  }
  LaunchRequest request(uint64_t handle, uint32_t gx, uint32_t gy = 1, uint32_t gz = 1) {
    add<void*>(nullptr).add<void*>(nullptr);  // global, profile scratch
    pointers.clear();
    for (auto& slot : slots) pointers.push_back(&slot);
    LaunchRequest r;
    r.kernel = FindKernel(handle);
    r.grid[0] = gx;
    r.grid[1] = gy;
    r.grid[2] = gz;
    r.stream = CurrentStream(r.kernel->device_id);
    r.params = pointers.data();
    r.param_sizes = sizes.data();
    r.num_params = static_cast<uint32_t>(slots.size());
    return r;
  }
};

class LaunchTest : public ::testing::Test {
 protected:
  void TearDown() override {
    g_submit_hook.store(nullptr);
    sdSetOpDelay(0);
    sdDeviceSynchronize(0);
    sdDeviceSynchronize(1);
    t_current_stream[0] = t_current_stream[1] = nullptr;
  }
  DevbridgeLaunchMetadata metadata_{4, 1, 0, 0, 1, 0, 1, 0, kDevbridgeLayoutTriton, 0, 0, 0};
};

// ---------------------------------------------------------------- tests

TEST_F(LaunchTest, VectorAddThroughTheSimdevRuntime) {
  const uint64_t handle = LoadTestKernel("vector_add");
  constexpr int64_t n = 1000;
  float* x = DeviceAlloc<float>(n);
  float* out = DeviceAlloc<float>(n);
  std::vector<float> host(n);
  for (int64_t i = 0; i < n; ++i) host[static_cast<size_t>(i)] = static_cast<float>(i);
  ASSERT_EQ(sdMemcpy(x, host.data(), n * sizeof(float), sdMemcpyHostToDevice, CurrentStream(0)), sdSuccess);
  Params p;
  p.add(x).add(x).add(out).add<int64_t>(n);
  LaunchRequest request = p.request(handle, 4);
  Launch(kFramework, p.signature(metadata_), request);  // 256 per program
  const std::vector<float> result = Read(out, n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(result[static_cast<size_t>(i)], 2.0f * i) << i;
  EXPECT_TRUE(ReleaseKernel(handle));
  sdFree(x);
  sdFree(out);
}

TEST_F(LaunchTest, EmptyGridEnqueuesNothing) {
  const uint64_t handle = LoadTestKernel("record_program_order");
  int64_t* log = DeviceAlloc<int64_t>(8);
  ASSERT_EQ(sdMemsetAsync(log, 0, 8 * sizeof(int64_t), CurrentStream(0)), sdSuccess);
  for (uint32_t axis = 0; axis < 3; ++axis) {
    Params p;
    p.add(log);
    LaunchRequest r = p.request(handle, 2, 2, 2);
    r.grid[axis] = 0;
    Launch(kFramework, p.signature(metadata_), r);
  }
  EXPECT_EQ(Read(log, 1)[0], 0);
  ReleaseKernel(handle);
  sdFree(log);
}

TEST_F(LaunchTest, GlobalScratchIsPerProgramAlignedAndStreamOrdered) {
  const uint64_t handle = LoadTestKernel("record_arg_sizes");
  int64_t* out = DeviceAlloc<int64_t>(8);
  DevbridgeLaunchMetadata md = metadata_;
  md.global_scratch_size = 24;
  md.global_scratch_align = 128;
  Params p;
  p.add(out);
  LaunchRequest request = p.request(handle, 3);
  Launch(kFramework, p.signature(md), request);
  const std::vector<int64_t> record = Read(out, 4);
  EXPECT_EQ(record[0], 3);                       // out + 2 scratch pointers
  EXPECT_EQ(record[1], 8);
  EXPECT_EQ(record[2], 8);
  uint64_t global = 0;
  std::memcpy(&global, p.pointers[1], sizeof(global));
  EXPECT_NE(global, 0u);
  EXPECT_EQ(global % 128, 0u);
  ReleaseKernel(handle);
  sdFree(out);
}

TEST_F(LaunchTest, ScratchOnAStreamThatIsNotCurrentIsRefused) {
  const uint64_t handle = LoadTestKernel("record_arg_sizes");
  int64_t* out = DeviceAlloc<int64_t>(8);
  sdStream_t other = nullptr;
  ASSERT_EQ(sdStreamCreate(0, &other), sdSuccess);
  DevbridgeLaunchMetadata md = metadata_;
  md.global_scratch_size = 8;
  Params p;
  p.add(out);
  LaunchRequest r = p.request(handle, 1);
  r.stream = other;
  try {
    Launch(kFramework, p.signature(md), r);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kValue);
    EXPECT_NE(std::string(e.what()).find("make the launch stream current"), std::string::npos) << e.what();
  }
  sdStreamDestroy(other);
  ReleaseKernel(handle);
  sdFree(out);
}

TEST_F(LaunchTest, ARequestThatDoesNotMatchItsSignatureIsRefused) {
  const uint64_t handle = LoadTestKernel("store_value_and_device");
  Params p;
  p.add<void*>(nullptr).add<int64_t>(1);
  LaunchRequest request = p.request(handle, 1);
  DevbridgeKernelSignature signature = p.signature(metadata_);
  signature.num_params = 3;
  try {
    Launch(kFramework, signature, request);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("packs 4 parameters, but its signature has 3"), std::string::npos)
        << e.what();
  }
  ReleaseKernel(handle);
}

TEST_F(LaunchTest, ScratchSizeOverflowIsAnError) {
  const uint64_t handle = LoadTestKernel("record_arg_sizes");
  DevbridgeLaunchMetadata md = metadata_;
  md.global_scratch_size = uint64_t{1} << 62;
  Params p;
  p.add<void*>(nullptr);
  LaunchRequest request = p.request(handle, 16);
  EXPECT_THROW(Launch(kFramework, p.signature(md), request), Error);
  ReleaseKernel(handle);
}

// A host task queue with a worker of its own, as a plugin's submit hook has.
struct TaskQueue {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::pair<int (*)(void*, void*), std::pair<void*, void*>>> tasks;
  int pending = 0;
  bool hold = false;  // while true the worker takes no task
  bool stop = false;
  std::thread worker{[this] {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      changed.wait(lock, [this] { return stop || (!hold && !tasks.empty()); });
      if (tasks.empty()) return;
      auto task = tasks.front();
      tasks.pop_front();
      lock.unlock();
      task.first(task.second.first, task.second.second);
      lock.lock();
      --pending;
      changed.notify_all();
    }
  }};
  ~TaskQueue() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
      changed.notify_all();
    }
    worker.join();
  }
  void set_hold(bool value) {
    std::lock_guard<std::mutex> lock(mutex);
    hold = value;
    changed.notify_all();
  }
  void drain() {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [this] { return pending == 0; });
  }
};
TaskQueue* g_queue = nullptr;

int QueueSubmit(int32_t, int32_t, void* stream, int (*run)(void*, void*), void* ctx) {
  std::lock_guard<std::mutex> lock(g_queue->mutex);
  g_queue->tasks.push_back({run, {ctx, stream}});
  ++g_queue->pending;
  g_queue->changed.notify_all();
  return 0;
}

TEST_F(LaunchTest, SubmitHookRunsTheLaunchOnItsWorkerWithCopiedParameters) {
  TaskQueue queue;
  g_queue = &queue;
  g_submit_hook.store(&QueueSubmit);
  const uint64_t handle = LoadTestKernel("store_value_and_device", 1);
  int64_t* out = DeviceAlloc<int64_t>(2, 1);
  queue.set_hold(true);  // the worker cannot run the launch before the caller's copy is gone
  {
    Params p;
    p.add(out).add<int64_t>(77);
    DevbridgeLaunchMetadata md = metadata_;
    md.global_scratch_size = 64;
    LaunchRequest request = p.request(handle, 1);
    Launch(kFramework, p.signature(md), request);
    p.slots.assign(p.slots.size(), 0xFF);  // the hook must have copied the values
  }
  queue.set_hold(false);
  queue.drain();
  const std::vector<int64_t> result = Read(out, 2, 1);
  EXPECT_EQ(result[0], 77);
  EXPECT_EQ(result[1], 1);
  ReleaseKernel(handle);
  sdFree(out);
}

int RefusingSubmit(int32_t, int32_t, void*, int (*)(void*, void*), void*) { return -1; }

TEST_F(LaunchTest, SubmitHookRefusalIsAnErrorAndFreesTheLaunch) {
  g_submit_hook.store(&RefusingSubmit);
  const uint64_t handle = LoadTestKernel("store_value_and_device");
  Params p;
  p.add<void*>(nullptr).add<int64_t>(1);
  DevbridgeLaunchMetadata md = metadata_;
  md.global_scratch_size = 64;  // its scratch token must be released (LeakSanitizer)
  LaunchRequest request = p.request(handle, 1);
  EXPECT_THROW(Launch(kFramework, p.signature(md), request), Error);
  ReleaseKernel(handle);
}

TEST_F(LaunchTest, ReleasedKernelStaysLoadedWhileALaunchHoldsIt) {
  const uint64_t handle = LoadTestKernel("store_value_and_device");
  int64_t* out = DeviceAlloc<int64_t>(2);
  Params p;
  p.add(out).add<int64_t>(5);
  LaunchRequest r = p.request(handle, 1);  // holds the kernel
  EXPECT_TRUE(ReleaseKernel(handle));
  EXPECT_FALSE(ReleaseKernel(handle));
  EXPECT_EQ(FindKernel(handle), nullptr);
  Launch(kFramework, p.signature(metadata_), r);
  EXPECT_EQ(Read(out, 1)[0], 5);
  sdFree(out);
}

TEST_F(LaunchTest, ManyThreadsLaunchOnTheirOwnStreamsAndDevices) {
  const uint64_t kernels[2] = {LoadTestKernel("store_value_and_device", 0),
                               LoadTestKernel("store_value_and_device", 1)};
  constexpr int kThreads = 8, kLaunches = 50;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const int device = t % 2;
      sdStream_t stream = nullptr;
      ASSERT_EQ(sdStreamCreate(device, &stream), sdSuccess);
      t_current_stream[device] = stream;
      int64_t* out = DeviceAlloc<int64_t>(2 * kLaunches, device);
      DevbridgeLaunchMetadata md{4, 1, 0, 16, 16, 0, 1, 0, kDevbridgeLayoutTriton, 0, 0, 0};
      for (int i = 0; i < kLaunches; ++i) {
        Params p;
        p.add(out + 2 * i).add<int64_t>(t * 1000 + i);
        LaunchRequest request = p.request(kernels[device], 1);
        Launch(kFramework, p.signature(md), request);
      }
      const std::vector<int64_t> result = Read(out, 2 * kLaunches, device);
      for (int i = 0; i < kLaunches; ++i) {
        if (result[2 * i] != t * 1000 + i || result[2 * i + 1] != device) ++wrong;
      }
      sdStreamDestroy(stream);
      t_current_stream[device] = nullptr;
      sdFree(out);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  ReleaseKernel(kernels[0]);
  ReleaseKernel(kernels[1]);
}

TEST_F(LaunchTest, LoadErrorsNameTheKernelDeviceAndReason) {
  const std::string garbage = "not a shared library";
  try {
    LoadKernel(Simdev(), kExtDev, 0, "simdev:0", garbage.data(), garbage.size(), "k", 0);
    FAIL();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("loading kernel 'k' on simdev:0 failed on the simdev kernel runtime: sdModuleLoad"),
              std::string::npos)
        << what;
  }
  EXPECT_THROW(LoadTestKernel("no_such_kernel"), Error);
  EXPECT_THROW(LoadKernel(Simdev(), kExtDev, 0, "simdev:0", nullptr, 0, "k", 0), Error);
  EXPECT_THROW(SimdevKernelRuntime("/nonexistent/libsimdev_runtime.so"), Error);
}

TEST(KernelRuntimeTable, ValidationNamesWhatIsWrong) {
  EXPECT_THROW(ValidateKernelRuntime(nullptr), Error);
  DevbridgeKernelRuntime table = *Simdev();
  table.major = 2;
  EXPECT_THROW(ValidateKernelRuntime(&table), Error);
  table = *Simdev();
  table.launch = nullptr;
  try {
    ValidateKernelRuntime(&table);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no launch function"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(ValidateKernelRuntime(Simdev()));
  EXPECT_NO_THROW(ValidateKernelRuntime(CudaKernelRuntime()));
}

TEST(CudaKernelRuntime, WithoutADriverEveryCallFailsNamingLibcuda) {
  if (void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
    dlclose(library);
    GTEST_SKIP() << "libcuda.so.1 is present: the GPU suite covers the CUDA runtime";
  }
  if (void* library = dlopen("libcuda.so.1", RTLD_NOW)) {
    dlclose(library);
    GTEST_SKIP() << "libcuda.so.1 is present: the GPU suite covers the CUDA runtime";
  }
  const DevbridgeKernelRuntime* cuda = CudaKernelRuntime();
  const char image[] = "\x7f" "ELF";
  DevbridgeLoadedKernel out{};
  EXPECT_EQ(cuda->load(cuda->self, 0, image, sizeof(image), "k", 0, &out), -1);
  EXPECT_NE(std::string(cuda->get_last_error(cuda->self)).find("cannot open libcuda.so.1"), std::string::npos)
      << cuda->get_last_error(cuda->self);
  int32_t device = 0;
  EXPECT_EQ(cuda->pointer_device(cuda->self, 0x1000, &device), -1);
}

// ---------------------------------------------------------------- the Ascend layout's needs

// A simdev table without some of its minor-1 capabilities.
const DevbridgeKernelRuntime* SimdevWithout(bool sync_address, bool fill, bool ascend_layout) {
  static std::deque<DevbridgeKernelRuntime> tables;  // stable addresses, process lifetime
  tables.push_back(*Simdev());
  DevbridgeKernelRuntime& t = tables.back();
  t.name = "trimmed-simdev";
  if (!sync_address) t.hardware_sync_address = nullptr;
  if (!fill) t.fill_async = nullptr;
  if (!ascend_layout) t.layouts = 1u << kDevbridgeLayoutTriton;
  return &t;
}

std::string AscendLaunchError(const DevbridgeKernelRuntime* runtime, uint32_t flags, uint64_t lock_num) {
  static const std::string image = ReadFile(DEVBRIDGE_TEST_SIMDEV_KERNELS);
  const uint64_t handle = LoadKernel(runtime, kExtDev, 0, "simdev:0", image.data(), image.size(), "record_arg_sizes", 0);
  DevbridgeLaunchMetadata md{};
  md.layout = kDevbridgeLayoutAscend;
  md.flags = flags;
  md.lock_num = lock_num;
  const DevbridgeArgType types[] = {kDevbridgeArgPointer};
  const DevbridgeKernelSignature signature{1, types, md};
  const uint32_t leading = ((flags & DEVBRIDGE_LAUNCH_ASCEND_FFTS) ? 1u : 0u) + 2u;
  std::vector<uint64_t> slots(leading + 1 + 3, 0);
  std::vector<void*> pointers;
  for (auto& slot : slots) pointers.push_back(&slot);
  std::vector<size_t> sizes(leading + 1, 8);
  sizes.insert(sizes.end(), {4, 4, 4});
  LaunchRequest request;
  request.kernel = FindKernel(handle);
  request.stream = CurrentStream(0);
  request.params = pointers.data();
  request.param_sizes = sizes.data();
  request.num_params = static_cast<uint32_t>(slots.size());
  std::string message;
  try {
    Launch(kFramework, signature, request);
  } catch (const Error& e) {
    message = e.what();
  }
  ReleaseKernel(handle);
  return message;
}

TEST(AscendLayout, ARuntimeWithoutTheLayoutRefusesIt) {
  const std::string message = AscendLaunchError(SimdevWithout(true, true, false), 0, 0);
  EXPECT_NE(message.find("is laid out for the Ascend ABI, which the trimmed-simdev kernel runtime does not "
                         "launch"),
            std::string::npos)
      << message;
}

TEST(AscendLayout, FftsNeedsTheRuntimesHardwareSyncAddress) {
  const std::string message = AscendLaunchError(SimdevWithout(false, true, true), DEVBRIDGE_LAUNCH_ASCEND_FFTS, 0);
  EXPECT_NE(message.find("takes an ffts_addr, but the trimmed-simdev kernel runtime has no hardware_sync_address"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("TRITON_DISABLE_FFTS=1"), std::string::npos) << message;
}

TEST(AscendLayout, ALockNeedsTheRuntimesFillAsync) {
  const std::string message = AscendLaunchError(SimdevWithout(true, false, true), 0, 4);
  EXPECT_NE(message.find("uses a sync-block lock, but the trimmed-simdev kernel runtime has no fill_async"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace launch
}  // namespace devbridge
