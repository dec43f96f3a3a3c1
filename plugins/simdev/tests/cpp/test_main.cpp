// Test entry point: pins the simdev environment before anything reads it, so
// the suite's results do not depend on the caller's SIMDEV_* variables.
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  unsetenv("SIMDEV_DEVICE_COUNT");                 // the default: 2 devices
  unsetenv("SIMDEV_OP_DELAY_US");                  // the default: no delay
  setenv("SIMDEV_MEMORY_CAPACITY", "67108864", 1);  // 64 MiB keeps OOM tests cheap
  ::testing::InitGoogleTest(&argc, argv);
  // test_config.cpp checks environment parsing in child processes; the
  // threadsafe style re-executes this binary, so each child reads the
  // environment afresh rather than inheriting an initialized runtime.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  return RUN_ALL_TESTS();
}
