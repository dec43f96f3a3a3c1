// The kernel runtimes devbridge ships (adapters behind DevbridgeKernelRuntime,
// include/devbridge/c_launch_api.h) and the C++ helpers to call any runtime.
//
// This part of src/launch/ needs neither torch nor Python: the adapters open
// their vendor library at run time and speak only C ABIs.
#pragma once

#include <string>

#include "devbridge/c_launch_api.h"

namespace devbridge {
namespace launch {

// The CUDA driver-API runtime (cubins). libcuda.so.1 is opened on the first
// call that needs it; a machine without it gets an error naming the library
// from that call, never at import.
const DevbridgeKernelRuntime* CudaKernelRuntime() noexcept;

// The CANN runtime (Ascend NPU binaries: triton-ascend's npubin) over a
// dlopen'ed libascendcl.so (never linked). libascendcl is opened on the first
// call that needs it; without CANN that call fails with a message naming
// CANN, never at import.
const DevbridgeKernelRuntime* AscendKernelRuntime() noexcept;

// The NPU's SoC name (aclrtGetSocName: "Ascend910B1", ...), triton-ascend's
// compile target. Throws std::runtime_error naming CANN when it is absent.
std::string AscendSocName();

// The simdev runtime (shared libraries of host-function kernels) behind the
// simdev library at `library_path` (torch_simdev.runtime_library_path()).
// One table per path, alive for the process. Throws devbridge::Error
// (kRuntime) when the library cannot be opened or lacks a function.
const DevbridgeKernelRuntime* SimdevKernelRuntime(const std::string& library_path);

// Loads a shared library of simdev kernels through `simdev` (a table from
// SimdevKernelRuntime) and, before the module can be launched, calls the
// library copy's extern "C" `void setup_symbol(const void* setup_arg)`. A
// Python kernel runtime uses it to tell each loaded copy of its trampoline
// which kernel it runs. Throws devbridge::Error.
void LoadSimdevModuleWithSetup(const DevbridgeKernelRuntime* simdev, const void* image, size_t image_size,
                               const char* kernel_name, const char* setup_symbol, const void* setup_arg,
                               DevbridgeLoadedKernel* out);

// A table of this header's version: the adapters' one way to fill it. It
// launches the Triton layout; an adapter for more layouts sets `layouts`,
// `fill_async` and `hardware_sync_address` on the result.
DevbridgeKernelRuntime MakeKernelRuntime(const char* name, void* self, decltype(DevbridgeKernelRuntime::load) load,
                                         decltype(DevbridgeKernelRuntime::unload) unload,
                                         decltype(DevbridgeKernelRuntime::launch) launch,
                                         decltype(DevbridgeKernelRuntime::pointer_device) pointer_device,
                                         decltype(DevbridgeKernelRuntime::get_last_error) get_last_error,
                                         decltype(DevbridgeKernelRuntime::device_properties) device_properties);

// The minor-1 fields of a table, or their 1.0 meaning when the table is older
// (Triton layout only, no fill_async, no hardware_sync_address).
uint32_t RuntimeLayouts(const DevbridgeKernelRuntime& runtime) noexcept;
decltype(DevbridgeKernelRuntime::fill_async) RuntimeFillAsync(const DevbridgeKernelRuntime& runtime) noexcept;
decltype(DevbridgeKernelRuntime::hardware_sync_address) RuntimeHardwareSyncAddress(
    const DevbridgeKernelRuntime& runtime) noexcept;

// The properties of a device whose kernels are interpreted program by program
// (simdev's runtimes, the host runtime): no instruction set (arch 0), Triton's
// usual warp (num_warps keeps its meaning for the front end), one
// "multiprocessor" (the programs run one after another) and no hardware limits.
void FillInterpretedDeviceProperties(DevbridgeDeviceProperties* out) noexcept;

// Throws devbridge::Error(kValue) naming what is wrong with a table handed in
// from outside (NULL function, another major version, too small a size).
void ValidateKernelRuntime(const DevbridgeKernelRuntime* runtime);

// Runs a runtime function's status: on -1 throws devbridge::Error(kRuntime)
// "<what> failed on the <name> kernel runtime: <its last error>".
void CheckRuntimeStatus(const DevbridgeKernelRuntime& runtime, int status, const char* what);

}  // namespace launch
}  // namespace devbridge
