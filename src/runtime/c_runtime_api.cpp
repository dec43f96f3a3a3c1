// The DevbridgeRuntimeAPI table: C entry points over DeviceRuntime.
//
// Every entry point runs its body through RunGuarded, which turns any C++
// exception into -1 plus a thread-local message (get_last_error): no
// exception crosses the C ABI and no entry point needs Python or the GIL.
#include <ATen/dlpack.h>

#include "devbridge/c_runtime_api.h"
#include "devbridge/runtime.h"
#include "graphs/graph_registry.h"
#include "runtime/dl_device_type.h"

namespace devbridge {
namespace {

template <class Body>
int RunGuarded(Body&& body) noexcept {
  try {
    body();
    return 0;
  } catch (...) {
    std::string message;
    DescribeCurrentException(&message);
    try {
      SetLastError(message);
    } catch (...) {
      // Out of memory while storing the message: the -1 still reports failure.
    }
    return -1;
  }
}

template <class T>
void CheckOut(T* out, const char* name) {
  if (out == nullptr) {
    throw Error(ErrorKind::kValue, std::string("devbridge: the output pointer ") + name +
                                       " is NULL; pass the address of a variable to receive it");
  }
}

const DeviceRuntime& RuntimeFor(int32_t dl_device_type) {
  return DeviceRuntime::For(C10DeviceTypeFromDL(dl_device_type));
}

int DeviceCount(int32_t device_type, int32_t* out_count) {
  return RunGuarded([&] {
    CheckOut(out_count, "out_count");
    const DeviceRuntime& runtime = RuntimeFor(device_type);
    // An absent backend is an error here (not 0 devices), so the caller learns
    // why: current_device() then throws the message that names the plugin fix.
    if (!runtime.Available()) (void)runtime.CurrentDevice();
    *out_count = runtime.DeviceCount();
  });
}

int GetCurrentDevice(int32_t device_type, int32_t* out_device_id) {
  return RunGuarded([&] {
    CheckOut(out_device_id, "out_device_id");
    const DeviceRuntime& runtime = RuntimeFor(device_type);
    // DLPack numbers the (only) CPU device 0; c10 says -1.
    *out_device_id = runtime.type() == c10::DeviceType::CPU ? 0 : runtime.CurrentDevice();
  });
}

int SetCurrentDevice(int32_t device_type, int32_t device_id) {
  return RunGuarded([&] { RuntimeFor(device_type).SetCurrentDevice(DeviceIndexFromDL(device_id)); });
}

int CurrentStream(int32_t device_type, int32_t device_id, void** out_stream) {
  return RunGuarded([&] {
    CheckOut(out_stream, "out_stream");
    *out_stream = RuntimeFor(device_type).CurrentNativeStream(DeviceIndexFromDL(device_id));
  });
}

int GetSubmitHookEntry(int32_t device_type, DevbridgeSubmitFn* out_hook) {
  return RunGuarded([&] {
    CheckOut(out_hook, "out_hook");
    *out_hook = GetSubmitHook(C10DeviceTypeFromDL(device_type));
  });
}

const char* GetLastErrorEntry() { return GetLastError(); }

int SynchronizeCurrentStream(int32_t device_type, int32_t device_id) {
  return RunGuarded([&] {
    const DeviceRuntime& runtime = RuntimeFor(device_type);
    const c10::DeviceIndex index = DeviceIndexFromDL(device_id);
    if (runtime.type() == c10::DeviceType::CPU) return;
    runtime.Synchronize(runtime.CurrentStream(index));
  });
}

int ScratchAlloc(int32_t device_type, int32_t device_id, size_t nbytes, void** out_ptr,
                 void** out_token) {
  return RunGuarded([&] {
    CheckOut(out_ptr, "out_ptr");
    CheckOut(out_token, "out_token");
    const DeviceRuntime& runtime = RuntimeFor(device_type);
    c10::DataPtr data =
        runtime.AllocateScratch(nbytes, runtime.CurrentStream(DeviceIndexFromDL(device_id)));
    // The DataPtr itself is the token: freeing it returns the block to the
    // allocator with the allocator's own stream semantics.
    auto token = std::make_unique<c10::DataPtr>(std::move(data));
    *out_ptr = token->get();
    *out_token = token.release();
  });
}

int ScratchFree(void* token) {
  return RunGuarded([&] { delete static_cast<c10::DataPtr*>(token); });
}

int WaitCurrentStream(int32_t device_type, int32_t device_id, void* stream) {
  return RunGuarded([&] {
    const DeviceRuntime& runtime = RuntimeFor(device_type);
    const c10::DeviceIndex index = DeviceIndexFromDL(device_id);
    if (runtime.type() == c10::DeviceType::CPU) {
      if (stream != nullptr) {
        throw Error(ErrorKind::kValue,
                    "devbridge: wait_current_stream got a stream for kDLCPU, which has no streams; "
                    "pass NULL");
      }
      return;
    }
    runtime.WaitForCurrentStream(runtime.StreamFromNative(index, stream));
  });
}

// The graph registry keys tables by DLPack device type; the plugin's table is
// registered under kDLExtDev, whichever DLPack value (21 in transition mode)
// a caller names the PrivateUse1 device with.
int32_t GraphSlot(int32_t dl_device_type) {
  return C10DeviceTypeFromDL(dl_device_type) == c10::DeviceType::PrivateUse1 ? static_cast<int32_t>(kDLExtDev)
                                                                             : dl_device_type;
}

int StreamCaptureStatus(int32_t device_type, int32_t device_id, void* stream, int32_t* out_status) {
  return RunGuarded([&] {
    CheckOut(out_status, "out_status");
    *out_status = graphs::CaptureStatus(GraphSlot(device_type), device_id, stream);
  });
}

int CheckSubmitHook(int32_t device_type, int32_t device_id, void* stream) {
  return RunGuarded([&] {
    graphs::CheckSubmitHookMayLaunch(GraphSlot(device_type), device_id, stream,
                                     RuntimeFor(device_type).Name() + ":" + std::to_string(device_id));
  });
}

DevbridgeRuntimeAPI MakeRuntimeAPI() {
  DevbridgeRuntimeAPI api{};
  api.header.major = DEVBRIDGE_RUNTIME_API_MAJOR;
  api.header.minor = DEVBRIDGE_RUNTIME_API_MINOR;
  api.header.size = sizeof(DevbridgeRuntimeAPI);
  api.device_count = &DeviceCount;
  api.get_current_device = &GetCurrentDevice;
  api.set_current_device = &SetCurrentDevice;
  api.current_stream = &CurrentStream;
  api.get_submit_hook = &GetSubmitHookEntry;
  api.get_last_error = &GetLastErrorEntry;
  api.synchronize_current_stream = &SynchronizeCurrentStream;
  api.scratch_alloc = &ScratchAlloc;
  api.scratch_free = &ScratchFree;
  api.wait_current_stream = &WaitCurrentStream;  // minor 1
  api.stream_capture_status = &StreamCaptureStatus;  // minor 2
  api.check_submit_hook = &CheckSubmitHook;
  return api;
}

}  // namespace

const DevbridgeRuntimeAPI* RuntimeAPI() noexcept {
  static const DevbridgeRuntimeAPI api = MakeRuntimeAPI();
  return &api;
}

}  // namespace devbridge
