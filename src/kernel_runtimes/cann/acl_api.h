// The part of CANN's AscendCL runtime API (acl/acl_rt.h) the Ascend kernel
// runtime uses, declared here so devbridge builds without CANN and never
// links libascendcl: the functions are looked up with dlsym at run time.
//
// Why own declarations instead of including <acl/acl.h>: a user's build has
// no CANN and no torch_npu, and the adapter must still build (it fails at run
// time, naming CANN). CI proves every declaration below against the real
// headers: with -DDEVBRIDGE_ACL_INCLUDE_DIR=<dirs holding acl/acl.h> (the
// copies of CANN's headers the torch-npu 2.13.0 and 2.14.0 wheels ship) the build compiles
// src/kernel_runtimes/cann/acl_api_check.cpp, whose static_asserts compare each constant,
// struct layout and function type with acl.h's (ACL 1.17).
#pragma once

#include <cstddef>
#include <cstdint>

namespace devbridge {
namespace acl {

using Error = int;         // aclError
using Stream = void*;      // aclrtStream
using BinHandle = void*;   // aclrtBinHandle
using FuncHandle = void*;  // aclrtFuncHandle

constexpr Error kSuccess = 0;                    // ACL_SUCCESS
constexpr Error kErrorRepeatInitialize = 100002; // ACL_ERROR_REPEAT_INITIALIZE

enum MemcpyKind : int { kMemcpyHostToDevice = 1 };  // aclrtMemcpyKind::ACL_MEMCPY_HOST_TO_DEVICE
enum DevAttr : int { kDevAttrAicoreCoreNum = 101 };  // aclrtDevAttr::ACL_DEV_ATTR_AICORE_CORE_NUM
enum MemLocationType : int { kMemLocationDevice = 1 };  // ACL_MEM_LOCATION_TYPE_DEVICE
enum BinaryLoadOptionType : int { kBinaryLoadOptMagic = 2 };  // ACL_RT_BINARY_LOAD_OPT_MAGIC

// Binary magics (ACL_RT_BINARY_MAGIC_*): triton-ascend registers vector-core
// kernels (mix_mode "aiv") with the vector magic, all others as AI core.
constexpr uint32_t kBinaryMagicElfAicore = 0x43554245U;
constexpr uint32_t kBinaryMagicElfVectorCore = 0x41415246U;

struct MemLocation {  // aclrtMemLocation
  uint32_t id;
  MemLocationType type;
};
struct PtrAttributes {  // aclrtPtrAttributes
  MemLocation location;
  uint32_t pageSize;
  uint32_t rsv[4];
};
union BinaryLoadOptionValue {  // aclrtBinaryLoadOptionValue
  uint32_t isLazyLoad;
  uint32_t magic;
  int32_t cpuKernelMode;
  uint32_t rsv[4];
};
struct BinaryLoadOption {  // aclrtBinaryLoadOption
  BinaryLoadOptionType type;
  BinaryLoadOptionValue value;
};
struct BinaryLoadOptions {  // aclrtBinaryLoadOptions
  BinaryLoadOption* options;
  size_t numOpt;
};
struct LaunchKernelCfg;  // aclrtLaunchKernelCfg: always passed as NULL
struct PlaceHolderInfo;  // aclrtPlaceHolderInfo: always passed as NULL

// The function types, one per function (named after the ACL function less "acl").
using InitFn = Error (*)(const char* config_path);
using GetRecentErrMsgFn = const char* (*)();
using SetDeviceFn = Error (*)(int32_t device_id);
using GetDeviceFn = Error (*)(int32_t* device_id);
using GetDeviceCountFn = Error (*)(uint32_t* count);
using GetDeviceInfoFn = Error (*)(uint32_t device_id, DevAttr attr, int64_t* value);
using GetSocNameFn = const char* (*)();
using PointerGetAttributesFn = Error (*)(const void* ptr, PtrAttributes* attributes);
using MallocHostFn = Error (*)(void** host_ptr, size_t size);
using MemcpyAsyncFn = Error (*)(void* dst, size_t dest_max, const void* src, size_t count, MemcpyKind kind,
                                Stream stream);
using MemsetAsyncFn = Error (*)(void* dev_ptr, size_t max_count, int32_t value, size_t count, Stream stream);
using BinaryLoadFromDataFn = Error (*)(const void* data, size_t length, const BinaryLoadOptions* options,
                                       BinHandle* bin_handle);
using BinaryUnLoadFn = Error (*)(BinHandle bin_handle);
using BinaryGetFunctionFn = Error (*)(const BinHandle bin_handle, const char* kernel_name, FuncHandle* func_handle);
using LaunchKernelWithHostArgsFn = Error (*)(FuncHandle func_handle, uint32_t num_blocks, Stream stream,
                                             LaunchKernelCfg* cfg, void* host_args, size_t args_size,
                                             PlaceHolderInfo* place_holder_array, size_t place_holder_num);
using GetHardwareSyncAddrFn = Error (*)(void** addr);

struct Functions {
  InitFn aclInit;
  GetRecentErrMsgFn aclGetRecentErrMsg;
  SetDeviceFn aclrtSetDevice;
  GetDeviceFn aclrtGetDevice;
  GetDeviceCountFn aclrtGetDeviceCount;
  GetDeviceInfoFn aclrtGetDeviceInfo;
  GetSocNameFn aclrtGetSocName;
  PointerGetAttributesFn aclrtPointerGetAttributes;
  MallocHostFn aclrtMallocHost;
  MemcpyAsyncFn aclrtMemcpyAsync;
  MemsetAsyncFn aclrtMemsetAsync;
  BinaryLoadFromDataFn aclrtBinaryLoadFromData;
  BinaryUnLoadFn aclrtBinaryUnLoad;
  BinaryGetFunctionFn aclrtBinaryGetFunction;
  LaunchKernelWithHostArgsFn aclrtLaunchKernelWithHostArgs;
  GetHardwareSyncAddrFn aclrtGetHardwareSyncAddr;
};

}  // namespace acl
}  // namespace devbridge
