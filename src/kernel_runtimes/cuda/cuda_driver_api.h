// The part of the CUDA driver API the CUDA kernel runtime uses, declared here
// so that devbridge builds without the CUDA toolkit and never links libcuda:
// the functions are looked up with dlsym in libcuda.so.1 at run time.
//
// Values and layouts are those of cuda.h (CUDA 12 and 13, unchanged since
// 12.0, which introduced cuLaunchKernelEx). tests/cpp/test_cuda_driver_api.cpp
// checks every one against the toolkit's cuda.h where a toolkit is installed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace devbridge {
namespace cuda_api {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;

// CUfunction_attribute
constexpr int CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
constexpr int CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;
constexpr int CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3;
constexpr int CU_FUNC_ATTRIBUTE_NUM_REGS = 4;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
constexpr int CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14;
// CUfunc_cache
constexpr int CU_FUNC_CACHE_PREFER_SHARED = 1;
// CUdevice_attribute
constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
constexpr int CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82;
constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
// CUpointer_attribute
constexpr int CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9;
// CUlaunchAttributeID
constexpr int CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2;
constexpr int CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4;
constexpr int CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE = 5;
constexpr int CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6;
// CUclusterSchedulingPolicy
constexpr int CU_CLUSTER_SCHEDULING_POLICY_SPREAD = 1;

// CUlaunchAttributeValue: a 64-byte union; only the members used here.
union CUlaunchAttributeValue {
  char pad[64];
  void* align_as_pointer;  // the real union holds pointers (accessPolicyWindow)
  int cooperative;
  struct {
    unsigned int x, y, z;
  } clusterDim;
  int clusterSchedulingPolicyPreference;
  int programmaticStreamSerializationAllowed;
};

struct CUlaunchAttribute {
  int id;  // CUlaunchAttributeID
  char pad[8 - sizeof(int)];
  CUlaunchAttributeValue value;
};

struct CUlaunchConfig {
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned int numAttrs;
};

// The functions, as dlsym finds them (no _v2 suffix is needed for any).
struct DriverFunctions {
  CUresult (*cuInit)(unsigned int flags);
  CUresult (*cuGetErrorName)(CUresult error, const char** out);
  CUresult (*cuGetErrorString)(CUresult error, const char** out);
  CUresult (*cuDeviceGet)(CUdevice* out, int ordinal);
  CUresult (*cuDeviceGetAttribute)(int* out, int attribute, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* out, CUdevice device);
  CUresult (*cuCtxGetCurrent)(CUcontext* out);
  CUresult (*cuCtxSetCurrent)(CUcontext context);
  CUresult (*cuModuleLoadData)(CUmodule* out, const void* image);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction* out, CUmodule module, const char* name);
  CUresult (*cuFuncGetAttribute)(int* out, int attribute, CUfunction function);
  CUresult (*cuFuncSetAttribute)(CUfunction function, int attribute, int value);
  CUresult (*cuFuncSetCacheConfig)(CUfunction function, int config);
  CUresult (*cuPointerGetAttribute)(void* out, int attribute, CUdeviceptr pointer);
  CUresult (*cuLaunchKernel)(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                             unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                             unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                             void** params, void** extra);
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig* config, CUfunction function, void** params,
                               void** extra);
};

}  // namespace cuda_api
}  // namespace devbridge
