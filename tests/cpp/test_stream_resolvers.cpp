// The resolver registry, exercised on CPU (whose guard has no native handle),
// as a plugin without getStreamNativeHandle would use it.
#include <gtest/gtest.h>

#include "devbridge/runtime.h"

namespace devbridge {
namespace {

// Encodes what it was asked, so the test sees that the runtime passed the
// current stream's device index and id through.
int EncodingResolver(int32_t device_index, int64_t stream_id, void** out_stream) {
  *out_stream = reinterpret_cast<void*>(static_cast<uintptr_t>(0x1000 + device_index * 0x100 +
                                                               stream_id));
  return 0;
}

int FailingResolver(int32_t, int64_t, void**) { return -1; }

int CountingCallback(void* context, int32_t, int64_t, void** out_stream) {
  int* calls = static_cast<int*>(context);
  ++*calls;
  *out_stream = reinterpret_cast<void*>(static_cast<uintptr_t>(0xbeef));
  return 0;
}

int ExplainingCallback(void*, int32_t, int64_t, void**) {
  SetLastError("the plugin's stream table is empty");
  return -1;
}

class StreamResolvers : public ::testing::Test {
 protected:
  void TearDown() override { UnregisterStreamResolver(c10::DeviceType::CPU); }
  const DeviceRuntime& cpu = DeviceRuntime::For(c10::DeviceType::CPU);
};

void* Encoded(int32_t device_index, int64_t stream_id) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(0x1000 + device_index * 0x100 + stream_id));
}

TEST_F(StreamResolvers, CFunctionAnswersForTheCurrentStream) {
  StreamResolver resolver;
  resolver.c_function = &EncodingResolver;
  resolver.description = "test C resolver";
  RegisterStreamResolver(c10::DeviceType::CPU, resolver);
  const c10::Stream stream = cpu.CurrentStream(0);
  // The resolver is asked about the device index the caller named...
  EXPECT_EQ(cpu.CurrentNativeStream(0), Encoded(0, stream.id()));
  // ...or, for an explicit stream, the stream's own (c10 says -1 for CPU).
  EXPECT_EQ(cpu.NativeHandle(stream), Encoded(stream.device_index(), stream.id()));
  EXPECT_EQ(cpu.NativeStreamSourceOf(0), NativeStreamSource::kResolver);
}

TEST_F(StreamResolvers, CallbackGetsItsContext) {
  int calls = 0;
  StreamResolver resolver;
  resolver.callback = &CountingCallback;
  resolver.context = &calls;
  resolver.description = "counting callback";
  RegisterStreamResolver(c10::DeviceType::CPU, resolver);
  EXPECT_EQ(cpu.CurrentNativeStream(0), reinterpret_cast<void*>(static_cast<uintptr_t>(0xbeef)));
  EXPECT_EQ(cpu.CurrentNativeStream(0), reinterpret_cast<void*>(static_cast<uintptr_t>(0xbeef)));
  EXPECT_EQ(calls, 2);
}

TEST_F(StreamResolvers, FailureNamesTheResolverAndCarriesItsMessage) {
  StreamResolver resolver;
  resolver.callback = &ExplainingCallback;
  resolver.description = "explaining callback";
  RegisterStreamResolver(c10::DeviceType::CPU, resolver);
  try {
    cpu.CurrentNativeStream(0);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("stream resolver registered for cpu (explaining callback) failed"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("the plugin's stream table is empty"), std::string::npos) << message;
  }
}

TEST_F(StreamResolvers, FailingCFunctionIsAnError) {
  StreamResolver resolver;
  resolver.c_function = &FailingResolver;
  resolver.description = "failing C resolver";
  RegisterStreamResolver(c10::DeviceType::CPU, resolver);
  EXPECT_THROW(cpu.CurrentNativeStream(0), Error);
}

TEST_F(StreamResolvers, UnregisterRestoresTheDefault) {
  StreamResolver resolver;
  resolver.c_function = &EncodingResolver;
  RegisterStreamResolver(c10::DeviceType::CPU, resolver);
  EXPECT_NE(FindStreamResolver(c10::DeviceType::CPU), nullptr);
  UnregisterStreamResolver(c10::DeviceType::CPU);
  EXPECT_EQ(FindStreamResolver(c10::DeviceType::CPU), nullptr);
  EXPECT_EQ(cpu.CurrentNativeStream(0), nullptr);
}

TEST_F(StreamResolvers, ReplacingKeepsTheOldOneAlive) {
  StreamResolver first;
  first.c_function = &EncodingResolver;
  RegisterStreamResolver(c10::DeviceType::CPU, first);
  const StreamResolver* old = FindStreamResolver(c10::DeviceType::CPU);
  StreamResolver second;
  second.c_function = &FailingResolver;
  RegisterStreamResolver(c10::DeviceType::CPU, second);
  // A reader that fetched `old` before the swap may still use it.
  EXPECT_EQ(old->c_function, &EncodingResolver);
  EXPECT_EQ(FindStreamResolver(c10::DeviceType::CPU)->c_function, &FailingResolver);
}

TEST_F(StreamResolvers, NeedsExactlyOneFunction) {
  EXPECT_THROW(RegisterStreamResolver(c10::DeviceType::CPU, StreamResolver{}), Error);
  StreamResolver both;
  both.c_function = &EncodingResolver;
  both.callback = &CountingCallback;
  EXPECT_THROW(RegisterStreamResolver(c10::DeviceType::CPU, both), Error);
  EXPECT_EQ(FindStreamResolver(c10::DeviceType::CPU), nullptr);
}

TEST(SubmitHooks, StoredPerDeviceType) {
  auto hook = [](int32_t, int32_t, void*, int (*)(void*, void*), void*) { return 0; };
  DevbridgeSubmitFn fn = hook;
  EXPECT_EQ(GetSubmitHook(c10::DeviceType::PrivateUse1), nullptr);
  SetSubmitHook(c10::DeviceType::PrivateUse1, fn);
  EXPECT_EQ(GetSubmitHook(c10::DeviceType::PrivateUse1), fn);
  EXPECT_EQ(GetSubmitHook(c10::DeviceType::CPU), nullptr);
  SetSubmitHook(c10::DeviceType::PrivateUse1, nullptr);
  EXPECT_EQ(GetSubmitHook(c10::DeviceType::PrivateUse1), nullptr);
}

}  // namespace
}  // namespace devbridge
