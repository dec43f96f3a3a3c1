// The plugin's stream hooks, on a PrivateUse1 backend that is only c10's
// NoOpDeviceGuardImpl (one device, one stream, no native handle, no events):
// the fast current-stream query, the external-stream hook, and the runtime
// table's wait_current_stream built on them. Every failure through the C
// tables comes back as -1 and a message, never as an exception.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <gtest/gtest.h>

#include <string>

#include "devbridge/c_runtime_api.h"
#include "devbridge/dlpack_exchange.h"
#include "devbridge/runtime.h"

namespace devbridge {
namespace {

using NoNativeHandleGuard = c10::impl::NoOpDeviceGuardImpl<c10::DeviceType::PrivateUse1>;
const NoNativeHandleGuard g_guard;

void* const kQueryHandle = reinterpret_cast<void*>(0xc000);
void* const kResolverHandle = reinterpret_cast<void*>(0xd000);
void* const kForeignHandle = reinterpret_cast<void*>(0xe000);
constexpr int64_t kOtherStreamId = 5;

int g_query_calls = 0;
int AnsweringQuery(int32_t device_index, void** out_stream) {
  ++g_query_calls;
  *out_stream = reinterpret_cast<char*>(kQueryHandle) + device_index;
  return 0;
}
int FailingQuery(int32_t, void**) { return -1; }

int Resolver(int32_t, int64_t, void** out_stream) {
  *out_stream = kResolverHandle;
  return 0;
}

// Knows the current stream (id 0) by the query's handle, and one other
// stream; anything else is not a stream of the device.
int ExternalStreamHook(int32_t, void* native, int64_t* out_stream_id) {
  if (native == kQueryHandle) {
    *out_stream_id = 0;
    return 0;
  }
  if (native == kForeignHandle) {
    *out_stream_id = kOtherStreamId;
    return 0;
  }
  return -1;
}

class PluginStreamHooks : public ::testing::Test {
 protected:
  void SetUp() override {
    c10::impl::DeviceGuardImplRegistrar(c10::DeviceType::PrivateUse1, &g_guard);
    g_query_calls = 0;
  }
  void TearDown() override {
    SetCurrentStreamQuery(c10::DeviceType::PrivateUse1, nullptr);
    SetExternalStreamHook(c10::DeviceType::PrivateUse1, nullptr);
    UnregisterStreamResolver(c10::DeviceType::PrivateUse1);
  }
  std::string last_error() const { return api->get_last_error(); }
  const DeviceRuntime& plugin = DeviceRuntime::For(c10::DeviceType::PrivateUse1);
  const DevbridgeRuntimeAPI* api = RuntimeAPI();
};

TEST_F(PluginStreamHooks, TheQueryAnswersForEveryTableWithoutTheGuard) {
  SetCurrentStreamQuery(c10::DeviceType::PrivateUse1, &AnsweringQuery);
  EXPECT_EQ(GetCurrentStreamQuery(c10::DeviceType::PrivateUse1), &AnsweringQuery);
  EXPECT_EQ(plugin.NativeStreamSourceOf(0), NativeStreamSource::kQuery);
  // Twice: the first call takes the slow path (learns the device count),
  // the second the fast one; both ask the query, not the guard (which has
  // no native handle and would throw).
  EXPECT_EQ(plugin.CurrentNativeStream(0), kQueryHandle);
  EXPECT_EQ(plugin.CurrentNativeStream(0), kQueryHandle);
  void* stream = nullptr;
  ASSERT_EQ(ExchangeAPI()->current_work_stream(kDLExtDev, 0, &stream), 0);
  EXPECT_EQ(stream, kQueryHandle);
  ASSERT_EQ(api->current_stream(kDLExtDev, 0, &stream), 0) << last_error();
  EXPECT_EQ(stream, kQueryHandle);
  EXPECT_EQ(g_query_calls, 4);
}

TEST_F(PluginStreamHooks, TheQueryIsAskedOnlyForDevicesThatExist) {
  SetCurrentStreamQuery(c10::DeviceType::PrivateUse1, &AnsweringQuery);
  void* stream = nullptr;
  EXPECT_EQ(api->current_stream(kDLExtDev, 1, &stream), -1);
  EXPECT_NE(last_error().find("device index 1 is out of range for privateuseone, which has 1"),
            std::string::npos)
      << last_error();
  EXPECT_EQ(g_query_calls, 0);
}

TEST_F(PluginStreamHooks, AFailingQueryIsReportedWithTheFix) {
  SetCurrentStreamQuery(c10::DeviceType::PrivateUse1, &FailingQuery);
  void* stream = nullptr;
  for (int attempt = 0; attempt < 2; ++attempt) {  // slow path, then fast path
    ASSERT_EQ(api->current_stream(kDLExtDev, 0, &stream), -1);
    EXPECT_NE(last_error().find("the current-stream query registered for privateuseone"),
              std::string::npos)
        << last_error();
    EXPECT_NE(last_error().find("register_current_stream_query(None, 'privateuseone')"),
              std::string::npos);
  }
}

TEST_F(PluginStreamHooks, AResolverTakesPrecedenceOverTheQuery) {
  SetCurrentStreamQuery(c10::DeviceType::PrivateUse1, &AnsweringQuery);
  StreamResolver resolver;
  resolver.c_function = &Resolver;
  resolver.description = "test resolver";
  RegisterStreamResolver(c10::DeviceType::PrivateUse1, resolver);
  EXPECT_EQ(plugin.NativeStreamSourceOf(0), NativeStreamSource::kResolver);
  EXPECT_EQ(plugin.CurrentNativeStream(0), kResolverHandle);
  EXPECT_EQ(g_query_calls, 0);
}

TEST_F(PluginStreamHooks, TheHookNamesTheStream) {
  SetExternalStreamHook(c10::DeviceType::PrivateUse1, &ExternalStreamHook);
  const c10::Stream other = plugin.StreamFromNative(0, kForeignHandle);
  EXPECT_EQ(other.id(), kOtherStreamId);
  EXPECT_EQ(other.device(), c10::Device(c10::DeviceType::PrivateUse1, 0));
  try {
    plugin.StreamFromNative(0, kResolverHandle);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kValue);
    EXPECT_NE(std::string(error.what()).find("0xd000 is not a stream of privateuseone:0"),
              std::string::npos)
        << error.what();
  }
}

TEST_F(PluginStreamHooks, WithoutAHookOnlyTheCurrentOrDefaultStreamIsRecognised) {
  StreamResolver resolver;  // the guard has no native handle: the resolver answers
  resolver.c_function = &Resolver;
  RegisterStreamResolver(c10::DeviceType::PrivateUse1, resolver);
  EXPECT_EQ(plugin.StreamFromNative(0, kResolverHandle).id(), 0);
  try {
    plugin.StreamFromNative(0, kForeignHandle);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kBuffer);
    const std::string message = error.what();
    EXPECT_NE(message.find("neither the current nor the default stream of privateuseone:0"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("devbridge.register_external_stream_hook(capsule, 'privateuseone')"),
              std::string::npos);
  }
}

TEST_F(PluginStreamHooks, WaitCurrentStreamThroughTheRuntimeTable) {
  SetExternalStreamHook(c10::DeviceType::PrivateUse1, &ExternalStreamHook);
  // The current stream itself: nothing to wait for.
  EXPECT_EQ(api->wait_current_stream(kDLExtDev, 0, kQueryHandle), 0) << last_error();
  // Another stream needs an event, which this guard cannot make: the c10
  // error comes back as -1 and a message.
  EXPECT_EQ(api->wait_current_stream(kDLExtDev, 0, kForeignHandle), -1);
  EXPECT_NE(last_error().find("doesn't support events"), std::string::npos) << last_error();
  EXPECT_EQ(api->wait_current_stream(kDLExtDev, 0, kResolverHandle), -1);
  EXPECT_NE(last_error().find("is not a stream of privateuseone:0"), std::string::npos);
  EXPECT_EQ(api->wait_current_stream(kDLExtDev, 3, kQueryHandle), -1);
  EXPECT_NE(last_error().find("out of range"), std::string::npos) << last_error();
  EXPECT_EQ(api->wait_current_stream(99, 0, kQueryHandle), -1);
  EXPECT_NE(last_error().find("unknown (99)"), std::string::npos) << last_error();
}

TEST_F(PluginStreamHooks, WaitCurrentStreamOnTheCpu) {
  EXPECT_EQ(api->wait_current_stream(kDLCPU, 0, nullptr), 0) << last_error();
  EXPECT_EQ(api->wait_current_stream(kDLCPU, 0, kQueryHandle), -1);
  EXPECT_NE(last_error().find("kDLCPU, which has no streams; pass NULL"), std::string::npos)
      << last_error();
}

}  // namespace
}  // namespace devbridge
