// Shared helpers for the simdev runtime tests.
#ifndef SIMDEV_TESTS_CPP_TEST_UTIL_H_
#define SIMDEV_TESTS_CPP_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <simdev/runtime.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

// Asserts success; on failure prints the code's name and the last error.
#define SD_ASSERT_OK(expr)                                                                      \
  do {                                                                                          \
    const sdError_t sd_status_ = (expr);                                                        \
    ASSERT_EQ(sd_status_, sdSuccess) << #expr << " -> " << sdGetErrorName(sd_status_) << ": " \
                                     << sdGetLastErrorString();                                 \
  } while (0)

// Expects `expr` to fail with `code` and a last-error message containing `needle`.
#define SD_EXPECT_ERROR(expr, code, needle)                                              \
  do {                                                                                   \
    const sdError_t sd_status_ = (expr);                                                 \
    EXPECT_EQ(sd_status_, code) << #expr << " -> " << sdGetErrorName(sd_status_) << ": " \
                                << sdGetLastErrorString();                               \
    EXPECT_NE(std::string(sdGetLastErrorString()).find(needle), std::string::npos)       \
        << #expr << ": message '" << sdGetLastErrorString() << "' lacks '" << needle << "'"; \
  } while (0)

namespace simdev_test {

// A one-shot gate: host functions queued with Gate::wait_fn block a stream's
// worker until the test opens the gate. This makes "work is still pending"
// states deterministic without relying on timing.
class Gate {
 public:
  Gate() = default;
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  // A test that fails before opening its gate must not leave a worker
  // waiting on a destroyed gate: open it and wait for the waiters to leave.
  ~Gate() {
    std::unique_lock<std::mutex> lock(mutex_);
    open_ = true;
    opened_.notify_all();
    left_.wait(lock, [this] { return waiters_ == 0; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    opened_.notify_all();
  }
  // Host function: waits for the gate; fails (non-zero) after 30 s so a
  // broken test cannot hang forever.
  static int wait_fn(void* gate) {
    auto* self = static_cast<Gate*>(gate);
    std::unique_lock<std::mutex> lock(self->mutex_);
    ++self->waiters_;
    const bool opened = self->opened_.wait_for(lock, std::chrono::seconds(30), [self] { return self->open_; });
    --self->waiters_;
    self->left_.notify_all();
    return opened ? 0 : 1;
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_, left_;
  bool open_ = false;
  int waiters_ = 0;
};

// Resets process-wide state that tests change (debug delay, current device)
// and drains every device, consuming any failure a test left on a stream.
class SimdevTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SD_ASSERT_OK(sdSetOpDelay(0));
    SD_ASSERT_OK(sdSetDevice(0));
  }
  void TearDown() override {
    sdSetOpDelay(0);
    int count = 0;
    sdGetDeviceCount(&count);
    for (int device = 0; device < count; ++device) sdDeviceSynchronize(device);
  }

  static sdStream_t default_stream(int device = 0) {
    sdStream_t stream = nullptr;
    EXPECT_EQ(sdStreamGetDefault(device, &stream), sdSuccess) << sdGetLastErrorString();
    return stream;
  }
};

}  // namespace simdev_test

#endif  // SIMDEV_TESTS_CPP_TEST_UTIL_H_
