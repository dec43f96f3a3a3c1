// What a failing kernel or host function leaves in its stream's failure
// report: the runtime's description of the work, the message the work set
// itself (sdSetWorkFailureMessage: the cause, e.g. a Python exception of an
// interpreted kernel, which the worker thread alone knows), and the faults
// tests inject (sdInjectKernelFault).
#ifndef SIMDEV_SRC_WORK_FAILURE_H_
#define SIMDEV_SRC_WORK_FAILURE_H_

#include <string>

namespace simdev {

// Forgets the message an earlier run on this worker left behind; called
// before each kernel program and host function runs.
void clearWorkFailureMessage() noexcept;

// `description` followed by ": <message>" when the work that just failed on
// this worker set one (consumed).
std::string withWorkFailureMessage(std::string description);

// True for the one kernel grid or host function that sdInjectKernelFault
// armed to fail: the caller skips the work and reports injectedFaultText().
bool takeInjectedKernelFault() noexcept;
const char* injectedFaultText() noexcept;

}  // namespace simdev

#endif  // SIMDEV_SRC_WORK_FAILURE_H_
