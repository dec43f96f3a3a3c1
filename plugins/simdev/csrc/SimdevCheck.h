// Turning simdev runtime errors into PyTorch errors.
//
// Every runtime call goes through SIMDEV_CHECK, which raises a c10::Error
// (RuntimeError in Python) carrying the runtime's own message: the runtime
// already names the function, the bad argument and the fix.
//
// Host work (an operator's CPU kernel run on a stream's worker thread, see
// ops/HostWork.h) cannot throw into the caller: it fails the stream instead,
// and the runtime reports sdErrorLaunchFailure at the next synchronization.
// The failed work's own message (e.g. ATen's "result type Float can't be
// cast...") is kept here until that synchronization reports it.
#pragma once

#include <simdev/runtime.h>

#include <c10/util/Exception.h>

#include <string>

namespace torch_simdev {

// The message for a failed runtime call: the call's source text, the error
// name, the runtime's last-error message on this thread, and (for
// sdErrorLaunchFailure) the messages of host work that failed since the last
// report.
std::string describeRuntimeError(const char* call, sdError_t error);

// Keeps the message of host work that failed on a worker thread until the
// next synchronization reports it. Thread-safe, never throws.
void recordHostWorkFailure(const std::string& message) noexcept;

}  // namespace torch_simdev

#define SIMDEV_CHECK(call)                                                        \
  do {                                                                            \
    const sdError_t simdev_check_error_ = (call);                                 \
    TORCH_CHECK(simdev_check_error_ == sdSuccess,                                 \
                ::torch_simdev::describeRuntimeError(#call, simdev_check_error_)); \
  } while (0)
