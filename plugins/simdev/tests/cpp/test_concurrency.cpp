// Many host threads using the runtime at once. Run under TSan to check the
// runtime's own synchronization (see the README's sanitizer builds).
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {

using simdev_test::SimdevTest;
using ConcurrencyTest = SimdevTest;

constexpr int kThreads = 16;

template <typename Body>
void run_threads(Body body) {
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(body, t);
  for (auto& thread : threads) thread.join();
}

TEST_F(ConcurrencyTest, ThreadsAllocateCopyLaunchAndFreeAtOnce) {
  sdModule_t module = nullptr;
  SD_ASSERT_OK(sdModuleLoad(&module, SIMDEV_TEST_KERNELS_PATH));
  sdFunction_t vector_add = nullptr;
  SD_ASSERT_OK(sdModuleGetFunction(&vector_add, module, "vector_add"));
  std::atomic<int> failures{0};
  run_threads([&](int t) {
    const int device = t % 2;
    auto check = [&](sdError_t status) {
      if (status != sdSuccess) ++failures;
    };
    check(sdSetDevice(device));
    sdStream_t stream = nullptr;
    check(sdStreamCreate(device, &stream));
    constexpr int64_t n = 300;
    for (int iteration = 0; iteration < 10; ++iteration) {
      std::vector<float> x(n, static_cast<float>(t)), y(n, static_cast<float>(iteration)), out(n, -1);
      float *dx = nullptr, *dy = nullptr, *dout = nullptr;
      check(sdMalloc(reinterpret_cast<void**>(&dx), n * sizeof(float), device));
      check(sdMalloc(reinterpret_cast<void**>(&dy), n * sizeof(float), device));
      check(sdMalloc(reinterpret_cast<void**>(&dout), n * sizeof(float), device));
      check(sdMemcpyAsync(dx, x.data(), n * sizeof(float), sdMemcpyHostToDevice, stream));
      check(sdMemcpyAsync(dy, y.data(), n * sizeof(float), sdMemcpyHostToDevice, stream));
      int64_t count = n;
      void* args[] = {&dx, &dy, &dout, &count};
      const size_t sizes[] = {sizeof(dx), sizeof(dy), sizeof(dout), sizeof(count)};
      check(sdLaunchKernel(vector_add, 2, 1, 1, args, sizes, 4, stream));
      check(sdMemcpy(out.data(), dout, n * sizeof(float), sdMemcpyDeviceToHost, stream));
      for (float v : out) {
        if (v != static_cast<float>(t + iteration)) ++failures;
      }
      for (float* ptr : {dx, dy, dout}) check(sdFree(ptr));
    }
    int current = -1;
    check(sdGetDevice(&current));
    if (current != device) ++failures;
    check(sdStreamDestroy(stream));
  });
  EXPECT_EQ(failures.load(), 0);
  size_t used = 1, capacity = 0;
  SD_ASSERT_OK(sdMemGetInfo(0, &used, &capacity));
  EXPECT_EQ(used, 0u);
  SD_ASSERT_OK(sdModuleUnload(module));
}

TEST_F(ConcurrencyTest, OneStreamSerializesWorkFromManyThreads) {
  // The counter is deliberately not atomic: the stream's single worker runs
  // the increments one at a time, which TSan verifies.
  struct Counter {
    int64_t value = 0;
  } counter;
  sdStream_t stream = default_stream(1);
  std::atomic<int> failures{0};
  run_threads([&](int) {
    for (int i = 0; i < 100; ++i) {
      const sdError_t status = sdLaunchHostFunc(
          stream,
          [](void* c) {
            ++static_cast<Counter*>(c)->value;
            return 0;
          },
          &counter);
      if (status != sdSuccess) ++failures;
    }
  });
  SD_ASSERT_OK(sdStreamSynchronize(stream));
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(counter.value, kThreads * 100);
}

TEST_F(ConcurrencyTest, PipelinesOfEventsAcrossThreads) {
  std::atomic<int> failures{0};
  run_threads([&](int t) {
    sdStream_t producer = nullptr, consumer = nullptr;
    sdEvent_t event = nullptr;
    int32_t* data = nullptr;  // on the producer's device
    int32_t* copy = nullptr;  // on the consumer's device
    if (sdStreamCreate(t % 2, &producer) || sdStreamCreate((t + 1) % 2, &consumer) ||
        sdEventCreate(&event, sdEventDefault) || sdMalloc(reinterpret_cast<void**>(&data), 4, t % 2) ||
        sdMalloc(reinterpret_cast<void**>(&copy), 4, (t + 1) % 2)) {
      ++failures;
      return;
    }
    for (int32_t i = 0; i < 20; ++i) {
      int32_t seen = -1;
      const int32_t value = t * 1000 + i;
      if (sdMemcpyAsync(data, &value, 4, sdMemcpyHostToDevice, producer) || sdEventRecord(event, producer) ||
          sdStreamWaitEvent(consumer, event) ||
          sdMemcpyAsync(copy, data, 4, sdMemcpyDeviceToDevice, consumer) ||
          sdMemcpyAsync(&seen, copy, 4, sdMemcpyDeviceToHost, consumer) || sdStreamSynchronize(consumer) ||
          seen != value) {
        ++failures;
      }
    }
    if (sdStreamDestroy(producer) || sdStreamDestroy(consumer) || sdEventDestroy(event) || sdFree(data) ||
        sdFree(copy)) {
      ++failures;
    }
  });
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(ConcurrencyTest, DestroyRacingWithEnqueueNeverCrashes) {
  for (int round = 0; round < 5; ++round) {
    sdStream_t stream = nullptr;
    SD_ASSERT_OK(sdStreamCreate(0, &stream));
    std::atomic<int> unexpected{0};
    std::atomic<bool> destroyed{false};
    std::thread destroyer([&] {
      std::this_thread::yield();
      if (sdStreamDestroy(stream) != sdSuccess) ++unexpected;
      destroyed = true;
    });
    run_threads([&](int) {
      for (int i = 0; i < 50; ++i) {
        const sdError_t status = sdLaunchHostFunc(stream, [](void*) { return 0; }, nullptr);
        // Either queued before the destroy (and run by it) or rejected.
        if (status != sdSuccess && status != sdErrorInvalidStream) ++unexpected;
      }
    });
    destroyer.join();
    EXPECT_TRUE(destroyed.load());
    EXPECT_EQ(unexpected.load(), 0);
    EXPECT_EQ(sdStreamQuery(stream), sdErrorInvalidStream);
  }
}

TEST_F(ConcurrencyTest, ManyStreamsAndEventsComeAndGo) {
  std::atomic<int> failures{0};
  run_threads([&](int t) {
    for (int i = 0; i < 20; ++i) {
      sdStream_t stream = nullptr;
      sdEvent_t event = nullptr;
      if (sdStreamCreate((t + i) % 2, &stream) || sdEventCreate(&event, sdEventDefault) ||
          sdEventRecord(event, stream) || sdEventSynchronize(event) || sdEventDestroy(event) ||
          sdStreamDestroy(stream)) {
        ++failures;
      }
    }
  });
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
