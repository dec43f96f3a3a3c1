#include "distributed/SimdevBackend.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <exception>
#include <numeric>
#include <optional>
#include <utility>

#include "GilReleased.h"
#include "SimdevCheck.h"
#include "SimdevDevice.h"
#include "SimdevStream.h"
#include "ops/HostWork.h"

namespace torch_simdev {
namespace {

using Nested = std::vector<std::vector<at::Tensor>>;

std::string messageOf(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

// What the handle of a failed collective raises (Work.wait(), synchronize()):
// a DistBackendError naming the collective, as torch reports a failed
// collective of NCCL's, rather than the collective library's own exception
// (Gloo's RuntimeError), which named no collective and was another type than
// the same failure reported a moment later (AcceleratorError at the stream's
// synchronization, DistBackendError at the next collective).
std::exception_ptr asDistBackendError(const char* what, const std::exception_ptr& error) {
  try {
    C10_THROW_ERROR(DistBackendError, std::string(what) + " failed: " + messageOf(error));
  } catch (...) {
    return std::current_exception();
  }
}

// The simdev device of the operands; nullopt when none is a simdev tensor.
// Refuses operands on two devices, or simdev tensors mixed with others.
std::optional<c10::DeviceIndex> commonDevice(const char* what, const std::vector<at::Tensor>& tensors) {
  std::optional<c10::Device> first;
  for (const at::Tensor& tensor : tensors) {
    if (!tensor.defined()) continue;
    const c10::Device device = tensor.device();
    if (device.is_cpu() && tensor.dim() == 0) continue;  // a scalar operand (a PREMUL_SUM factor): copied
    TORCH_CHECK_VALUE(device.is_privateuseone() || device.is_cpu(), what, ": a tensor on ", device,
                      "; this process group takes simdev tensors (and CPU tensors, for host collectives)");
    if (!first) {
      first = device;
      continue;
    }
    TORCH_CHECK_VALUE(device == *first, what, ": tensors on ", *first, " and ", device,
                      "; pass the tensors of one collective on one device (as NCCL requires)");
  }
  if (!first || first->is_cpu()) return std::nullopt;
  return first->index();
}

void checkContiguous(const char* what, const std::vector<at::Tensor>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    TORCH_CHECK_VALUE(!tensors[i].defined() || tensors[i].is_contiguous(), what, ": tensor ", i, " (sizes ",
                      tensors[i].sizes(), ", strides ", tensors[i].strides(),
                      ") is not contiguous; Gloo reads and writes tensors as one block: pass .contiguous()");
  }
}

void checkNotCapturing(const char* what, c10::DeviceIndex device) {
  sdStreamCaptureStatus status = sdStreamCaptureStatusNone;
  SIMDEV_CHECK(sdStreamGetCaptureStatus(currentNativeStream(device), &status));
  TORCH_CHECK(status == sdStreamCaptureStatusNone, what, ": the current stream of simdev:", static_cast<int>(device),
              " is capturing a graph, and a collective cannot be captured (each replay would call Gloo again, "
              "without the other ranks). Issue collectives outside graph capture.");
}

std::vector<at::Tensor> flatten(const Nested& nested, std::vector<size_t>* sizes) {
  std::vector<at::Tensor> flat;
  for (const auto& list : nested) {
    sizes->push_back(list.size());
    flat.insert(flat.end(), list.begin(), list.end());
  }
  return flat;
}

Nested unflatten(const std::vector<at::Tensor>& flat, size_t offset, const std::vector<size_t>& sizes) {
  Nested nested;
  for (size_t size : sizes) {
    nested.emplace_back(flat.begin() + offset, flat.begin() + offset + size);
    offset += size;
  }
  return nested;
}

// ReduceOp.PREMUL_SUM (FSDP2 uses it for a custom gradient divide factor)
// is a multiplication by a factor, then a sum. Gloo refuses it
// (ProcessGroupGlooDetail.hpp), so the inputs are multiplied here. The
// factor is a number or a one-element tensor; a tensor travels as the last
// operand of the collective (made from `operands` by of()), so the stream
// work reads it in stream order and never holds the tensor itself.
struct PremulSum {
  bool active = false;
  bool factor_is_operand = false;
  double factor = 1.0;

  static PremulSum of(const c10d::ReduceOp& op, const char* what, std::vector<at::Tensor>* operands) {
    PremulSum premul;
    if (op.op_ != c10d::ReduceOp::PREMUL_SUM) return premul;
    // NCCLPreMulSumSupplement: torch 2.11's name; 2.13 and 2.14 keep it as an alias of PreMulSumSupplement.
    const auto* supplement = dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
    TORCH_CHECK_VALUE(supplement != nullptr, what,
                      ": ReduceOp.PREMUL_SUM without its factor; make it with torch.distributed._make_nccl_premul_sum");
    premul.active = true;
    if (supplement->tensor_factor.defined()) {
      premul.factor_is_operand = true;
      operands->push_back(supplement->tensor_factor);
    } else {
      premul.factor = supplement->double_factor;
    }
    return premul;
  }

  // On the worker: the factor (the last alias when it is a tensor).
  double value(const std::vector<at::Tensor>& aliases) const {
    return factor_is_operand ? aliases.back().item<double>() : factor;
  }
};

// The list-form alltoall as one alltoall_base over the tensors laid end to
// end: input i goes to rank i, output j comes from rank j, each flattened.
// Gloo's own list form is not there on every torch this plugin builds
// against (torch 2.11's ProcessGroupGloo refuses it: "Backend gloo does not
// support alltoall"); its alltoall_base with split sizes is. Waits for Gloo
// before copying the received block into the outputs, so the Work it
// returns has completed.
c10::intrusive_ptr<c10d::Work> alltoallEndToEnd(c10d::Backend& gloo, std::vector<at::Tensor>& outputs,
                                                std::vector<at::Tensor>& inputs, const c10d::AllToAllOptions& opts) {
  std::vector<int64_t> input_splits, output_splits;
  std::vector<at::Tensor> flat_inputs;
  for (const at::Tensor& tensor : inputs) {
    input_splits.push_back(tensor.numel());
    flat_inputs.push_back(tensor.reshape(-1));
  }
  for (const at::Tensor& tensor : outputs) output_splits.push_back(tensor.numel());
  at::Tensor input = at::cat(flat_inputs);
  at::Tensor output = at::empty({std::accumulate(output_splits.begin(), output_splits.end(), int64_t{0})},
                                outputs.front().options());
  // Gloo takes the split sizes by reference and moves them into its work:
  // it gets a copy of the output sizes, which the copies below still need.
  std::vector<int64_t> gloo_output_splits = output_splits;
  c10::intrusive_ptr<c10d::Work> work = gloo.alltoall_base(output, input, gloo_output_splits, input_splits, opts);
  work->wait();
  int64_t offset = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i].view(-1).copy_(output.narrow(0, offset, output_splits[i]));
    offset += output_splits[i];
  }
  return work;
}

// What alltoall needs of its lists: one tensor per rank in each, one dtype.
void checkAlltoallLists(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs, int size) {
  TORCH_CHECK_VALUE(inputs.size() == static_cast<size_t>(size) && outputs.size() == static_cast<size_t>(size),
                    "sdgloo alltoall: ", inputs.size(), " input and ", outputs.size(),
                    " output tensors for a group of ", size, " ranks; pass one tensor per rank in each list");
  for (const auto* list : {&inputs, &outputs}) {
    for (const at::Tensor& tensor : *list) {
      TORCH_CHECK_VALUE(tensor.scalar_type() == inputs.front().scalar_type(), "sdgloo alltoall: tensors of ",
                        inputs.front().scalar_type(), " and ", tensor.scalar_type(),
                        "; pass the tensors of one alltoall in one dtype");
    }
  }
}

}  // namespace

SimdevBackend::SimdevBackend(c10::intrusive_ptr<c10d::Backend> gloo, std::chrono::milliseconds timeout)
    : c10d::Backend(gloo ? gloo->getRank() : 0, gloo ? gloo->getSize() : 0), gloo_(std::move(gloo)), timeout_(timeout) {
  TORCH_CHECK_VALUE(gloo_, "SimdevBackend needs a Gloo process group (torch.distributed.ProcessGroupGloo)");
  TORCH_CHECK_VALUE(timeout_.count() > 0, "SimdevBackend: the timeout must be positive, got ", timeout_.count(), " ms");
}

std::chrono::milliseconds SimdevBackend::timeoutOf(std::chrono::milliseconds requested) const {
  return requested == c10d::kUnsetTimeout ? timeout_ : requested;
}

void SimdevBackend::checkNotFailed(const char* what) {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  if (failure_.empty()) return;
  C10_THROW_ERROR(DistBackendError,
                  std::string(what) + ": an earlier collective of this process group failed (" + failure_ +
                      "), so the ranks may disagree on which collectives completed and the group cannot run "
                      "another one. Destroy it (torch.distributed.destroy_process_group) and create a new one.");
}

void SimdevBackend::recordFailure(const char* what, std::exception_ptr error) {
  const std::string message = messageOf(error);
  std::lock_guard<std::mutex> lock(failure_mutex_);
  if (failure_.empty()) failure_ = std::string(what) + ": " + message;
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::run(Collective collective, GlooCall call) {
  const std::optional<c10::DeviceIndex> device = commonDevice(collective.what, collective.operands);
  const bool has_tensors = !collective.operands.empty();
  if (!device && has_tensors) return runOnHost(collective, std::move(call));

  const c10::DeviceIndex index = device ? *device : resolveDeviceIndex(collective.device_if_no_tensors);
  checkContiguous(collective.what, collective.operands);
  checkNotFailed(collective.what);
  checkNotCapturing(collective.what, index);

  Operands operands;
  operands.reserve(collective.operands.size());
  for (const at::Tensor& tensor : collective.operands) operands.push_back(Operand::output(tensor));
  auto outcome = std::make_shared<CollectiveOutcome>();
  auto work = c10::make_intrusive<SimdevWork>(rank_, collective.type, collective.what, index,
                                              std::move(collective.outputs), outcome, collective.wait);
  auto self = c10::intrusive_ptr<SimdevBackend>::reclaim_copy(this);
  const char* what = collective.what;
  const std::chrono::milliseconds timeout = collective.timeout;
  {
    std::lock_guard<std::mutex> issue(issue_mutex_);
    const uint64_t ticket = order_.take();
    try {
      launchOnDevice(what, index, std::move(operands),
                     [self, what, timeout, ticket, call = std::move(call), outcome](std::vector<at::Tensor>& aliases) {
                       self->runInTurn(what, timeout, ticket, call, aliases, *outcome);
                     });
    } catch (...) {
      order_.finish(ticket);  // it will never run: later tickets must not wait for it
      recordFailure(what, std::current_exception());
      throw;
    }
  }
  work->issued();
  return work;
}

void SimdevBackend::runInTurn(const char* what, std::chrono::milliseconds timeout, uint64_t ticket,
                              const GlooCall& call, std::vector<at::Tensor>& aliases, CollectiveOutcome& outcome) {
  try {
    if (!order_.waitTurn(ticket, timeout)) {
      const uint64_t turn = order_.turn();
      order_.finish(ticket);
      TORCH_CHECK(false, what, ": collective #", ticket, " of this process group waited ", timeout.count(),
                  " ms for collective #", turn, " to reach Gloo first; the stream that runs #", turn,
                  " has not got there (is it waiting for an event recorded after #", ticket, " was issued?)");
    }
    c10::intrusive_ptr<c10d::Work> gloo_work;
    try {
      checkNotFailed(what);
      gloo_work = call(aliases);
    } catch (...) {
      order_.finish(ticket);
      throw;
    }
    order_.finish(ticket);
    gloo_work->wait();
  } catch (...) {
    outcome.fail(asDistBackendError(what, std::current_exception()));
    recordFailure(what, std::current_exception());
    throw;
  }
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::runOnHost(const Collective& collective, GlooCall call) {
  checkNotFailed(collective.what);
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> issue(issue_mutex_);
    ticket = order_.take();
  }
  bool turn = false;
  {
    GilReleasedIfHeld no_gil;  // earlier collectives wait for their streams, whose work may need it
    turn = order_.waitTurn(ticket, collective.timeout);
  }
  if (!turn) {
    order_.finish(ticket);
    TORCH_CHECK(false, collective.what, ": waited ", collective.timeout.count(),
                " ms for the collectives issued before it on simdev streams to reach Gloo");
  }
  std::vector<at::Tensor> tensors = collective.operands;
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = call(tensors);
  } catch (...) {
    order_.finish(ticket);
    recordFailure(collective.what, std::current_exception());
    throw;
  }
  order_.finish(ticket);
  return work;
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::runToNested(
    const char* what, c10d::OpType type, const std::vector<at::Tensor>& inputs, const Nested& outputs,
    std::chrono::milliseconds timeout,
    std::function<c10::intrusive_ptr<c10d::Work>(Nested&, std::vector<at::Tensor>&)> call) {
  std::vector<size_t> sizes;
  std::vector<at::Tensor> flat = flatten(outputs, &sizes);
  std::vector<at::Tensor> operands = inputs;
  operands.insert(operands.end(), flat.begin(), flat.end());
  const size_t count = inputs.size();
  return run({what, type, std::move(operands), flat, timeout},
             [call = std::move(call), sizes, count](std::vector<at::Tensor>& aliases) {
               std::vector<at::Tensor> in(aliases.begin(), aliases.begin() + count);
               Nested out = unflatten(aliases, count, sizes);
               return call(out, in);
             });
}

// ---------------------------------------------------------------- collectives

c10::intrusive_ptr<c10d::Work> SimdevBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                        const c10d::BroadcastOptions& opts) {
  return run({"sdgloo broadcast", c10d::OpType::BROADCAST, tensors, tensors, timeoutOf(opts.timeout)},
             [this, opts](std::vector<at::Tensor>& t) { return gloo_->broadcast(t, opts); });
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::AllreduceOptions& opts) {
  constexpr const char* what = "sdgloo allreduce";
  std::vector<at::Tensor> operands = tensors;
  const PremulSum premul = PremulSum::of(opts.reduceOp, what, &operands);
  const size_t count = tensors.size();
  Collective collective{what, c10d::OpType::ALLREDUCE, std::move(operands), tensors, timeoutOf(opts.timeout)};
  return run(std::move(collective), [this, opts, premul, count](std::vector<at::Tensor>& aliases) {
    std::vector<at::Tensor> data(aliases.begin(), aliases.begin() + count);
    c10d::AllreduceOptions options = opts;
    if (premul.active) {
      const double factor = premul.value(aliases);
      for (at::Tensor& tensor : data) tensor.mul_(factor);
      options.reduceOp = c10d::ReduceOp(c10d::ReduceOp::SUM);
    }
    return gloo_->allreduce(data, options);
  });
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                  const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK_VALUE(opts.reduceOp.op_ != c10d::ReduceOp::PREMUL_SUM,
                    "sdgloo allreduce_coalesced: ReduceOp.PREMUL_SUM is not supported here; use all_reduce per tensor");
  return run({"sdgloo allreduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, tensors, tensors,
              timeoutOf(opts.timeout)},
             [this, opts](std::vector<at::Tensor>& t) { return gloo_->allreduce_coalesced(t, opts); });
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::reduce(std::vector<at::Tensor>& tensors,
                                                     const c10d::ReduceOptions& opts) {
  TORCH_CHECK_VALUE(opts.reduceOp.op_ != c10d::ReduceOp::PREMUL_SUM,
                    "sdgloo reduce: ReduceOp.PREMUL_SUM is not supported here; use all_reduce");
  return run({"sdgloo reduce", c10d::OpType::REDUCE, tensors, tensors, timeoutOf(opts.timeout)},
             [this, opts](std::vector<at::Tensor>& t) { return gloo_->reduce(t, opts); });
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::allgather(Nested& outputs, std::vector<at::Tensor>& inputs,
                                                        const c10d::AllgatherOptions& opts) {
  return runToNested("sdgloo allgather", c10d::OpType::ALLGATHER, inputs, outputs, timeoutOf(opts.timeout),
                     [this, opts](Nested& out, std::vector<at::Tensor>& in) { return gloo_->allgather(out, in, opts); });
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                              const c10d::AllgatherOptions& opts) {
  return run({"sdgloo _allgather_base", c10d::OpType::_ALLGATHER_BASE, {input, output}, {output},
              timeoutOf(opts.timeout)},
             [this, opts](std::vector<at::Tensor>& a) { return gloo_->_allgather_base(a[1], a[0], opts); });
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::allgather_coalesced(Nested& outputs, std::vector<at::Tensor>& inputs,
                                                                  const c10d::AllgatherOptions& opts) {
  return runToNested("sdgloo allgather_coalesced", c10d::OpType::ALLGATHER_COALESCED, inputs, outputs,
                     timeoutOf(opts.timeout), [this, opts](Nested& out, std::vector<at::Tensor>& in) {
                       return gloo_->allgather_coalesced(out, in, opts);
                     });
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                              std::vector<at::Tensor>& inputs,
                                                                              const c10d::AllgatherOptions& opts) {
  std::vector<at::Tensor> operands = inputs;
  operands.insert(operands.end(), outputs.begin(), outputs.end());
  const size_t count = inputs.size();
  return run({"sdgloo allgather_into_tensor_coalesced", c10d::OpType::COALESCED, std::move(operands), outputs,
              timeoutOf(opts.timeout)},
             [this, opts, count](std::vector<at::Tensor>& aliases) {
               std::vector<at::Tensor> in(aliases.begin(), aliases.begin() + count);
               std::vector<at::Tensor> out(aliases.begin() + count, aliases.end());
               return gloo_->allgather_into_tensor_coalesced(out, in, opts);
             });
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::gather(Nested& outputs, std::vector<at::Tensor>& inputs,
                                                     const c10d::GatherOptions& opts) {
  return runToNested("sdgloo gather", c10d::OpType::GATHER, inputs, outputs, timeoutOf(opts.timeout),
                     [this, opts](Nested& out, std::vector<at::Tensor>& in) { return gloo_->gather(out, in, opts); });
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::scatter(std::vector<at::Tensor>& outputs, Nested& inputs,
                                                      const c10d::ScatterOptions& opts) {
  std::vector<size_t> sizes;
  std::vector<at::Tensor> operands = outputs;
  std::vector<at::Tensor> flat = flatten(inputs, &sizes);
  operands.insert(operands.end(), flat.begin(), flat.end());
  const size_t count = outputs.size();
  return run({"sdgloo scatter", c10d::OpType::SCATTER, std::move(operands), outputs, timeoutOf(opts.timeout)},
             [this, opts, sizes, count](std::vector<at::Tensor>& aliases) {
               std::vector<at::Tensor> out(aliases.begin(), aliases.begin() + count);
               Nested in = unflatten(aliases, count, sizes);
               return gloo_->scatter(out, in, opts);
             });
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::reduce_scatter(std::vector<at::Tensor>& outputs, Nested& inputs,
                                                             const c10d::ReduceScatterOptions& opts) {
  constexpr const char* what = "sdgloo reduce_scatter";
  std::vector<size_t> sizes;
  std::vector<at::Tensor> operands = outputs;
  std::vector<at::Tensor> flat = flatten(inputs, &sizes);
  operands.insert(operands.end(), flat.begin(), flat.end());
  const PremulSum premul = PremulSum::of(opts.reduceOp, what, &operands);
  const size_t count = outputs.size();
  return run({what, c10d::OpType::REDUCE_SCATTER, std::move(operands), outputs, timeoutOf(opts.timeout)},
             [this, opts, premul, sizes, count](std::vector<at::Tensor>& aliases) {
               std::vector<at::Tensor> out(aliases.begin(), aliases.begin() + count);
               Nested in = unflatten(aliases, count, sizes);
               c10d::ReduceScatterOptions options = opts;
               if (premul.active) {  // the inputs are not the collective's to change: scaled copies
                 const double factor = premul.value(aliases);
                 for (auto& list : in)
                   for (at::Tensor& tensor : list) tensor = tensor.mul(factor);
                 options.reduceOp = c10d::ReduceOp(c10d::ReduceOp::SUM);
               }
               return gloo_->reduce_scatter(out, in, options);
             });
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                   const c10d::ReduceScatterOptions& opts) {
  constexpr const char* what = "sdgloo _reduce_scatter_base";
  std::vector<at::Tensor> operands{input, output};
  const PremulSum premul = PremulSum::of(opts.reduceOp, what, &operands);
  return run({what, c10d::OpType::_REDUCE_SCATTER_BASE, std::move(operands), {output}, timeoutOf(opts.timeout)},
             [this, opts, premul](std::vector<at::Tensor>& aliases) {
               at::Tensor in = aliases[0];
               c10d::ReduceScatterOptions options = opts;
               if (premul.active) {
                 in = in.mul(premul.value(aliases));
                 options.reduceOp = c10d::ReduceOp(c10d::ReduceOp::SUM);
               }
               return gloo_->_reduce_scatter_base(aliases[1], in, options);
             });
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  constexpr const char* what = "sdgloo reduce_scatter_tensor_coalesced";
  std::vector<at::Tensor> operands = inputs;
  operands.insert(operands.end(), outputs.begin(), outputs.end());
  const PremulSum premul = PremulSum::of(opts.reduceOp, what, &operands);
  const size_t count = inputs.size();
  return run({what, c10d::OpType::COALESCED, std::move(operands), outputs, timeoutOf(opts.timeout)},
             [this, opts, premul, count](std::vector<at::Tensor>& aliases) {
               std::vector<at::Tensor> in(aliases.begin(), aliases.begin() + count);
               std::vector<at::Tensor> out(aliases.begin() + count, aliases.begin() + 2 * count);
               c10d::ReduceScatterOptions options = opts;
               if (premul.active) {
                 const double factor = premul.value(aliases);
                 for (at::Tensor& tensor : in) tensor = tensor.mul(factor);
                 options.reduceOp = c10d::ReduceOp(c10d::ReduceOp::SUM);
               }
               return gloo_->reduce_scatter_tensor_coalesced(out, in, options);
             });
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                            std::vector<int64_t>& output_split_sizes,
                                                            std::vector<int64_t>& input_split_sizes,
                                                            const c10d::AllToAllOptions& opts) {
  return run({"sdgloo alltoall_base", c10d::OpType::ALLTOALL_BASE, {input, output}, {output}, timeoutOf(opts.timeout)},
             [this, opts, output_split_sizes, input_split_sizes](std::vector<at::Tensor>& a) mutable {
               return gloo_->alltoall_base(a[1], a[0], output_split_sizes, input_split_sizes, opts);
             });
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::AllToAllOptions& opts) {
  checkAlltoallLists(outputs, inputs, getSize());
  std::vector<at::Tensor> operands = inputs;
  operands.insert(operands.end(), outputs.begin(), outputs.end());
  const size_t count = inputs.size();
  return run({"sdgloo alltoall", c10d::OpType::ALLTOALL, std::move(operands), outputs, timeoutOf(opts.timeout)},
             [this, opts, count](std::vector<at::Tensor>& aliases) {
               std::vector<at::Tensor> in(aliases.begin(), aliases.begin() + count);
               std::vector<at::Tensor> out(aliases.begin() + count, aliases.end());
               return alltoallEndToEnd(*gloo_, out, in, opts);
             });
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  return run({"sdgloo send", c10d::OpType::SEND, tensors, {}, timeout_},
             [this, dst_rank, tag](std::vector<at::Tensor>& t) { return gloo_->send(t, dst_rank, tag); });
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  return run({"sdgloo recv", c10d::OpType::RECV, tensors, tensors, timeout_},
             [this, src_rank, tag](std::vector<at::Tensor>& t) { return gloo_->recv(t, src_rank, tag); });
}

c10::intrusive_ptr<c10d::Work> SimdevBackend::barrier(const c10d::BarrierOptions& opts) {
  // Ordered on the current stream of the device it names (the current device
  // otherwise); its wait() blocks the host until every rank got there.
  c10::DeviceIndex device = -1;
  if (opts.device && opts.device->is_privateuseone()) {
    device = opts.device->index();
  } else if (!opts.device_ids.empty()) {
    device = static_cast<c10::DeviceIndex>(opts.device_ids.front());
  }
  Collective collective{"sdgloo barrier", c10d::OpType::BARRIER, {}, {}, timeoutOf(opts.timeout)};
  collective.wait = SimdevWork::Wait::kHost;
  collective.device_if_no_tensors = device;
  return run(std::move(collective), [this, opts](std::vector<at::Tensor>&) { return gloo_->barrier(opts); });
}

}  // namespace torch_simdev
