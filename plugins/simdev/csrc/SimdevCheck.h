// Turning simdev runtime errors into PyTorch errors.
//
// Every runtime call goes through SIMDEV_CHECK, which raises a
// c10::AcceleratorError (torch.AcceleratorError in Python, a RuntimeError),
// as torch.cuda does for a failed CUDA call (c10/cuda/CUDAException.cpp),
// carrying the runtime's error code and its own message: the runtime already
// names the function, the bad argument and the fix.
//
// Work queued on a stream (an operator's CPU kernel run on a stream's worker
// thread, see ops/HostWork.h; a Triton kernel) cannot throw into the caller:
// it fails the stream instead, hands its cause to the runtime
// (sdSetWorkFailureMessage), and the runtime reports sdErrorLaunchFailure
// with that cause at the next synchronization, as a device reports a fault.
#pragma once

#include <simdev/runtime.h>

#include <c10/util/Exception.h>

#include <string>

namespace torch_simdev {

// The message for a failed runtime call: the call's source text, the error
// name and the runtime's last-error message on this thread.
std::string describeRuntimeError(const char* call, sdError_t error);

}  // namespace torch_simdev

#define SIMDEV_CHECK(call)                                                                                     \
  do {                                                                                                         \
    const sdError_t simdev_check_error_ = (call);                                                              \
    if (C10_UNLIKELY(simdev_check_error_ != sdSuccess)) {                                                      \
      throw ::c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},                     \
                                    static_cast<int32_t>(simdev_check_error_),                                 \
                                    ::torch_simdev::describeRuntimeError(#call, simdev_check_error_));         \
    }                                                                                                          \
  } while (0)
