#include "distributed.h"

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>
#include <c10/core/Event.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/utils/pybind.h>

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "cuda_alias.h"
#include "device.h"
#include "streams.h"

namespace py = pybind11;

namespace cudadev {
namespace {

using Nested = std::vector<std::vector<at::Tensor>>;

// The handle of a collective queued on a cudadev stream (see distributed.h).
class CudadevWork : public c10d::Work {
 public:
  CudadevWork(int rank, c10d::OpType type, c10::DeviceIndex device, std::vector<at::Tensor> outputs,
              c10::intrusive_ptr<c10d::Work> nccl_work)
      : c10d::Work(rank, type),
        device_(device),
        done_(c10::DeviceType::PrivateUse1),
        outputs_(std::move(outputs)),
        nccl_work_(std::move(nccl_work)),
        future_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()),
            std::vector<c10::Device>{c10::Device(c10::DeviceType::PrivateUse1, device)})) {
    // On the issuing thread, the collective's stream still current.
    done_.record(current_stream(device_));
    future_->markCompleted(c10::IValue(outputs_));
  }

  bool isCompleted() override { return done_.query(); }
  std::vector<at::Tensor> result() override { return outputs_; }
  void synchronize() override { done_.block(current_stream(device_)); }
  bool wait(std::chrono::milliseconds /*timeout: NCCL's watchdog owns timeouts*/) override {
    synchronize();
    return true;
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::exception_ptr exception() const override { return nccl_work_ ? nccl_work_->exception() : nullptr; }

 private:
  c10::DeviceIndex device_;
  c10::Event done_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10d::Work> nccl_work_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// The options of an NCCL call on cudadev's current stream: asyncOp=false makes
// ProcessGroupNCCL launch on CUDA's current stream (made cudadev's by run())
// instead of its own side stream, so the collective is in stream order with
// no event, no side stream and no recordStream.
template <class Options>
Options on_current_stream(const Options& opts) {
  Options options = opts;
  options.asyncOp = false;
  return options;
}

// A collective's tensors are aliased as one list (run()); these put nested
// and plain lists into it and take them back out of the aliased list.
std::vector<size_t> append_nested(std::vector<at::Tensor>& all, const Nested& nested) {
  std::vector<size_t> sizes;
  for (const auto& list : nested) {
    sizes.push_back(list.size());
    all.insert(all.end(), list.begin(), list.end());
  }
  return sizes;
}

std::vector<at::Tensor> take(const std::vector<at::Tensor>& all, size_t offset, size_t count) {
  return std::vector<at::Tensor>(all.begin() + offset, all.begin() + offset + count);
}

Nested take_nested(const std::vector<at::Tensor>& all, size_t offset, const std::vector<size_t>& sizes) {
  Nested nested;
  for (size_t size : sizes) {
    nested.push_back(take(all, offset, size));
    offset += size;
  }
  return nested;
}

std::vector<at::Tensor> flattened(const Nested& nested) {
  std::vector<at::Tensor> all;
  append_nested(all, nested);
  return all;
}

c10::DeviceIndex common_device(const char* what, const std::vector<at::Tensor>& tensors) {
  std::optional<c10::Device> first;
  for (const at::Tensor& tensor : tensors) {
    if (!tensor.defined()) continue;
    TORCH_CHECK_VALUE(tensor.device().is_privateuseone(), what, ": a tensor on ", tensor.device(),
                      "; this process group takes cudadev tensors (use a Gloo group for CPU tensors)");
    if (!first) first = tensor.device();
    TORCH_CHECK_VALUE(tensor.device() == *first, what, ": tensors on ", *first, " and ", tensor.device(),
                      "; pass the tensors of one collective on one device");
  }
  return first ? first->index() : current_device();
}

class CudadevNcclBackend : public c10d::Backend {
 public:
  CudadevNcclBackend(c10::intrusive_ptr<c10d::Backend> nccl)
      : c10d::Backend(nccl ? nccl->getRank() : 0, nccl ? nccl->getSize() : 0), nccl_(std::move(nccl)) {
    TORCH_CHECK_VALUE(nccl_, "CudadevNcclBackend needs a ProcessGroupNCCL (torch.distributed.ProcessGroupNCCL)");
  }

  const std::string getBackendName() const override { return "cdnccl"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    return run("cdnccl broadcast", c10d::OpType::BROADCAST, tensors, tensors, [&](auto& a) {
      return nccl_->broadcast(a, on_current_stream(opts));
    });
  }
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    return run("cdnccl allreduce", c10d::OpType::ALLREDUCE, tensors, tensors, [&](auto& a) {
      return nccl_->allreduce(a, on_current_stream(opts));
    });
  }
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override {
    return run("cdnccl allreduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, tensors, tensors, [&](auto& a) {
      return nccl_->allreduce_coalesced(a, on_current_stream(opts));
    });
  }
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override {
    return run("cdnccl reduce", c10d::OpType::REDUCE, tensors, tensors, [&](auto& a) {
      return nccl_->reduce(a, on_current_stream(opts));
    });
  }
  c10::intrusive_ptr<c10d::Work> allgather(Nested& outputs, std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override {
    return run_nested_outputs("cdnccl allgather", c10d::OpType::ALLGATHER, outputs, inputs, [&](auto& out, auto& in) {
      return nccl_->allgather(out, in, on_current_stream(opts));
    });
  }
  c10::intrusive_ptr<c10d::Work> gather(Nested& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override {
    // outputs: the root's list of one tensor per rank; empty on the others
    return run_nested_outputs("cdnccl gather", c10d::OpType::GATHER, outputs, inputs, [&](auto& out, auto& in) {
      return nccl_->gather(out, in, on_current_stream(opts));
    });
  }
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, Nested& inputs,
                                         const c10d::ScatterOptions& opts) override {
    // inputs: the root's list of one tensor per rank; empty on the others
    return run_nested_inputs("cdnccl scatter", c10d::OpType::SCATTER, outputs, inputs, [&](auto& out, auto& in) {
      return nccl_->scatter(out, in, on_current_stream(opts));
    });
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs, Nested& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    return run_nested_inputs("cdnccl reduce_scatter", c10d::OpType::REDUCE_SCATTER, outputs, inputs,
                             [&](auto& out, auto& in) {
                               return nccl_->reduce_scatter(out, in, on_current_stream(opts));
                             });
  }
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override {
    std::vector<at::Tensor> operands = outputs;
    operands.insert(operands.end(), inputs.begin(), inputs.end());
    const size_t count = outputs.size();
    return run("cdnccl alltoall", c10d::OpType::ALLTOALL, operands, outputs, [&](auto& a) {
      std::vector<at::Tensor> out = take(a, 0, count);
      std::vector<at::Tensor> in = take(a, count, a.size() - count);
      return nccl_->alltoall(out, in, on_current_stream(opts));
    });
  }
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override {
    return run("cdnccl _allgather_base", c10d::OpType::_ALLGATHER_BASE, {input, output}, {output}, [&](auto& a) {
      return nccl_->_allgather_base(a[1], a[0], on_current_stream(opts));
    });
  }
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override {
    std::vector<at::Tensor> operands = inputs;
    operands.insert(operands.end(), outputs.begin(), outputs.end());
    const size_t count = inputs.size();
    return run("cdnccl allgather_into_tensor_coalesced", c10d::OpType::COALESCED, operands, outputs, [&](auto& a) {
      std::vector<at::Tensor> in = take(a, 0, count);
      std::vector<at::Tensor> out = take(a, count, a.size() - count);
      return nccl_->allgather_into_tensor_coalesced(out, in, on_current_stream(opts));
    });
  }
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override {
    return run("cdnccl _reduce_scatter_base", c10d::OpType::_REDUCE_SCATTER_BASE, {input, output}, {output},
               [&](auto& a) {
                 return nccl_->_reduce_scatter_base(a[1], a[0], on_current_stream(opts));
               });
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override {
    std::vector<at::Tensor> operands = inputs;
    operands.insert(operands.end(), outputs.begin(), outputs.end());
    const size_t count = inputs.size();
    return run("cdnccl reduce_scatter_tensor_coalesced", c10d::OpType::COALESCED, operands, outputs, [&](auto& a) {
      std::vector<at::Tensor> in = take(a, 0, count);
      std::vector<at::Tensor> out = take(a, count, a.size() - count);
      return nccl_->reduce_scatter_tensor_coalesced(out, in, on_current_stream(opts));
    });
  }
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override {
    return run("cdnccl alltoall_base", c10d::OpType::ALLTOALL_BASE, {input, output}, {output}, [&](auto& a) {
      return nccl_->alltoall_base(a[1], a[0], output_split_sizes, input_split_sizes, on_current_stream(opts));
    });
  }
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    // An all-reduce of one byte on the current stream, as ProcessGroupNCCL's
    // barrier; wait() then blocks the host (done here: a barrier is a host wait).
    const c10::DeviceIndex device =
        opts.device && opts.device->is_privateuseone() ? opts.device->index() : current_device();
    at::Tensor token = at::zeros({1}, at::TensorOptions().dtype(at::kByte).device(c10::DeviceType::PrivateUse1, device));
    std::vector<at::Tensor> tensors{token};
    auto work = allreduce(tensors, c10d::AllreduceOptions());
    c10::Event done(c10::DeviceType::PrivateUse1);
    done.record(current_stream(device));
    // torch's bindings of the collectives release the GIL already; release it
    // here only where a caller still holds it (releasing it twice aborts).
    PyThreadState* saved = PyGILState_Check() ? PyEval_SaveThread() : nullptr;
    try {
      done.synchronize();
    } catch (...) {
      if (saved != nullptr) PyEval_RestoreThread(saved);
      throw;
    }
    if (saved != nullptr) PyEval_RestoreThread(saved);
    return work;
  }

 private:
  template <class Call>
  c10::intrusive_ptr<c10d::Work> run(const char* what, c10d::OpType type, const std::vector<at::Tensor>& operands,
                                     std::vector<at::Tensor> outputs, Call call) {
    const c10::DeviceIndex device = common_device(what, operands);
    AliasScope scope(device);
    scope.reserve(operands.size());
    std::vector<at::Tensor> aliases;
    aliases.reserve(operands.size());
    for (const at::Tensor& tensor : operands) aliases.push_back(tensor.defined() ? scope.to_cuda(tensor) : tensor);
    c10::intrusive_ptr<c10d::Work> nccl_work;
    {
      c10::cuda::CUDAStreamGuard on_cudadev_stream(current_stream_as_cuda(device));
      nccl_work = call(aliases);
    }
    return c10::make_intrusive<CudadevWork>(rank_, type, device, std::move(outputs), std::move(nccl_work));
  }

  // run() for a collective whose outputs are a list per input (allgather,
  // gather): call(outputs, inputs) gets their aliases.
  template <class Call>
  c10::intrusive_ptr<c10d::Work> run_nested_outputs(const char* what, c10d::OpType type, const Nested& outputs,
                                                    const std::vector<at::Tensor>& inputs, Call call) {
    std::vector<at::Tensor> operands = inputs;
    const std::vector<size_t> sizes = append_nested(operands, outputs);
    const size_t count = inputs.size();
    return run(what, type, operands, flattened(outputs), [&](auto& a) {
      Nested out = take_nested(a, count, sizes);
      std::vector<at::Tensor> in = take(a, 0, count);
      return call(out, in);
    });
  }
  // run() for a collective whose inputs are a list per output (scatter,
  // reduce_scatter).
  template <class Call>
  c10::intrusive_ptr<c10d::Work> run_nested_inputs(const char* what, c10d::OpType type,
                                                   const std::vector<at::Tensor>& outputs, const Nested& inputs,
                                                   Call call) {
    std::vector<at::Tensor> operands = outputs;
    const std::vector<size_t> sizes = append_nested(operands, inputs);
    const size_t count = outputs.size();
    return run(what, type, operands, outputs, [&](auto& a) {
      std::vector<at::Tensor> out = take(a, 0, count);
      Nested in = take_nested(a, count, sizes);
      return call(out, in);
    });
  }

  c10::intrusive_ptr<c10d::Backend> nccl_;
};

}  // namespace

void bind_distributed(py::module& parent) {
  py::object c10d;
  try {
    c10d = py::module::import("torch._C._distributed_c10d");
  } catch (const py::error_already_set&) {
    return;  // a torch without torch.distributed
  }
  py::module distributed = parent.def_submodule("_distributed", "cudadev's collective backend (NCCL on cudadev streams)");
  py::class_<CudadevNcclBackend, c10::intrusive_ptr<CudadevNcclBackend>>(distributed, "CudadevNcclBackend",
                                                                        c10d.attr("Backend"))
      .def(py::init([](const c10::intrusive_ptr<c10d::Backend>& nccl) {
             return c10::make_intrusive<CudadevNcclBackend>(nccl);
           }),
           py::arg("nccl"), "Wraps `nccl` (a torch.distributed.ProcessGroupNCCL of the same store, rank and size).");
}

}  // namespace cudadev
