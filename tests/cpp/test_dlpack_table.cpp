// The exchange table's shape, current_work_stream and delegation, called as C
// code calls them. No Python interpreter runs in this process: errors are
// checked through devbridge's thread-local last error.
#include <gtest/gtest.h>

#include <string>

#include "devbridge/dlpack_exchange.h"
#include "devbridge/runtime.h"

namespace devbridge {
namespace {

TEST(ExchangeTable, VersionAndFunctions) {
  const DLPackExchangeAPI* api = ExchangeAPI();
  ASSERT_EQ(api, ExchangeAPI()) << "the table is a process-lifetime static";
  EXPECT_EQ(api->header.version.major, 1u);
  EXPECT_EQ(api->header.version.minor, 3u);
  EXPECT_EQ(api->header.prev_api, nullptr);
  EXPECT_NE(api->managed_tensor_allocator, nullptr);
  EXPECT_NE(api->managed_tensor_from_py_object_no_sync, nullptr);
  EXPECT_NE(api->managed_tensor_to_py_object_no_sync, nullptr);
  EXPECT_NE(api->dltensor_from_py_object_no_sync, nullptr);
  EXPECT_NE(api->current_work_stream, nullptr);
}

TEST(CurrentWorkStream, HostMemoryHasNoStream) {
  for (DLDeviceType type : {kDLCPU, kDLCUDAHost, kDLROCMHost}) {
    void* stream = reinterpret_cast<void*>(1);
    EXPECT_EQ(ExchangeAPI()->current_work_stream(type, 0, &stream), 0);
    EXPECT_EQ(stream, nullptr);
  }
}

TEST(CurrentWorkStream, NullOutputFails) {
  EXPECT_EQ(ExchangeAPI()->current_work_stream(kDLCPU, 0, nullptr), -1);
  EXPECT_NE(std::string(GetLastError()).find("out_current_stream == NULL"), std::string::npos)
      << GetLastError();
}

TEST(CurrentWorkStream, PluginNotLoadedFails) {
  void* stream = nullptr;
  EXPECT_EQ(ExchangeAPI()->current_work_stream(kDLExtDev, 0, &stream), -1);
  EXPECT_NE(std::string(GetLastError()).find("no PrivateUse1 backend is loaded"),
            std::string::npos)
      << GetLastError();
}

TEST(CurrentWorkStream, UnknownTypeWithoutDelegateIsNull) {
  ASSERT_EQ(DelegateExchangeAPI(), nullptr);
  void* stream = reinterpret_cast<void*>(1);
  EXPECT_EQ(ExchangeAPI()->current_work_stream(static_cast<DLDeviceType>(99), 0, &stream), 0);
  EXPECT_EQ(stream, nullptr);
  // CUDA on a CPU-only torch: no delegate, no c10 backend -> NULL, no error.
  stream = reinterpret_cast<void*>(1);
  EXPECT_EQ(ExchangeAPI()->current_work_stream(kDLCUDA, 0, &stream), 0);
  EXPECT_EQ(stream, nullptr);
}

// Stands in for PyTorch's table, which lives in libtorch_python behind a
// Python capsule (the Python tests delegate to the real one).
struct RecordingTable {
  static int CurrentWorkStream(DLDeviceType type, int32_t id, void** out) {
    last_type = type;
    last_id = id;
    *out = reinterpret_cast<void*>(static_cast<uintptr_t>(0xc0da));
    return 0;
  }
  static inline DLDeviceType last_type = kDLCPU;
  static inline int32_t last_id = -1;
};

TEST(CurrentWorkStream, OtherDevicesAreDelegated) {
  DLPackExchangeAPI delegate{};
  delegate.header.version.major = DLPACK_MAJOR_VERSION;
  delegate.header.version.minor = DLPACK_MINOR_VERSION;
  delegate.current_work_stream = &RecordingTable::CurrentWorkStream;
  SetDelegateExchangeAPI(&delegate);
  void* stream = nullptr;
  EXPECT_EQ(ExchangeAPI()->current_work_stream(kDLCUDA, 3, &stream), 0);
  EXPECT_EQ(stream, reinterpret_cast<void*>(static_cast<uintptr_t>(0xc0da)));
  EXPECT_EQ(RecordingTable::last_type, kDLCUDA);
  EXPECT_EQ(RecordingTable::last_id, 3);
  // Not delegated: CPU (NULL by definition) and the plugin's own type.
  RecordingTable::last_id = -1;
  EXPECT_EQ(ExchangeAPI()->current_work_stream(kDLCPU, 0, &stream), 0);
  EXPECT_EQ(stream, nullptr);
  EXPECT_EQ(ExchangeAPI()->current_work_stream(kDLExtDev, 0, &stream), -1);
  EXPECT_EQ(RecordingTable::last_id, -1);
  SetDelegateExchangeAPI(nullptr);
}

TEST(CurrentWorkStream, DelegateMustNotBeOurselvesOrAnotherMajor) {
  EXPECT_THROW(SetDelegateExchangeAPI(ExchangeAPI()), Error);
  DLPackExchangeAPI other{};
  other.header.version.major = DLPACK_MAJOR_VERSION + 1;
  other.current_work_stream = &RecordingTable::CurrentWorkStream;
  EXPECT_THROW(SetDelegateExchangeAPI(&other), Error);
  DLPackExchangeAPI incomplete{};
  incomplete.header.version.major = DLPACK_MAJOR_VERSION;
  EXPECT_THROW(SetDelegateExchangeAPI(&incomplete), Error);
  EXPECT_EQ(DelegateExchangeAPI(), nullptr);
}

TEST(ExchangeTableEntryPoints, NullArgumentsFailWithoutCrashing) {
  const DLPackExchangeAPI* api = ExchangeAPI();
  DLManagedTensorVersioned* managed = nullptr;
  EXPECT_EQ(api->managed_tensor_from_py_object_no_sync(nullptr, &managed), -1);
  EXPECT_NE(std::string(GetLastError()).find("py_object is NULL"), std::string::npos);
  EXPECT_EQ(api->managed_tensor_from_py_object_no_sync(nullptr, nullptr), -1);
  DLTensor tensor{};
  EXPECT_EQ(api->dltensor_from_py_object_no_sync(nullptr, &tensor), -1);
  EXPECT_EQ(api->dltensor_from_py_object_no_sync(nullptr, nullptr), -1);
  void* object = nullptr;
  EXPECT_EQ(api->managed_tensor_to_py_object_no_sync(nullptr, &object), -1);
  EXPECT_NE(std::string(GetLastError()).find("tensor == NULL"), std::string::npos);
}

}  // namespace
}  // namespace devbridge
