// managed_tensor_allocator on CPU: results, errors through SetError only,
// and calls from threads that never held the GIL.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "devbridge/dlpack_exchange.h"

namespace devbridge {
namespace {

struct ErrorRecord {
  int calls = 0;
  std::string kind;
  std::string message;
};

void RecordError(void* context, const char* kind, const char* message) {
  auto* record = static_cast<ErrorRecord*>(context);
  ++record->calls;
  record->kind = kind;
  record->message = message;
}

DLTensor Prototype(std::vector<int64_t>& shape, DLDataType dtype, DLDevice device) {
  DLTensor prototype{};
  prototype.device = device;
  prototype.ndim = static_cast<int32_t>(shape.size());
  prototype.dtype = dtype;
  prototype.shape = shape.data();
  return prototype;
}

constexpr DLDataType kFloat32{kDLFloat, 32, 1};
constexpr DLDevice kCpu{kDLCPU, 0};

TEST(Allocator, AllocatesAnOwningCompactTensor) {
  std::vector<int64_t> shape{2, 3, 4};
  DLTensor prototype = Prototype(shape, kFloat32, kCpu);
  DLManagedTensorVersioned* out = nullptr;
  ErrorRecord errors;
  ASSERT_EQ(ExchangeAPI()->managed_tensor_allocator(&prototype, &out, &errors, &RecordError), 0)
      << errors.message;
  EXPECT_EQ(errors.calls, 0);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->version.major, 1u);
  EXPECT_EQ(out->version.minor, 3u);
  EXPECT_EQ(out->flags, 0u);
  const DLTensor& t = out->dl_tensor;
  EXPECT_EQ(t.device.device_type, kDLCPU);
  EXPECT_EQ(t.ndim, 3);
  EXPECT_EQ(t.dtype.code, kDLFloat);
  EXPECT_EQ(t.dtype.bits, 32);
  EXPECT_EQ(t.shape[0], 2);
  EXPECT_EQ(t.shape[2], 4);
  EXPECT_EQ(t.strides[0], 12);
  EXPECT_EQ(t.strides[2], 1);
  EXPECT_EQ(t.byte_offset, 0u);
  ASSERT_NE(t.data, nullptr);
  static_cast<float*>(t.data)[23] = 1.5f;  // the memory is ours to write
  ASSERT_NE(out->deleter, nullptr);
  out->deleter(out);
}

TEST(Allocator, ZeroDimAndZeroSize) {
  std::vector<int64_t> scalar_shape;
  DLTensor scalar = Prototype(scalar_shape, kFloat32, kCpu);
  scalar.shape = nullptr;  // allowed for ndim == 0
  DLManagedTensorVersioned* out = nullptr;
  ASSERT_EQ(ExchangeAPI()->managed_tensor_allocator(&scalar, &out, nullptr, nullptr), 0);
  EXPECT_EQ(out->dl_tensor.ndim, 0);
  out->deleter(out);
  std::vector<int64_t> empty_shape{0, 5};
  DLTensor empty = Prototype(empty_shape, kFloat32, kCpu);
  ASSERT_EQ(ExchangeAPI()->managed_tensor_allocator(&empty, &out, nullptr, nullptr), 0);
  EXPECT_EQ(out->dl_tensor.shape[0], 0);
  out->deleter(out);
}

TEST(Allocator, WorksFromThreadsThatNeverHeldTheGil) {
  std::atomic<int> successes{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&successes, i] {
      std::vector<int64_t> shape{16, i + 1};
      DLTensor prototype = Prototype(shape, DLDataType{kDLInt, 64, 1}, kCpu);
      for (int round = 0; round < 50; ++round) {
        DLManagedTensorVersioned* out = nullptr;
        if (ExchangeAPI()->managed_tensor_allocator(&prototype, &out, nullptr, nullptr) != 0) return;
        static_cast<int64_t*>(out->dl_tensor.data)[0] = round;
        out->deleter(out);
      }
      ++successes;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(successes.load(), 4);
}

// Each bad prototype: -1, SetError called exactly once with a Python
// exception name and a message naming the problem, *out left NULL.
struct BadPrototypeCase {
  const char* name;
  DLTensor prototype;
  const char* kind;
  const char* message_part;
};

TEST(Allocator, BadPrototypesReportThroughSetErrorOnly) {
  std::vector<int64_t> shape{2, 2};
  std::vector<int64_t> negative{2, -1};
  DLTensor good = Prototype(shape, kFloat32, kCpu);
  DLTensor null_shape = good;
  null_shape.shape = nullptr;
  DLTensor negative_ndim = good;
  negative_ndim.ndim = -1;
  DLTensor negative_size = Prototype(negative, kFloat32, kCpu);
  DLTensor unknown_device = good;
  unknown_device.device = DLDevice{static_cast<DLDeviceType>(99), 0};
  DLTensor bad_dtype = good;
  bad_dtype.dtype = DLDataType{99, 8, 1};
  DLTensor no_plugin = good;
  no_plugin.device = DLDevice{kDLExtDev, 0};
  DLTensor bad_device_id = good;
  bad_device_id.device = DLDevice{kDLExtDev, -3};
  const BadPrototypeCase cases[] = {
      {"null shape", null_shape, "ValueError", "NULL shape"},
      {"negative ndim", negative_ndim, "ValueError", "negative ndim"},
      {"negative size", negative_size, "ValueError", "negative size -1 in dimension 1"},
      {"unknown device", unknown_device, "BufferError", "unknown (99)"},
      {"bad dtype", bad_dtype, "BufferError", "Unsupported code"},
      {"plugin not loaded", no_plugin, "RuntimeError", "no PrivateUse1 backend is loaded"},
      {"bad device id", bad_device_id, "ValueError", "device_id -3 is out of range"},
  };
  for (const auto& c : cases) {
    DLTensor prototype = c.prototype;
    DLManagedTensorVersioned* out = reinterpret_cast<DLManagedTensorVersioned*>(1);
    ErrorRecord errors;
    EXPECT_EQ(ExchangeAPI()->managed_tensor_allocator(&prototype, &out, &errors, &RecordError), -1)
        << c.name;
    EXPECT_EQ(out, nullptr) << c.name;
    EXPECT_EQ(errors.calls, 1) << c.name;
    EXPECT_EQ(errors.kind, c.kind) << c.name << ": " << errors.message;
    EXPECT_NE(errors.message.find(c.message_part), std::string::npos)
        << c.name << ": " << errors.message;
    // The same failure with no SetError at all: -1, no crash.
    EXPECT_EQ(ExchangeAPI()->managed_tensor_allocator(&prototype, &out, nullptr, nullptr), -1)
        << c.name;
  }
}

TEST(Allocator, NullPointersReportThroughSetError) {
  ErrorRecord errors;
  DLManagedTensorVersioned* out = nullptr;
  EXPECT_EQ(ExchangeAPI()->managed_tensor_allocator(nullptr, &out, &errors, &RecordError), -1);
  EXPECT_EQ(errors.calls, 1);
  EXPECT_NE(errors.message.find("prototype == NULL"), std::string::npos);
  std::vector<int64_t> shape{1};
  DLTensor prototype = Prototype(shape, kFloat32, kCpu);
  EXPECT_EQ(ExchangeAPI()->managed_tensor_allocator(&prototype, nullptr, &errors, &RecordError),
            -1);
  EXPECT_EQ(errors.calls, 2);
  EXPECT_NE(errors.message.find("out == NULL"), std::string::npos);
}

}  // namespace
}  // namespace devbridge
