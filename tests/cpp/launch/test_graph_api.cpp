// devbridge's graph registry (src/graphs) and the graph ABI
// (include/devbridge/c_graph_api.h): bad tables are refused by name, a
// missing table names what to register, a plugin's failures come back as
// devbridge errors with the plugin's message, and a real table over the
// simdev runtime captures and replays. Torch-free: runs under TSan too.
#include <gtest/gtest.h>
#include <simdev/runtime.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "devbridge/c_graph_api.h"
#include "devbridge/error.h"
#include "graphs/graph_registry.h"

namespace devbridge {
namespace graphs {
namespace {

constexpr int32_t kExtDev = 12;

// A plugin's table as its author writes it, over the simdev runtime: every
// function returns 0/-1 and never throws (sd* functions never throw).
int Rc(sdError_t status) { return status == sdSuccess ? 0 : -1; }

DevbridgeGraphAPI SimdevTable() {
  DevbridgeGraphAPI api{};
  api.header = {DEVBRIDGE_GRAPH_API_MAJOR, DEVBRIDGE_GRAPH_API_MINOR, sizeof(DevbridgeGraphAPI)};
  api.name = "test graphs";
  api.capture_begin = [](void*, int32_t, void* stream) noexcept {
    return Rc(sdStreamBeginCapture(static_cast<sdStream_t>(stream)));
  };
  api.capture_end = [](void*, int32_t, void* stream, void** out) noexcept {
    return Rc(sdStreamEndCapture(static_cast<sdStream_t>(stream), reinterpret_cast<sdGraph_t*>(out)));
  };
  api.instantiate = [](void*, void* graph, void** out) noexcept {
    return Rc(sdGraphInstantiate(reinterpret_cast<sdGraphExec_t*>(out), static_cast<sdGraph_t>(graph)));
  };
  api.replay = [](void*, void* exec, int32_t, void* stream) noexcept {
    return Rc(sdGraphLaunch(static_cast<sdGraphExec_t>(exec), static_cast<sdStream_t>(stream)));
  };
  api.graph_destroy = [](void*, void* graph) noexcept { return Rc(sdGraphDestroy(static_cast<sdGraph_t>(graph))); };
  api.exec_destroy = [](void*, void* exec) noexcept {
    return Rc(sdGraphExecDestroy(static_cast<sdGraphExec_t>(exec)));
  };
  api.capture_status = [](void*, int32_t, void* stream, int32_t* out) noexcept {
    sdStreamCaptureStatus status = sdStreamCaptureStatusNone;
    const int rc = Rc(sdStreamGetCaptureStatus(static_cast<sdStream_t>(stream), &status));
    if (rc == 0) *out = status;
    return rc;
  };
  api.get_last_error = [](void*) noexcept { return sdGetLastErrorString(); };
  return api;
}

const DevbridgeGraphAPI kTable = SimdevTable();

std::string RegisterError(const DevbridgeGraphAPI* api) {
  try {
    Register(kExtDev, api, "testdev");
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kValue);
    return error.what();
  }
  return "";
}

class GraphApiTest : public ::testing::Test {
 protected:
  void TearDown() override { Unregister(kExtDev); }
};

TEST_F(GraphApiTest, BadTablesAreRefusedNamingTheField) {
  EXPECT_NE(RegisterError(nullptr).find("is NULL; hand over the address"), std::string::npos);
  DevbridgeGraphAPI api = kTable;
  api.header.major = 2;
  EXPECT_NE(RegisterError(&api).find("was written for major 2 of the graph ABI, and this devbridge reads major 1"),
            std::string::npos);
  api = kTable;
  api.header.size = sizeof(DevbridgeGraphAPIHeader);
  EXPECT_NE(RegisterError(&api).find("set header.size = sizeof(DevbridgeGraphAPI)"), std::string::npos);
  api = kTable;
  api.flags = 0x80;
  EXPECT_NE(RegisterError(&api).find("sets flags 0x80 with bits this devbridge does not know"), std::string::npos);
  api = kTable;
  api.name = nullptr;
  EXPECT_NE(RegisterError(&api).find("has a NULL name"), std::string::npos);
  // Each function in turn.
  const size_t first = offsetof(DevbridgeGraphAPI, capture_begin);
  const char* names[] = {"capture_begin", "capture_end",  "instantiate",    "replay",
                         "graph_destroy", "exec_destroy", "capture_status", "get_last_error"};
  for (size_t i = 0; i < 8; ++i) {
    api = kTable;
    std::memset(reinterpret_cast<char*>(&api) + first + i * sizeof(void (*)()), 0, sizeof(void (*)()));
    const std::string message = RegisterError(&api);
    EXPECT_NE(message.find(std::string("has a NULL ") + names[i]), std::string::npos) << message;
    EXPECT_NE(message.find("registered for 'testdev'"), std::string::npos) << message;
    EXPECT_NE(message.find("include/devbridge/c_graph_api.h"), std::string::npos) << message;
  }
  EXPECT_EQ(Find(kExtDev), nullptr) << "a refused table is never registered";
}

TEST_F(GraphApiTest, AMissingTableNamesWhatThePluginMustRegister) {
  EXPECT_EQ(CaptureStatus(kExtDev, 0, nullptr), kDevbridgeCaptureNone);
  EXPECT_NO_THROW(CheckSubmitHookMayLaunch(kExtDev, 0, nullptr, "testdev:0"));
  try {
    Require(kExtDev, "testdev");
    FAIL() << "Require succeeded without a table";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kNotImplemented);
    EXPECT_NE(std::string(error.what()).find("devbridge.graphs.register_graph_api(capsule, 'testdev')"),
              std::string::npos)
        << error.what();
  }
  EXPECT_EQ(Find(-1), nullptr);
  EXPECT_EQ(Find(1000), nullptr);
}

int Count(void* counter) {
  static_cast<std::atomic<int>*>(counter)->fetch_add(1);
  return 0;
}

TEST_F(GraphApiTest, CaptureAndReplayThroughTheRegisteredTable) {
  Register(kExtDev, &kTable, "testdev");
  const DevbridgeGraphAPI& api = Require(kExtDev, "testdev");
  EXPECT_NE(&api, &kTable) << "the registry keeps its own copy";
  sdStream_t stream = nullptr;
  ASSERT_EQ(sdStreamCreate(0, &stream), sdSuccess) << sdGetLastErrorString();
  std::atomic<int> calls{0};

  Check(api, api.capture_begin(api.self, 0, stream), "begin");
  EXPECT_EQ(CaptureStatus(kExtDev, 0, stream), kDevbridgeCaptureActive);
  ASSERT_EQ(sdLaunchHostFunc(stream, &Count, &calls), sdSuccess);
  // A hook-less table: launches through a submit hook are refused now.
  try {
    CheckSubmitHookMayLaunch(kExtDev, 0, stream, "testdev:0");
    FAIL() << "a submit-hook launch on a capturing stream was allowed";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("DEVBRIDGE_GRAPH_SUBMIT_HOOK_CAPTURES"), std::string::npos);
  }
  void* graph = nullptr;
  Check(api, api.capture_end(api.self, 0, stream, &graph), "end");
  EXPECT_EQ(CaptureStatus(kExtDev, 0, stream), kDevbridgeCaptureNone);
  EXPECT_NO_THROW(CheckSubmitHookMayLaunch(kExtDev, 0, stream, "testdev:0"));
  void* exec = nullptr;
  Check(api, api.instantiate(api.self, graph, &exec), "instantiate");
  for (int i = 0; i < 3; ++i) Check(api, api.replay(api.self, exec, 0, stream), "replay");
  ASSERT_EQ(sdStreamSynchronize(stream), sdSuccess);
  EXPECT_EQ(calls.load(), 3);

  // The plugin's refusals come back as devbridge errors carrying its message.
  try {
    Check(api, api.replay(api.self, graph, 0, stream), "replaying a graph on testdev:0");
    FAIL() << "replaying a graph handle succeeded";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_EQ(error.kind(), ErrorKind::kRuntime);
    EXPECT_NE(message.find("devbridge: replaying a graph on testdev:0: test graphs: sdGraphLaunch:"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("instantiate it"), std::string::npos) << message;
  }
  Check(api, api.graph_destroy(api.self, graph), "destroy");
  EXPECT_THROW(Check(api, api.graph_destroy(api.self, graph), "destroying twice"), Error);
  Check(api, api.exec_destroy(api.self, exec), "destroy exec");
  EXPECT_THROW(Check(api, api.exec_destroy(api.self, exec), "destroying twice"), Error);

  // A table that declares its submit hook capture-safe lets such launches through.
  DevbridgeGraphAPI hooked = kTable;
  hooked.flags = DEVBRIDGE_GRAPH_SUBMIT_HOOK_CAPTURES;
  Register(kExtDev, &hooked, "testdev");
  Check(api, api.capture_begin(api.self, 0, stream), "begin");
  EXPECT_NO_THROW(CheckSubmitHookMayLaunch(kExtDev, 0, stream, "testdev:0"));
  Check(api, api.capture_end(api.self, 0, stream, &graph), "end");
  Check(api, api.graph_destroy(api.self, graph), "destroy");
  ASSERT_EQ(sdStreamDestroy(stream), sdSuccess);
}

// Registration races lookups (a plugin imported while another thread
// launches): readers see a whole table or none. Under TSan.
TEST_F(GraphApiTest, RegistrationRacesLookups) {
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load()) {
      if (const DevbridgeGraphAPI* api = Find(kExtDev)) {
        EXPECT_STREQ(api->name, "test graphs");
      }
    }
  });
  for (int i = 0; i < 200; ++i) {
    Register(kExtDev, &kTable, "testdev");
    if (i % 3 == 0) Unregister(kExtDev);
  }
  stop.store(true);
  reader.join();
}

}  // namespace
}  // namespace graphs
}  // namespace devbridge
