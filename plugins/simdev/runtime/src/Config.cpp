#include "Config.h"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "Error.h"

namespace simdev {
namespace {

constexpr int kMaxDevices = 64;

// Parses the environment variable `name` as a plain decimal integer in
// [min, max]; an unset or empty variable yields `fallback`.
uint64_t readInteger(const char* name, uint64_t fallback, uint64_t min, uint64_t max) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  const bool digits_only = text[0] >= '0' && text[0] <= '9' && *end == '\0';
  if (!digits_only || errno == ERANGE || value < min || value > max) {
    throw error(sdErrorInvalidValue, "environment variable ", name, "='", text,
                "' is not a plain integer in [", min, ", ", max, "]; fix or unset it (default ",
                fallback, ")");
  }
  return value;
}

struct LoadedConfig {
  Config values{};
  std::string problem;  // non-empty when the environment was malformed
};

LoadedConfig load() {
  LoadedConfig loaded;
  try {
    loaded.values.device_count = static_cast<int>(readInteger("SIMDEV_DEVICE_COUNT", 2, 1, kMaxDevices));
    loaded.values.memory_capacity =
        readInteger("SIMDEV_MEMORY_CAPACITY", uint64_t{4} << 30, 1, uint64_t{1} << 48);
    loaded.values.op_delay_us =
        static_cast<uint32_t>(readInteger("SIMDEV_OP_DELAY_US", 0, 0, UINT32_MAX));
  } catch (const Error& e) {
    loaded.problem = e.what();
  }
  return loaded;
}

}  // namespace

const Config& config() {
  static const LoadedConfig loaded = load();  // thread-safe one-time initialization
  if (!loaded.problem.empty()) throw Error(sdErrorInvalidValue, loaded.problem);
  return loaded.values;
}

void requireDevice(int device) {
  const int count = config().device_count;
  if (device < 0 || device >= count) {
    throw error(sdErrorInvalidDevice, "device ", device, " is out of range; simdev has ", count,
                " device", count == 1 ? "" : "s", " (valid: 0..", count - 1,
                "; set SIMDEV_DEVICE_COUNT to change)");
  }
}

}  // namespace simdev
