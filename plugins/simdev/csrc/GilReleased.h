// Host waits on simdev's queues without the GIL.
//
// Work queued on a simdev stream may need the GIL: an interpreted Triton
// kernel runs Python, and host work that drops the last reference to a
// tensor with a Python object decrefs that object. A host thread that holds
// the GIL while it blocks on such work (a synchronize, a copy to the host
// inside AOTAutograd's tracing, the allocator waiting for a block) waits for
// a worker that waits for it: a deadlock. A GPU's work never needs the GIL,
// so torch.cuda's waits need no such care; simdev's every blocking wait
// releases the GIL for its duration when the calling thread holds it.
#pragma once

#include <Python.h>

namespace torch_simdev {

class GilReleasedIfHeld {
 public:
  GilReleasedIfHeld() {
    if (Py_IsInitialized() && PyGILState_Check()) saved_ = PyEval_SaveThread();
  }
  ~GilReleasedIfHeld() {
    if (saved_ != nullptr) PyEval_RestoreThread(saved_);
  }
  GilReleasedIfHeld(const GilReleasedIfHeld&) = delete;
  GilReleasedIfHeld& operator=(const GilReleasedIfHeld&) = delete;

 private:
  PyThreadState* saved_ = nullptr;
};

}  // namespace torch_simdev
