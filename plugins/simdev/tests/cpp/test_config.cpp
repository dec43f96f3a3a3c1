// Environment configuration. The runtime reads SIMDEV_* once, on first use,
// so each case runs in a fresh child process (a gtest death test that exits
// 0 when its checks pass) with the environment it needs.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "test_util.h"

namespace {

// In the child: report a failed check on stderr (gtest shows it) and exit 1.
void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "check failed: %s (last error: '%s')\n", what, sdGetLastErrorString());
    std::exit(1);
  }
}

bool last_error_contains(const char* needle) { return std::strstr(sdGetLastErrorString(), needle) != nullptr; }

// Runs `body` in a child process; the test fails unless the child's checks pass.
void expect_in_child(const std::function<void()>& body) {
  EXPECT_EXIT(
      {
        body();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// Every entry point that depends on the configuration fails the same way.
void check_rejected(const char* variable) {
  int value = 0;
  void* ptr = nullptr;
  sdStream_t stream = nullptr;
  uint32_t delay = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {  // keeps failing, not only once
    check(sdGetDeviceCount(&value) == sdErrorInvalidValue, "sdGetDeviceCount fails");
    check(last_error_contains("sdGetDeviceCount: environment variable"), "message names the function");
    check(last_error_contains(variable), "message names the variable");
    check(sdSetDevice(0) == sdErrorInvalidValue && last_error_contains(variable), "sdSetDevice fails");
    check(sdGetDevice(&value) == sdErrorInvalidValue, "sdGetDevice fails");
    check(sdMalloc(&ptr, 8, 0) == sdErrorInvalidValue, "sdMalloc fails");
    check(sdStreamGetDefault(0, &stream) == sdErrorInvalidValue, "sdStreamGetDefault fails");
    check(sdStreamCreate(0, &stream) == sdErrorInvalidValue, "sdStreamCreate fails");
    check(sdGetOpDelay(&delay) == sdErrorInvalidValue, "sdGetOpDelay fails");
  }
}

TEST(ConfigTest, RejectsMalformedDeviceCount) {
  for (const char* bad : {"two", "0", "-1", "65", "2x", " 2", "99999999999999999999999"}) {
    SCOPED_TRACE(bad);
    expect_in_child([bad] {
      setenv("SIMDEV_DEVICE_COUNT", bad, 1);
      check_rejected("SIMDEV_DEVICE_COUNT");
      check(last_error_contains("[1, 64]"), "message gives the valid range");
    });
  }
}

TEST(ConfigTest, RejectsMalformedMemoryCapacity) {
  for (const char* bad : {"4GiB", "0", "1e9", "-5"}) {
    SCOPED_TRACE(bad);
    expect_in_child([bad] {
      setenv("SIMDEV_MEMORY_CAPACITY", bad, 1);
      check_rejected("SIMDEV_MEMORY_CAPACITY");
    });
  }
}

TEST(ConfigTest, RejectsMalformedOpDelay) {
  for (const char* bad : {"fast", "-5", "4294967296"}) {
    SCOPED_TRACE(bad);
    expect_in_child([bad] {
      setenv("SIMDEV_OP_DELAY_US", bad, 1);
      check_rejected("SIMDEV_OP_DELAY_US");
    });
  }
}

TEST(ConfigTest, DefaultsApplyWhenUnsetOrEmpty) {
  for (const bool empty : {false, true}) {
    SCOPED_TRACE(empty ? "empty" : "unset");
    expect_in_child([empty] {
      for (const char* variable : {"SIMDEV_DEVICE_COUNT", "SIMDEV_MEMORY_CAPACITY", "SIMDEV_OP_DELAY_US"}) {
        if (empty) {
          setenv(variable, "", 1);
        } else {
          unsetenv(variable);
        }
      }
      int count = 0;
      size_t used = 1, capacity = 0;
      uint32_t delay = 1;
      check(sdGetDeviceCount(&count) == sdSuccess && count == 2, "2 devices");
      check(sdMemGetInfo(1, &used, &capacity) == sdSuccess, "sdMemGetInfo");
      check(used == 0 && capacity == (size_t{4} << 30), "4 GiB per device");
      check(sdGetOpDelay(&delay) == sdSuccess && delay == 0, "no delay");
    });
  }
}

TEST(ConfigTest, HonorsWellFormedValues) {
  expect_in_child([] {
    setenv("SIMDEV_DEVICE_COUNT", "3", 1);
    setenv("SIMDEV_MEMORY_CAPACITY", "1000", 1);
    setenv("SIMDEV_OP_DELAY_US", "2500", 1);
    int count = 0;
    size_t used = 0, capacity = 0;
    uint32_t delay = 0;
    void* ptr = nullptr;
    check(sdGetDeviceCount(&count) == sdSuccess && count == 3, "3 devices");
    check(sdSetDevice(2) == sdSuccess, "device 2 exists");
    check(sdSetDevice(3) == sdErrorInvalidDevice && last_error_contains("simdev has 3 devices"), "no device 3");
    check(sdMemGetInfo(2, &used, &capacity) == sdSuccess && capacity == 1000, "capacity 1000");
    check(sdMalloc(&ptr, 1001, 2) == sdErrorMemoryAllocation, "1001 bytes exceed it");
    check(sdMalloc(&ptr, 1000, 2) == sdSuccess && sdFree(ptr) == sdSuccess, "1000 bytes fit");
    check(sdGetOpDelay(&delay) == sdSuccess && delay == 2500, "delay 2500 us");
  });
}

}  // namespace
