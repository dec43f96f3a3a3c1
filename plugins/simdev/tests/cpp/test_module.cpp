// Modules: loading kernel libraries, looking up kernels, grid launches.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

using simdev_test::Gate;
using simdev_test::SimdevTest;

class ModuleTest : public SimdevTest {
 protected:
  void SetUp() override {
    SimdevTest::SetUp();
    SD_ASSERT_OK(sdModuleLoad(&module_, SIMDEV_TEST_KERNELS_PATH));
  }
  void TearDown() override {
    if (module_ != nullptr) sdModuleUnload(module_);
    SimdevTest::TearDown();
  }
  sdFunction_t kernel(const char* name) {
    sdFunction_t function = nullptr;
    EXPECT_EQ(sdModuleGetFunction(&function, module_, name), sdSuccess) << sdGetLastErrorString();
    return function;
  }
  template <typename T>
  static T* device_alloc(size_t count, int device = 0) {
    void* ptr = nullptr;
    EXPECT_EQ(sdMalloc(&ptr, count * sizeof(T), device), sdSuccess) << sdGetLastErrorString();
    return static_cast<T*>(ptr);
  }

  sdModule_t module_ = nullptr;
};

TEST_F(ModuleTest, LoadOfMissingFileNamesPathAndReason) {
  sdModule_t module = nullptr;
  SD_EXPECT_ERROR(sdModuleLoad(&module, SIMDEV_TEST_MISSING_LIBRARY_PATH), sdErrorInvalidModule,
                  std::string("sdModuleLoad: cannot load '") + SIMDEV_TEST_MISSING_LIBRARY_PATH + "'");
  EXPECT_NE(std::string(sdGetLastErrorString()).find("No such file"), std::string::npos);
}

TEST_F(ModuleTest, LoadOfNonLibraryFileFails) {
  const std::string path = ::testing::TempDir() + "simdev_not_a_library.so";
  FILE* file = std::fopen(path.c_str(), "w");
  ASSERT_NE(file, nullptr);
  std::fputs("this is text, not ELF\n", file);
  std::fclose(file);
  sdModule_t module = nullptr;
  SD_EXPECT_ERROR(sdModuleLoad(&module, path.c_str()), sdErrorInvalidModule, path);
  std::remove(path.c_str());
}

TEST_F(ModuleTest, LoadRejectsNullOrEmptyPath) {
  sdModule_t module = nullptr;
  SD_EXPECT_ERROR(sdModuleLoad(&module, nullptr), sdErrorInvalidValue, "path is NULL or empty");
  SD_EXPECT_ERROR(sdModuleLoad(&module, ""), sdErrorInvalidValue, "path is NULL or empty");
}

TEST_F(ModuleTest, MissingSymbolIsNotFound) {
  sdFunction_t function = nullptr;
  SD_EXPECT_ERROR(sdModuleGetFunction(&function, module_, "no_such_kernel"), sdErrorNotFound,
                  "has no symbol 'no_such_kernel'");
  SD_EXPECT_ERROR(sdModuleGetFunction(&function, module_, nullptr), sdErrorInvalidValue, "name is NULL");
}

TEST_F(ModuleTest, SameNameGivesSameFunction) {
  EXPECT_EQ(kernel("vector_add"), kernel("vector_add"));
  EXPECT_NE(kernel("vector_add"), kernel("fail_at_program"));
}

TEST_F(ModuleTest, VectorAddCoversTheGrid) {
  constexpr int64_t n = 1000;  // 4 programs of 256 elements, the last partial
  std::vector<float> x(n), y(n), out(n, -1.0f);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = static_cast<float>(2 * i);
  }
  float* dx = device_alloc<float>(n);
  float* dy = device_alloc<float>(n);
  float* dout = device_alloc<float>(n);
  sdStream_t stream = default_stream();
  SD_ASSERT_OK(sdMemcpyAsync(dx, x.data(), n * sizeof(float), sdMemcpyHostToDevice, stream));
  SD_ASSERT_OK(sdMemcpyAsync(dy, y.data(), n * sizeof(float), sdMemcpyHostToDevice, stream));
  int64_t count = n;
  void* args[] = {&dx, &dy, &dout, &count};
  const size_t sizes[] = {sizeof(dx), sizeof(dy), sizeof(dout), sizeof(count)};
  SD_ASSERT_OK(sdLaunchKernel(kernel("vector_add"), 4, 1, 1, args, sizes, 4, stream));
  SD_ASSERT_OK(sdMemcpy(out.data(), dout, n * sizeof(float), sdMemcpyDeviceToHost, stream));
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], 3.0f * static_cast<float>(i)) << i;
  for (float* ptr : {dx, dy, dout}) SD_ASSERT_OK(sdFree(ptr));
}

TEST_F(ModuleTest, ProgramsRunXFastestThenYThenZ) {
  int64_t* log = device_alloc<int64_t>(1 + 12);
  SD_ASSERT_OK(sdMemsetAsync(log, 0, 13 * sizeof(int64_t), default_stream()));
  void* args[] = {&log};
  const size_t sizes[] = {sizeof(log)};
  SD_ASSERT_OK(sdLaunchKernel(kernel("record_program_order"), 3, 2, 2, args, sizes, 1, default_stream()));
  std::vector<int64_t> result(13);
  SD_ASSERT_OK(sdMemcpy(result.data(), log, 13 * sizeof(int64_t), sdMemcpyDeviceToHost, default_stream()));
  const std::vector<int64_t> expected = {12, 0, 1, 2, 100, 101, 102, 10000, 10001, 10002, 10100, 10101, 10102};
  EXPECT_EQ(result, expected);
  SD_ASSERT_OK(sdFree(log));
}

TEST_F(ModuleTest, ArgumentsAreCopiedAtLaunchAndKernelSeesItsDevice) {
  Gate gate;  // the kernel cannot run before the argument is overwritten
  sdStream_t stream = default_stream(1);
  int64_t* out = device_alloc<int64_t>(2, 1);
  SD_ASSERT_OK(sdLaunchHostFunc(stream, Gate::wait_fn, &gate));
  int64_t value = 5;
  void* args[] = {&out, &value};
  const size_t sizes[] = {sizeof(out), sizeof(value)};
  SD_ASSERT_OK(sdLaunchKernel(kernel("store_value_and_device"), 1, 1, 1, args, sizes, 2, stream));
  value = 9;
  gate.open();
  int64_t result[2] = {};
  SD_ASSERT_OK(sdMemcpy(result, out, sizeof(result), sdMemcpyDeviceToHost, stream));
  EXPECT_EQ(result[0], 5);
  EXPECT_EQ(result[1], 1);
  SD_ASSERT_OK(sdFree(out));
}

TEST_F(ModuleTest, KernelSeesTheLaunchsArgumentCountAndSizes) {
  sdStream_t stream = default_stream(0);
  int64_t* out = device_alloc<int64_t>(5);
  uint8_t small = 7;
  uint16_t half = 9;
  double wide = 1.5;
  void* args[] = {&out, &small, &half, &wide};
  const size_t sizes[] = {sizeof(out), sizeof(small), sizeof(half), sizeof(wide)};
  SD_ASSERT_OK(sdLaunchKernel(kernel("record_arg_sizes"), 1, 1, 1, args, sizes, 4, stream));
  int64_t result[5] = {};
  SD_ASSERT_OK(sdMemcpy(result, out, sizeof(result), sdMemcpyDeviceToHost, stream));
  EXPECT_EQ(result[0], 4);
  EXPECT_EQ(result[1], 8);
  EXPECT_EQ(result[2], 1);
  EXPECT_EQ(result[3], 2);
  EXPECT_EQ(result[4], 8);
  SD_ASSERT_OK(sdFree(out));
}

TEST_F(ModuleTest, FailingKernelStopsItsGridAndIsReported) {
  int32_t* executed = device_alloc<int32_t>(1);
  SD_ASSERT_OK(sdMemsetAsync(executed, 0, sizeof(int32_t), default_stream()));
  uint32_t fail_at = 2;
  void* args[] = {&executed, &fail_at};
  const size_t sizes[] = {sizeof(executed), sizeof(fail_at)};
  SD_ASSERT_OK(sdLaunchKernel(kernel("fail_at_program"), 5, 1, 1, args, sizes, 2, default_stream()));
  SD_EXPECT_ERROR(sdStreamSynchronize(default_stream()), sdErrorLaunchFailure,
                  "kernel 'fail_at_program' of module");
  EXPECT_NE(std::string(sdGetLastErrorString()).find("returned 42 at program (2, 0, 0)"), std::string::npos);
  int32_t count = 0;
  SD_ASSERT_OK(sdMemcpy(&count, executed, sizeof(count), sdMemcpyDeviceToHost, default_stream()));
  EXPECT_EQ(count, 3);  // programs 0, 1, 2; the rest skipped
  SD_ASSERT_OK(sdFree(executed));
}

TEST_F(ModuleTest, AFailingKernelsOwnMessageIsInTheReport) {
  uint32_t fail_at = 1;
  void* args[] = {&fail_at};
  const size_t sizes[] = {sizeof(fail_at)};
  SD_ASSERT_OK(sdLaunchKernel(kernel("fail_with_message"), 3, 1, 1, args, sizes, 1, default_stream()));
  SD_EXPECT_ERROR(sdStreamSynchronize(default_stream()), sdErrorLaunchFailure,
                  "returned 3 at program (1, 0, 0) on default stream 0x");
  EXPECT_NE(std::string(sdGetLastErrorString())
                .find(" (device 0): index 7 is out of bounds for the block; the rest of the grid was skipped"),
            std::string::npos);
  EXPECT_EQ(std::string(sdGetLastErrorString()).find("stale message"), std::string::npos);
}

TEST_F(ModuleTest, AFailureMessageIsRefusedOutsideAWorker) {
  SD_EXPECT_ERROR(sdSetWorkFailureMessage("not from a kernel"), sdErrorInvalidValue, "outside a kernel or host function");
  SD_EXPECT_ERROR(sdSetWorkFailureMessage(nullptr), sdErrorInvalidValue, "message is NULL");
}

TEST_F(ModuleTest, AnInjectedKernelFaultSkipsTheNthGridAndIsReportedOnce) {
  int32_t* executed = device_alloc<int32_t>(1);
  SD_ASSERT_OK(sdMemsetAsync(executed, 0, sizeof(int32_t), default_stream()));
  uint64_t before = 0;
  SD_ASSERT_OK(sdGetInjectedKernelFaults(&before));
  uint32_t never = 99;
  void* args[] = {&executed, &never};
  const size_t sizes[] = {sizeof(executed), sizeof(never)};
  SD_ASSERT_OK(sdInjectKernelFault(2));
  for (int launch = 0; launch < 3; ++launch) {
    SD_ASSERT_OK(sdLaunchKernel(kernel("fail_at_program"), 4, 1, 1, args, sizes, 2, default_stream()));
  }
  SD_EXPECT_ERROR(sdStreamSynchronize(default_stream()), sdErrorLaunchFailure,
                  "kernel 'fail_at_program' of module");
  EXPECT_NE(std::string(sdGetLastErrorString()).find("injected fault (sdInjectKernelFault)"), std::string::npos);
  SD_ASSERT_OK(sdStreamSynchronize(default_stream()));  // reported once
  int32_t count = 0;
  SD_ASSERT_OK(sdMemcpy(&count, executed, sizeof(count), sdMemcpyDeviceToHost, default_stream()));
  EXPECT_EQ(count, 8);  // the first and third grids ran, the second was skipped whole
  uint64_t after = 0;
  SD_ASSERT_OK(sdGetInjectedKernelFaults(&after));
  EXPECT_EQ(after, before + 1);
  SD_ASSERT_OK(sdLaunchKernel(kernel("fail_at_program"), 4, 1, 1, args, sizes, 2, default_stream()));
  SD_ASSERT_OK(sdStreamSynchronize(default_stream()));  // one fault per arming
  SD_ASSERT_OK(sdFree(executed));
}

TEST_F(ModuleTest, LaunchValidatesItsArguments) {
  sdFunction_t function = kernel("store_value_and_device");
  int64_t value = 0;
  void* args[] = {&value, nullptr};
  const size_t sizes[] = {sizeof(value), sizeof(value)};
  sdStream_t stream = default_stream();
  SD_EXPECT_ERROR(sdLaunchKernel(function, 0, 1, 1, args, sizes, 1, stream), sdErrorInvalidValue,
                  "grid (0, 1, 1) has a zero dimension");
  SD_EXPECT_ERROR(sdLaunchKernel(function, 1, 1, 0, args, sizes, 1, stream), sdErrorInvalidValue, "zero dimension");
  SD_EXPECT_ERROR(sdLaunchKernel(function, 1, 1, 1, args, sizes, -1, stream), sdErrorInvalidValue,
                  "num_args is -1");
  SD_EXPECT_ERROR(sdLaunchKernel(function, 1, 1, 1, nullptr, sizes, 1, stream), sdErrorInvalidValue,
                  "args or arg_sizes is NULL");
  SD_EXPECT_ERROR(sdLaunchKernel(function, 1, 1, 1, args, nullptr, 1, stream), sdErrorInvalidValue,
                  "args or arg_sizes is NULL");
  SD_EXPECT_ERROR(sdLaunchKernel(function, 1, 1, 1, args, sizes, 2, stream), sdErrorInvalidValue,
                  "args[1] is NULL");
  SD_EXPECT_ERROR(sdLaunchKernel(function, 1, 1, 1, args, sizes, 1, nullptr), sdErrorInvalidStream,
                  "stream is NULL");
  SD_EXPECT_ERROR(sdLaunchKernel(nullptr, 1, 1, 1, args, sizes, 1, stream), sdErrorInvalidModule,
                  "is not a live kernel");
  SD_ASSERT_OK(sdStreamSynchronize(stream));  // nothing was queued by the failed calls
}

TEST_F(ModuleTest, UnloadInvalidatesModuleAndFunctionHandles) {
  sdFunction_t function = kernel("vector_add");
  SD_ASSERT_OK(sdModuleUnload(module_));
  sdModule_t unloaded = module_;
  module_ = nullptr;
  sdFunction_t again = nullptr;
  SD_EXPECT_ERROR(sdModuleGetFunction(&again, unloaded, "vector_add"), sdErrorInvalidModule,
                  "is not a loaded module");
  SD_EXPECT_ERROR(sdModuleUnload(unloaded), sdErrorInvalidModule, "sdModuleUnload: module");
  SD_EXPECT_ERROR(sdLaunchKernel(function, 1, 1, 1, nullptr, nullptr, 0, default_stream()), sdErrorInvalidModule,
                  "its module was unloaded");
}

TEST_F(ModuleTest, UnloadWithLaunchStillQueuedIsSafe) {
  Gate gate;
  sdStream_t stream = default_stream(1);
  int64_t* out = device_alloc<int64_t>(2, 1);
  SD_ASSERT_OK(sdLaunchHostFunc(stream, Gate::wait_fn, &gate));
  int64_t value = 77;
  void* args[] = {&out, &value};
  const size_t sizes[] = {sizeof(out), sizeof(value)};
  SD_ASSERT_OK(sdLaunchKernel(kernel("store_value_and_device"), 1, 1, 1, args, sizes, 2, stream));
  SD_ASSERT_OK(sdModuleUnload(module_));  // the library stays mapped for the queued launch
  module_ = nullptr;
  gate.open();
  int64_t result[2] = {};
  SD_ASSERT_OK(sdMemcpy(result, out, sizeof(result), sdMemcpyDeviceToHost, stream));
  EXPECT_EQ(result[0], 77);
  SD_ASSERT_OK(sdFree(out));
}

}  // namespace
