// Process-wide switches (devbridge.install's keyword arguments).
#include <cstdlib>
#include <cstring>

#include "devbridge/runtime.h"

namespace devbridge {
namespace {

// Separate atomics: each switch is read on its own, on paths that must not
// take a lock (the NULL-stream opt-in is read from current_work_stream).
std::atomic<bool> g_allow_null_stream{false};
std::atomic<bool> g_accept_ascend{false};
std::atomic<bool> g_export_ascend{false};

}  // namespace

Options GetOptions() noexcept {
  Options options;
  options.allow_null_stream = g_allow_null_stream.load(std::memory_order_relaxed);
  options.accept_ascend_device_type = g_accept_ascend.load(std::memory_order_relaxed);
  options.export_ascend_device_type = g_export_ascend.load(std::memory_order_relaxed);
  return options;
}

void SetOptions(const Options& options) noexcept {
  g_allow_null_stream.store(options.allow_null_stream, std::memory_order_relaxed);
  g_accept_ascend.store(options.accept_ascend_device_type, std::memory_order_relaxed);
  g_export_ascend.store(options.export_ascend_device_type, std::memory_order_relaxed);
}

bool NullStreamAllowed() noexcept {
  if (g_allow_null_stream.load(std::memory_order_relaxed)) return true;
  // Read on each (failing) call rather than once, so a test or a launcher
  // script can set it after devbridge was loaded. Only failure paths get here.
  const char* env = std::getenv("DEVBRIDGE_ALLOW_NULL_STREAM");
  return env != nullptr && std::strcmp(env, "1") == 0;
}

}  // namespace devbridge
