// DLPack device types <-> c10 device types, shared by the runtime table and
// the DLPack exchange table so both accept exactly the same values.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/DeviceType.h>

#include <cstdint>
#include <string>

namespace devbridge {

// DLPack's kDLAscend (DLPack main, not in v1.3's header).
constexpr int32_t kDLAscendDeviceType = 21;

// The c10 device type a DLPack device type denotes in this process:
// kDLExtDev (and 21 when Options::accept_ascend_device_type) -> PrivateUse1,
// kDLROCM -> CUDA on a ROCm build of torch, ... Throws devbridge::Error
// (kBuffer) naming the value for types PyTorch has no device for.
c10::DeviceType C10DeviceTypeFromDL(int32_t dl_device_type);

// A DLPack device_id as a c10 DeviceIndex; throws (kValue) outside [0, 127].
c10::DeviceIndex DeviceIndexFromDL(int32_t device_id);

// "kDLExtDev (12)", "unknown (99)": for error messages.
std::string DescribeDLDeviceType(int32_t dl_device_type);

}  // namespace devbridge
