// current_work_stream: the stream a consumer must launch on.
//
//   kDLExtDev (and 21 in transition mode) -> the PrivateUse1 plugin's live
//       current stream, through devbridge's runtime (guard override or
//       resolver). This is what PyTorch's own table cannot do: it reports NULL.
//   host memory types (CPU, CUDA/ROCm host) -> NULL: there is no stream.
//   everything else (CUDA, ROCm, XPU, ...) -> PyTorch's own table, so the
//       answer is exactly PyTorch's; without it, the c10 runtime.
//
// Hot path (PrivateUse1): no Python, no strings, no locks.
#include <c10/util/Exception.h>

#include "devbridge/dlpack_exchange.h"
#include "devbridge/runtime.h"
#include "dlpack/entry_points.h"
#include "dlpack/python_abi.h"
#include "runtime/dl_device_type.h"

namespace devbridge {
namespace dlpack_entry {
namespace {

// Looked up once at load time: the hot path then has no static-init guard.
const DeviceRuntime& g_plugin_runtime = DeviceRuntime::For(c10::DeviceType::PrivateUse1);

void* PluginCurrentStream(int32_t device_id) {
  if (C10_UNLIKELY(device_id < 0 || device_id > 127)) (void)DeviceIndexFromDL(device_id);  // throws
  return g_plugin_runtime.CurrentNativeStream(static_cast<c10::DeviceIndex>(device_id));
}

// For device types devbridge does not own and no delegate table is set.
void* RuntimeCurrentStream(int32_t device_type, int32_t device_id) {
  c10::DeviceType type;
  try {
    type = C10DeviceTypeFromDL(device_type);
  } catch (const Error&) {
    return nullptr;  // DLPack: a producer may report NULL for types it does not know.
  }
  const DeviceRuntime& runtime = DeviceRuntime::For(type);
  if (!runtime.Available()) return nullptr;
  return runtime.CurrentNativeStream(DeviceIndexFromDL(device_id));
}

}  // namespace

int CurrentWorkStream(DLDeviceType device_type, int32_t device_id, void** out_current_stream) {
  if (C10_UNLIKELY(out_current_stream == nullptr)) {
    return RunGuardedPython([] {
      throw Error(ErrorKind::kValue,
                  "devbridge: current_work_stream got out_current_stream == NULL; pass the "
                  "address of a void* to receive the stream");
    });
  }
  const int32_t type = static_cast<int32_t>(device_type);
  if (C10_LIKELY(type == kDLExtDev)) {
    return RunGuardedPython([&] { *out_current_stream = PluginCurrentStream(device_id); });
  }
  switch (type) {
    case kDLCPU:
    case kDLCUDAHost:
    case kDLROCMHost:
      *out_current_stream = nullptr;
      return 0;
    case kDLAscendDeviceType:
      if (GetOptions().accept_ascend_device_type) {
        return RunGuardedPython([&] { *out_current_stream = PluginCurrentStream(device_id); });
      }
      break;
    default:
      break;
  }
  if (const DLPackExchangeAPI* delegate = DelegateExchangeAPI()) {
    return delegate->current_work_stream(device_type, device_id, out_current_stream);
  }
  return RunGuardedPython([&] { *out_current_stream = RuntimeCurrentStream(type, device_id); });
}

}  // namespace dlpack_entry
}  // namespace devbridge
