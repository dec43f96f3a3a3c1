// A PrivateUse1 backend whose device guard does not override
// getStreamNativeHandle (plugins built for torch < 2.11, OpenReg today).
//
// The backend is c10's own NoOpDeviceGuardImpl registered for PrivateUse1:
// one device, one stream, and c10's default getStreamNativeHandle, which
// throws. This is exactly the guard shape devbridge must cope with; a second
// guard class adds the override, to check that devbridge notices when a
// plugin re-registers its guard.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "devbridge/dlpack_exchange.h"
#include "devbridge/runtime.h"

namespace devbridge {
namespace {

using PluginGuardWithoutHandle = c10::impl::NoOpDeviceGuardImpl<c10::DeviceType::PrivateUse1>;

// The no-op guard has a single stream, so constant handles identify who
// answered: 0xa000 the guard, 0xb000 the resolver.
void* const kGuardHandle = kGuardHandle;
void* const kResolverHandle = kResolverHandle;

struct PluginGuardWithHandle : PluginGuardWithoutHandle {
  void* getStreamNativeHandle(const c10::Stream) const override { return kGuardHandle; }
};

const PluginGuardWithoutHandle g_without_handle;
const PluginGuardWithHandle g_with_handle;

void RegisterPluginGuard(const c10::impl::DeviceGuardImplInterface* guard) {
  c10::impl::DeviceGuardImplRegistrar(c10::DeviceType::PrivateUse1, guard);
}

int PluginResolver(int32_t, int64_t, void** out_stream) {
  *out_stream = kResolverHandle;
  return 0;
}

class PluginWithoutNativeHandle : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterPluginGuard(&g_without_handle);
    unsetenv("DEVBRIDGE_ALLOW_NULL_STREAM");
  }
  void TearDown() override {
    SetOptions(Options{});
    UnregisterStreamResolver(c10::DeviceType::PrivateUse1);
    unsetenv("DEVBRIDGE_ALLOW_NULL_STREAM");
  }
  const DeviceRuntime& plugin = DeviceRuntime::For(c10::DeviceType::PrivateUse1);
  static void* CurrentWorkStream(int* rc) {
    void* stream = reinterpret_cast<void*>(1);
    *rc = ExchangeAPI()->current_work_stream(kDLExtDev, 0, &stream);
    return stream;
  }
};

TEST_F(PluginWithoutNativeHandle, ErrorNamesThePluginAndBothFixes) {
  EXPECT_EQ(plugin.NativeStreamSourceOf(0), NativeStreamSource::kMissing);
  try {
    plugin.CurrentNativeStream(0);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("PrivateUse1 plugin 'privateuseone' exposes no native stream handle"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("override DeviceGuardImplInterface::getStreamNativeHandle"),
              std::string::npos);
    EXPECT_NE(message.find("torch >= 2.11"), std::string::npos);
    EXPECT_NE(message.find("devbridge.register_stream_resolver("), std::string::npos);
    EXPECT_NE(message.find("allow_null_stream=True"), std::string::npos);
    EXPECT_NE(message.find("DEVBRIDGE_ALLOW_NULL_STREAM=1"), std::string::npos);
  }
  // The same through the DLPack table and the runtime table: -1, same text.
  int rc = 0;
  CurrentWorkStream(&rc);
  EXPECT_EQ(rc, -1);
  EXPECT_NE(std::string(GetLastError()).find("exposes no native stream handle"), std::string::npos);
  void* stream = nullptr;
  EXPECT_EQ(RuntimeAPI()->current_stream(kDLExtDev, 0, &stream), -1);
  EXPECT_NE(std::string(RuntimeAPI()->get_last_error()).find("register_stream_resolver"),
            std::string::npos);
}

TEST_F(PluginWithoutNativeHandle, NullStreamByOption) {
  Options options;
  options.allow_null_stream = true;
  SetOptions(options);
  EXPECT_EQ(plugin.CurrentNativeStream(0), nullptr);
  int rc = -1;
  EXPECT_EQ(CurrentWorkStream(&rc), nullptr);
  EXPECT_EQ(rc, 0);
}

TEST_F(PluginWithoutNativeHandle, NullStreamByEnvironment) {
  setenv("DEVBRIDGE_ALLOW_NULL_STREAM", "1", 1);
  int rc = -1;
  EXPECT_EQ(CurrentWorkStream(&rc), nullptr);
  EXPECT_EQ(rc, 0);
  setenv("DEVBRIDGE_ALLOW_NULL_STREAM", "0", 1);
  CurrentWorkStream(&rc);
  EXPECT_EQ(rc, -1);
}

TEST_F(PluginWithoutNativeHandle, ResolverSuppliesTheHandle) {
  StreamResolver resolver;
  resolver.c_function = &PluginResolver;
  resolver.description = "plugin resolver";
  RegisterStreamResolver(c10::DeviceType::PrivateUse1, resolver);
  EXPECT_EQ(plugin.NativeStreamSourceOf(0), NativeStreamSource::kResolver);
  int rc = -1;
  EXPECT_EQ(CurrentWorkStream(&rc), kResolverHandle);
  EXPECT_EQ(rc, 0);
}

TEST_F(PluginWithoutNativeHandle, AscendTypeReachesThePluginInTransitionMode) {
  StreamResolver resolver;
  resolver.c_function = &PluginResolver;
  RegisterStreamResolver(c10::DeviceType::PrivateUse1, resolver);
  void* stream = nullptr;
  const auto ascend = static_cast<DLDeviceType>(21);
  // Without transition mode 21 is not ours: no delegate here, so NULL.
  ASSERT_EQ(ExchangeAPI()->current_work_stream(ascend, 0, &stream), 0);
  EXPECT_EQ(stream, nullptr);
  Options options;
  options.accept_ascend_device_type = true;
  SetOptions(options);
  ASSERT_EQ(ExchangeAPI()->current_work_stream(ascend, 0, &stream), 0);
  EXPECT_EQ(stream, kResolverHandle);
}

TEST_F(PluginWithoutNativeHandle, ReRegisteredGuardWithOverrideIsNoticed) {
  EXPECT_EQ(plugin.NativeStreamSourceOf(0), NativeStreamSource::kMissing);
  RegisterPluginGuard(&g_with_handle);
  EXPECT_EQ(plugin.NativeStreamSourceOf(0), NativeStreamSource::kGuard);
  EXPECT_EQ(plugin.CurrentNativeStream(0), kGuardHandle);
  int rc = -1;
  EXPECT_EQ(CurrentWorkStream(&rc), kGuardHandle);
  EXPECT_EQ(rc, 0);
  // A registered resolver takes precedence over the guard.
  StreamResolver resolver;
  resolver.c_function = &PluginResolver;
  RegisterStreamResolver(c10::DeviceType::PrivateUse1, resolver);
  EXPECT_EQ(plugin.CurrentNativeStream(0), kResolverHandle);
}

TEST_F(PluginWithoutNativeHandle, DeviceQueriesGoThroughTheGuard) {
  EXPECT_TRUE(plugin.Available());
  EXPECT_EQ(plugin.DeviceCount(), 1);
  int32_t count = 0;
  ASSERT_EQ(RuntimeAPI()->device_count(kDLExtDev, &count), 0) << RuntimeAPI()->get_last_error();
  EXPECT_EQ(count, 1);
  void* stream = nullptr;
  EXPECT_EQ(RuntimeAPI()->current_stream(kDLExtDev, 1, &stream), -1);
  EXPECT_NE(std::string(RuntimeAPI()->get_last_error()).find("device index 1 is out of range"),
            std::string::npos)
      << RuntimeAPI()->get_last_error();
}

TEST_F(PluginWithoutNativeHandle, AllocatorFailureIsReportedNotThrown) {
  // This guard-only backend has no kernels, so at::empty fails inside the
  // allocator: the failure must come back through SetError.
  std::vector<int64_t> shape{4};
  DLTensor prototype{};
  prototype.device = DLDevice{kDLExtDev, 0};
  prototype.ndim = 1;
  prototype.dtype = DLDataType{kDLFloat, 32, 1};
  prototype.shape = shape.data();
  DLManagedTensorVersioned* out = nullptr;
  std::string kind;
  auto set_error = [](void* context, const char* error_kind, const char*) {
    *static_cast<std::string*>(context) = error_kind;
  };
  EXPECT_EQ(ExchangeAPI()->managed_tensor_allocator(&prototype, &out, &kind, set_error), -1);
  EXPECT_FALSE(kind.empty());
  EXPECT_EQ(out, nullptr);
}

}  // namespace
}  // namespace devbridge
