// Reductions that run as stream-ordered host work (OpRunner.h): sum, mean
// (over all or some dims, functional and out=) and the full max.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <vector>

#include "ops/OpRunner.h"

namespace torch_simdev {
namespace {

using Tensors = std::vector<at::Tensor>;

// Reductions take no CPU scalar beside their simdev tensors, as on CUDA
// (TensorIterator::reduce_op does not allow_cpu_scalars).
constexpr CpuScalars kReduction = CpuScalars::kRefused;

// `dim` is a view into the caller's arguments; queued work needs its own copy.
struct Dims {
  std::optional<std::vector<int64_t>> values;
  explicit Dims(at::OptionalIntArrayRef dim) {
    if (dim.has_value()) values = dim->vec();
  }
  at::OptionalIntArrayRef ref() const {
    return values.has_value() ? at::OptionalIntArrayRef(*values) : at::OptionalIntArrayRef();
  }
};

at::Tensor sum(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
               std::optional<c10::ScalarType> dtype) {
  const Dims dims(dim);
  return runFunctional(
      "aten::sum.dim_IntList", {{"self", self}}, kReduction,
      [&](Tensors& m) { return at::sum(m[0], dims.ref(), keepdim, dtype); },
      [dims, keepdim, dtype](Tensors& t) { at::sum_out(t[0], t[1], dims.ref(), keepdim, dtype); });
}

at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  const Dims dims(dim);
  return runInto("aten::sum.IntList_out", out, "out", {{"self", self}}, kReduction,
                 [dims, keepdim, dtype](Tensors& t) { at::sum_out(t[0], t[1], dims.ref(), keepdim, dtype); });
}

at::Tensor mean(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                std::optional<c10::ScalarType> dtype) {
  const Dims dims(dim);
  return runFunctional(
      "aten::mean.dim", {{"self", self}}, kReduction,
      [&](Tensors& m) { return at::mean(m[0], dims.ref(), keepdim, dtype); },
      [dims, keepdim, dtype](Tensors& t) { at::mean_out(t[0], t[1], dims.ref(), keepdim, dtype); });
}

at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  const Dims dims(dim);
  return runInto("aten::mean.out", out, "out", {{"self", self}}, kReduction,
                 [dims, keepdim, dtype](Tensors& t) { at::mean_out(t[0], t[1], dims.ref(), keepdim, dtype); });
}

at::Tensor max(const at::Tensor& self) {
  // Meta max does not reject empty inputs; ATen's CPU max does, with its own message.
  TORCH_CHECK(self.numel() > 0,
              "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
              "reduction dim with the 'dim' argument.");
  // The result is a 0-dim tensor of the input's dtype.
  return runFunctional(
      "aten::max", {{"self", self}}, kReduction, [](Tensors& m) { return at::empty({}, m[0].options()); },
      [](Tensors& t) { at::max_out(t[0], t[1]); });
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sum.dim_IntList", TORCH_FN(sum));
  m.impl("sum.IntList_out", TORCH_FN(sum_out));
  m.impl("mean.dim", TORCH_FN(mean));
  m.impl("mean.out", TORCH_FN(mean_out));
  m.impl("max", TORCH_FN(max));
}

}  // namespace torch_simdev
