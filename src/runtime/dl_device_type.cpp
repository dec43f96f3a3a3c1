#include "runtime/dl_device_type.h"

#include <ATen/DLConvertor.h>
#include <ATen/dlpack.h>

#include <limits>

#include "devbridge/error.h"
#include "devbridge/runtime.h"

namespace devbridge {
namespace {

// torch built for ROCm reports its "cuda" devices as kDLROCM. Ask torch's own
// converter once instead of guessing from build macros we cannot see.
bool TorchLabelsCudaAsRocm() {
  static const bool rocm =
      at::torchDeviceToDLDevice(c10::Device(c10::DeviceType::CUDA, 0)).device_type == kDLROCM;
  return rocm;
}

}  // namespace

std::string DescribeDLDeviceType(int32_t dl_device_type) {
  const char* name = nullptr;
  switch (dl_device_type) {
    case kDLCPU: name = "kDLCPU"; break;
    case kDLCUDA: name = "kDLCUDA"; break;
    case kDLCUDAHost: name = "kDLCUDAHost"; break;
    case kDLOpenCL: name = "kDLOpenCL"; break;
    case kDLVulkan: name = "kDLVulkan"; break;
    case kDLMetal: name = "kDLMetal"; break;
    case kDLVPI: name = "kDLVPI"; break;
    case kDLROCM: name = "kDLROCM"; break;
    case kDLROCMHost: name = "kDLROCMHost"; break;
    case kDLExtDev: name = "kDLExtDev"; break;
    case kDLCUDAManaged: name = "kDLCUDAManaged"; break;
    case kDLOneAPI: name = "kDLOneAPI"; break;
    case kDLWebGPU: name = "kDLWebGPU"; break;
    case kDLHexagon: name = "kDLHexagon"; break;
    case kDLMAIA: name = "kDLMAIA"; break;
    case kDLTrn: name = "kDLTrn"; break;
    case kDLAscendDeviceType: name = "kDLAscend"; break;
    default: name = "unknown"; break;
  }
  return std::string(name) + " (" + std::to_string(dl_device_type) + ")";
}

c10::DeviceType C10DeviceTypeFromDL(int32_t dl_device_type) {
  switch (dl_device_type) {
    case kDLCPU:
      return c10::DeviceType::CPU;
    case kDLCUDA:
      if (!TorchLabelsCudaAsRocm()) return c10::DeviceType::CUDA;
      break;
    case kDLROCM:
      return TorchLabelsCudaAsRocm() ? c10::DeviceType::CUDA : c10::DeviceType::HIP;
    case kDLOpenCL:
      return c10::DeviceType::OPENCL;
    case kDLMetal:
      return c10::DeviceType::MPS;
    case kDLOneAPI:
      return c10::DeviceType::XPU;
    case kDLMAIA:
      return c10::DeviceType::MAIA;
    case kDLExtDev:
      return c10::DeviceType::PrivateUse1;
    case kDLAscendDeviceType:
      if (GetOptions().accept_ascend_device_type) return c10::DeviceType::PrivateUse1;
      throw Error(ErrorKind::kBuffer,
                  "devbridge: DLPack device type 21 (kDLAscend) is accepted as the PrivateUse1 "
                  "device only in transition mode; enable it with "
                  "devbridge.install(accept_ascend_device_type=True)");
    default:
      break;
  }
  throw Error(ErrorKind::kBuffer,
              "devbridge: DLPack device type " + DescribeDLDeviceType(dl_device_type) +
                  " has no PyTorch device in this process (supported: kDLCPU, kDLCUDA/kDLROCM, "
                  "kDLOneAPI, kDLMetal, kDLMAIA, kDLOpenCL, kDLExtDev = the PrivateUse1 plugin)");
}

c10::DeviceIndex DeviceIndexFromDL(int32_t device_id) {
  if (device_id < 0 || device_id > std::numeric_limits<c10::DeviceIndex>::max()) {
    throw Error(ErrorKind::kValue, "devbridge: device_id " + std::to_string(device_id) +
                                       " is out of range; PyTorch device indices are 0..127");
  }
  return static_cast<c10::DeviceIndex>(device_id);
}

}  // namespace devbridge
