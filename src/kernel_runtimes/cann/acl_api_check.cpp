// Compile-only: every declaration of acl_api.h against CANN's own acl.h.
// Built when DEVBRIDGE_ACL_INCLUDE_DIR names a directory holding acl/acl.h
// (CI: the copy of CANN's headers in the torch-npu 2.13.0 wheel, ACL 1.17).
// A mismatch is a compile error naming the declaration to fix.
#include <acl/acl.h>

#include <cstddef>
#include <type_traits>

#include "kernel_runtimes/cann/acl_api.h"

namespace devbridge {
namespace acl {
namespace {

// Our types -> acl.h's, for comparing function types parameter by parameter.
template <class T> struct Real { using type = T; };
template <> struct Real<PtrAttributes*> { using type = ::aclrtPtrAttributes*; };
template <> struct Real<const BinaryLoadOptions*> { using type = const ::aclrtBinaryLoadOptions*; };
template <> struct Real<LaunchKernelCfg*> { using type = ::aclrtLaunchKernelCfg*; };
template <> struct Real<PlaceHolderInfo*> { using type = ::aclrtPlaceHolderInfo*; };
template <> struct Real<MemcpyKind> { using type = ::aclrtMemcpyKind; };
template <> struct Real<DevAttr> { using type = ::aclrtDevAttr; };
template <class F> struct RealFn;
template <class R, class... A> struct RealFn<R (*)(A...)> { using type = R (*)(typename Real<A>::type...); };

#define DEVBRIDGE_CHECK_ACL_FN(name, ours)                                                              \
  static_assert(std::is_same<decltype(&::name), RealFn<ours>::type>::value,                            \
                "acl_api.h: " #ours " does not match acl.h's " #name "; copy its signature from acl_rt.h")

DEVBRIDGE_CHECK_ACL_FN(aclInit, InitFn);
DEVBRIDGE_CHECK_ACL_FN(aclGetRecentErrMsg, GetRecentErrMsgFn);
DEVBRIDGE_CHECK_ACL_FN(aclrtSetDevice, SetDeviceFn);
DEVBRIDGE_CHECK_ACL_FN(aclrtGetDevice, GetDeviceFn);
DEVBRIDGE_CHECK_ACL_FN(aclrtGetDeviceCount, GetDeviceCountFn);
DEVBRIDGE_CHECK_ACL_FN(aclrtGetDeviceInfo, GetDeviceInfoFn);
DEVBRIDGE_CHECK_ACL_FN(aclrtGetSocName, GetSocNameFn);
DEVBRIDGE_CHECK_ACL_FN(aclrtPointerGetAttributes, PointerGetAttributesFn);
DEVBRIDGE_CHECK_ACL_FN(aclrtMallocHost, MallocHostFn);
DEVBRIDGE_CHECK_ACL_FN(aclrtMemcpyAsync, MemcpyAsyncFn);
DEVBRIDGE_CHECK_ACL_FN(aclrtMemsetAsync, MemsetAsyncFn);
DEVBRIDGE_CHECK_ACL_FN(aclrtBinaryLoadFromData, BinaryLoadFromDataFn);
DEVBRIDGE_CHECK_ACL_FN(aclrtBinaryUnLoad, BinaryUnLoadFn);
DEVBRIDGE_CHECK_ACL_FN(aclrtBinaryGetFunction, BinaryGetFunctionFn);
DEVBRIDGE_CHECK_ACL_FN(aclrtLaunchKernelWithHostArgs, LaunchKernelWithHostArgsFn);
DEVBRIDGE_CHECK_ACL_FN(aclrtGetHardwareSyncAddr, GetHardwareSyncAddrFn);

static_assert(std::is_same<::aclError, Error>::value, "aclError");
static_assert(std::is_same<::aclrtStream, Stream>::value, "aclrtStream");
static_assert(std::is_same<::aclrtBinHandle, BinHandle>::value, "aclrtBinHandle");
static_assert(std::is_same<::aclrtFuncHandle, FuncHandle>::value, "aclrtFuncHandle");
static_assert(::ACL_SUCCESS == kSuccess, "ACL_SUCCESS");
static_assert(::ACL_ERROR_REPEAT_INITIALIZE == kErrorRepeatInitialize, "ACL_ERROR_REPEAT_INITIALIZE");
static_assert(static_cast<int>(::ACL_MEMCPY_HOST_TO_DEVICE) == kMemcpyHostToDevice, "ACL_MEMCPY_HOST_TO_DEVICE");
static_assert(static_cast<int>(::ACL_DEV_ATTR_AICORE_CORE_NUM) == kDevAttrAicoreCoreNum, "ACL_DEV_ATTR_AICORE_CORE_NUM");
static_assert(static_cast<int>(::ACL_MEM_LOCATION_TYPE_DEVICE) == kMemLocationDevice, "ACL_MEM_LOCATION_TYPE_DEVICE");
static_assert(static_cast<int>(::ACL_RT_BINARY_LOAD_OPT_MAGIC) == kBinaryLoadOptMagic, "ACL_RT_BINARY_LOAD_OPT_MAGIC");
static_assert(ACL_RT_BINARY_MAGIC_ELF_AICORE == kBinaryMagicElfAicore, "ACL_RT_BINARY_MAGIC_ELF_AICORE");
static_assert(ACL_RT_BINARY_MAGIC_ELF_VECTOR_CORE == kBinaryMagicElfVectorCore, "ACL_RT_BINARY_MAGIC_ELF_VECTOR_CORE");
static_assert(sizeof(::aclrtMemLocationType) == sizeof(MemLocationType), "aclrtMemLocationType size");
static_assert(sizeof(::aclrtBinaryLoadOptionType) == sizeof(BinaryLoadOptionType), "aclrtBinaryLoadOptionType size");
static_assert(sizeof(::aclrtMemcpyKind) == sizeof(MemcpyKind), "aclrtMemcpyKind size");
static_assert(sizeof(::aclrtDevAttr) == sizeof(DevAttr), "aclrtDevAttr size");

#define DEVBRIDGE_CHECK_ACL_LAYOUT(real, ours, field)                                       \
  static_assert(offsetof(::real, field) == offsetof(ours, field), #real "." #field " offset")
static_assert(sizeof(::aclrtMemLocation) == sizeof(MemLocation), "aclrtMemLocation size");
DEVBRIDGE_CHECK_ACL_LAYOUT(aclrtMemLocation, MemLocation, id);
DEVBRIDGE_CHECK_ACL_LAYOUT(aclrtMemLocation, MemLocation, type);
static_assert(sizeof(::aclrtPtrAttributes) == sizeof(PtrAttributes), "aclrtPtrAttributes size");
DEVBRIDGE_CHECK_ACL_LAYOUT(aclrtPtrAttributes, PtrAttributes, location);
DEVBRIDGE_CHECK_ACL_LAYOUT(aclrtPtrAttributes, PtrAttributes, pageSize);
static_assert(sizeof(::aclrtBinaryLoadOptionValue) == sizeof(BinaryLoadOptionValue), "aclrtBinaryLoadOptionValue");
static_assert(sizeof(::aclrtBinaryLoadOption) == sizeof(BinaryLoadOption), "aclrtBinaryLoadOption size");
DEVBRIDGE_CHECK_ACL_LAYOUT(aclrtBinaryLoadOption, BinaryLoadOption, type);
DEVBRIDGE_CHECK_ACL_LAYOUT(aclrtBinaryLoadOption, BinaryLoadOption, value);
static_assert(sizeof(::aclrtBinaryLoadOptions) == sizeof(BinaryLoadOptions), "aclrtBinaryLoadOptions size");
DEVBRIDGE_CHECK_ACL_LAYOUT(aclrtBinaryLoadOptions, BinaryLoadOptions, options);
DEVBRIDGE_CHECK_ACL_LAYOUT(aclrtBinaryLoadOptions, BinaryLoadOptions, numOpt);

}  // namespace
}  // namespace acl
}  // namespace devbridge
