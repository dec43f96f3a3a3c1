// The Work handle of a collective queued on a simdev stream.
//
// The collective is one piece of host work on the stream that was current
// when it was issued (SimdevBackend.h); an event recorded right after it
// marks its end. The handle follows ProcessGroupNCCL's contract, so DDP,
// FSDP2 and functional collectives use it as they use NCCL's:
//   wait() / synchronize()  make the caller's current stream wait for the
//                           collective (no host block); a barrier's wait()
//                           blocks the host, as NCCL's does.
//   isCompleted()           the event has been reached.
//   getFuture()             completed at issue, under the collective's
//                           stream: Future::wait() and then() callbacks
//                           (DDP's comm hooks) order their work after the
//                           collective through the future's device events,
//                           and run on the issuing thread, never on a
//                           stream worker.
// A collective that fails reports Gloo's error at the next synchronization
// of its stream (torch.AcceleratorError); exception() and a later wait()
// report it as well once the stream has run past it. A stream that waits for
// it (wait(), or an event recorded after it: FSDP2 runs collectives on side
// streams) fails too, so the failure reaches the stream that uses the result.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Event.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <exception>
#include <memory>
#include <mutex>
#include <vector>

namespace torch_simdev {

// What the stream work tells its handle: set once, on the stream's worker.
class CollectiveOutcome {
 public:
  void fail(std::exception_ptr error);
  std::exception_ptr error() const;

 private:
  mutable std::mutex mutex_;
  std::exception_ptr error_;
};

class SimdevWork : public c10d::Work {
 public:
  enum class Wait { kStream, kHost };

  SimdevWork(int rank, c10d::OpType type, const char* profiling_title, c10::DeviceIndex device,
             std::vector<at::Tensor> outputs, std::shared_ptr<CollectiveOutcome> outcome, Wait wait);

  // Called on the issuing thread right after the collective was queued on the
  // current stream of its device: records the end event and completes the future there.
  void issued();

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  void rethrowFailure() const;

  c10::DeviceIndex device_;
  c10::Stream stream_;  // the collective's
  c10::Event done_;
  std::vector<at::Tensor> outputs_;
  std::shared_ptr<CollectiveOutcome> outcome_;
  Wait wait_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace torch_simdev
