// simdev's collective backend: Gloo over simdev memory, in stream order.
//
// Gloo runs collectives on host memory and refuses tensors of any device but
// the CPU (and CUDA, through staging; pytorch/pytorch#184010 asks for
// PrivateUse1). simdev's device memory is host memory, so this backend hands
// a ProcessGroupGloo CPU views of it (aliases: same bytes, no copy) - the way
// a plugin on real hardware wraps its vendor's collective library.
//
// Each collective on simdev tensors is ONE piece of host work on the current
// stream of their device, queued at issue without any host synchronization:
// it runs after the work queued before it and before the work queued after
// it, like an NCCL kernel. On the stream's worker it waits for its turn in
// the process's collective order (CollectiveOrder.h), makes the Gloo call
// over the aliases and waits for Gloo's result; the outputs are then
// written. The caller gets a SimdevWork (SimdevWork.h) at once.
//
// Collectives on CPU tensors (all_gather_object, a barrier without a
// device, anything a group registered for "cpu" receives) go to Gloo
// directly from the calling thread, after the earlier collectives have
// reached Gloo.
//
// The Gloo group is made in Python (torch's CPU wheels ship no Gloo headers)
// from the same store, rank and size, and passed in.
//
// Failure: a collective that fails (a peer died, Gloo's timeout) fails its
// stream, which reports Gloo's message at its next synchronization
// (torch.AcceleratorError). The ranks may no longer agree on which
// collectives completed, so every later collective of this group is refused
// at issue with the first failure's cause (torch.distributed.DistBackendError).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/CollectiveOrder.h"
#include "distributed/SimdevWork.h"

namespace torch_simdev {

class SimdevBackend : public c10d::Backend {
 public:
  // The name under which torch_simdev.distributed registers it.
  static constexpr const char* kName = "sdgloo";

  SimdevBackend(c10::intrusive_ptr<c10d::Backend> gloo, std::chrono::milliseconds timeout);

  const std::string getBackendName() const override { return kName; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // How many collectives this group has issued (tests).
  uint64_t collectivesIssued() { return order_.turn(); }

 private:
  // The Gloo call of one collective, over CPU tensors (the aliases of the
  // operands, in the order they were given); returns Gloo's work.
  using GlooCall = std::function<c10::intrusive_ptr<c10d::Work>(std::vector<at::Tensor>&)>;

  struct Collective {
    const char* what;            // "allreduce", ...
    c10d::OpType type;
    std::vector<at::Tensor> operands;  // every tensor Gloo reads or writes
    std::vector<at::Tensor> outputs;   // Work::result() and the future's value
    std::chrono::milliseconds timeout;
    SimdevWork::Wait wait = SimdevWork::Wait::kStream;
    c10::DeviceIndex device_if_no_tensors = -1;  // barrier: where it is ordered (-1: current device)
  };

  c10::intrusive_ptr<c10d::Work> run(Collective collective, GlooCall call);
  // run() for the collectives that gather into lists of output lists
  // (allgather, allgather_coalesced, gather): `call` gets them rebuilt from the aliases.
  c10::intrusive_ptr<c10d::Work> runToNested(
      const char* what, c10d::OpType type, const std::vector<at::Tensor>& inputs,
      const std::vector<std::vector<at::Tensor>>& outputs, std::chrono::milliseconds timeout,
      std::function<c10::intrusive_ptr<c10d::Work>(std::vector<std::vector<at::Tensor>>&, std::vector<at::Tensor>&)>
          call);
  c10::intrusive_ptr<c10d::Work> runOnHost(const Collective& collective, GlooCall call);
  // On the stream's worker: the turn, the Gloo call, Gloo's result.
  void runInTurn(const char* what, std::chrono::milliseconds timeout, uint64_t ticket, const GlooCall& call,
                 std::vector<at::Tensor>& aliases, CollectiveOutcome& outcome);

  std::chrono::milliseconds timeoutOf(std::chrono::milliseconds requested) const;
  void checkNotFailed(const char* what);
  void recordFailure(const char* what, std::exception_ptr error);

  c10::intrusive_ptr<c10d::Backend> gloo_;
  std::chrono::milliseconds timeout_;
  CollectiveOrder order_;
  // Held while a collective takes its ticket and is queued, so that the
  // tickets of the collectives of one stream are in that stream's order.
  std::mutex issue_mutex_;
  std::mutex failure_mutex_;
  std::string failure_;  // the first failure; empty while the group is sound
};

}  // namespace torch_simdev
