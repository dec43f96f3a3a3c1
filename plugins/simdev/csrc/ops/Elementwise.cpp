// Elementwise operators that run as stream-ordered host work (OpRunner.h):
// arithmetic (functional, out= and in-place), neg, exp, fill_ and zero_.
// Everything else reaches simdev through the CPU fallback (Fallback.cpp).
#include <ATen/ATen.h>
#include <ATen/native/BinaryOps.h>
#include <torch/library.h>

#include "ops/OpRunner.h"

namespace torch_simdev {
namespace {

using Tensors = std::vector<at::Tensor>;

// A 0-dim CPU tensor may be an operand of a binary op, not of a unary one, as
// on CUDA (TensorIterator's allow_cpu_scalars, ArgumentDevices.h).
constexpr CpuScalars kBinary = CpuScalars::kAccepted;
constexpr CpuScalars kUnary = CpuScalars::kRefused;

// Shape and dtype of a functional elementwise op's result.
std::function<at::Tensor(Tensors&)> resultOf(Promotion promotion) {
  return [promotion](Tensors& metas) { return elementwiseResult(metas, promotion); };
}

// ATen's extra argument checks for add/sub (made here so they raise at the call).
void checkAddSub(const char* op, const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (op[0] == 's') at::native::sub_check(self, other);
  at::native::alpha_check(at::result_type(self, other), alpha);
}

void checkNeg(const at::Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool,
              "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a "
              "mask, use the `~` or `logical_not()` operator instead.");
}

// The tensor arguments of a binary op, named as in its schema.
Inputs binaryInputs(const at::Tensor& self, const at::Tensor& other) { return {{"self", self}, {"other", other}}; }

// ---------------------------------------------------------------- add / sub

at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  checkAddSub("add", self, other, alpha);
  return runFunctional("aten::add.Tensor", binaryInputs(self, other), kBinary, resultOf(Promotion::kCommonDtype),
                       [alpha](Tensors& t) { at::add_out(t[0], t[1], t[2], alpha); });
}
at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  checkAddSub("add", self, other, alpha);
  return runInto("aten::add.out", out, "out", binaryInputs(self, other), kBinary,
                 [alpha](Tensors& t) { at::add_out(t[0], t[1], t[2], alpha); },
                 elementwiseCheck(Promotion::kCommonDtype, /*inplace=*/false));
}
at::Tensor& add_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  checkAddSub("add", self, other, alpha);
  return runInto("aten::add_.Tensor", self, "self", {{"other", other}}, kBinary,
                 [alpha](Tensors& t) { t[0].add_(t[1], alpha); },
                 elementwiseCheck(Promotion::kCommonDtype, /*inplace=*/true));
}

at::Tensor sub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  checkAddSub("sub", self, other, alpha);
  return runFunctional("aten::sub.Tensor", binaryInputs(self, other), kBinary, resultOf(Promotion::kCommonDtype),
                       [alpha](Tensors& t) { at::sub_out(t[0], t[1], t[2], alpha); });
}
at::Tensor& sub_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  checkAddSub("sub", self, other, alpha);
  return runInto("aten::sub.out", out, "out", binaryInputs(self, other), kBinary,
                 [alpha](Tensors& t) { at::sub_out(t[0], t[1], t[2], alpha); },
                 elementwiseCheck(Promotion::kCommonDtype, /*inplace=*/false));
}
at::Tensor& sub_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  checkAddSub("sub", self, other, alpha);
  return runInto("aten::sub_.Tensor", self, "self", {{"other", other}}, kBinary,
                 [alpha](Tensors& t) { t[0].sub_(t[1], alpha); },
                 elementwiseCheck(Promotion::kCommonDtype, /*inplace=*/true));
}

// ---------------------------------------------------------------- mul / div

at::Tensor mul(const at::Tensor& self, const at::Tensor& other) {
  return runFunctional("aten::mul.Tensor", binaryInputs(self, other), kBinary, resultOf(Promotion::kCommonDtype),
                       [](Tensors& t) { at::mul_out(t[0], t[1], t[2]); });
}
at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return runInto("aten::mul.out", out, "out", binaryInputs(self, other), kBinary,
                 [](Tensors& t) { at::mul_out(t[0], t[1], t[2]); },
                 elementwiseCheck(Promotion::kCommonDtype, /*inplace=*/false));
}
at::Tensor& mul_(at::Tensor& self, const at::Tensor& other) {
  return runInto("aten::mul_.Tensor", self, "self", {{"other", other}}, kBinary,
                 [](Tensors& t) { t[0].mul_(t[1]); }, elementwiseCheck(Promotion::kCommonDtype, /*inplace=*/true));
}

at::Tensor div(const at::Tensor& self, const at::Tensor& other) {
  return runFunctional("aten::div.Tensor", binaryInputs(self, other), kBinary, resultOf(Promotion::kIntegerToFloat),
                       [](Tensors& t) { at::div_out(t[0], t[1], t[2]); });
}
at::Tensor& div_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return runInto("aten::div.out", out, "out", binaryInputs(self, other), kBinary,
                 [](Tensors& t) { at::div_out(t[0], t[1], t[2]); },
                 elementwiseCheck(Promotion::kIntegerToFloat, /*inplace=*/false));
}
at::Tensor& div_(at::Tensor& self, const at::Tensor& other) {
  return runInto("aten::div_.Tensor", self, "self", {{"other", other}}, kBinary,
                 [](Tensors& t) { t[0].div_(t[1]); }, elementwiseCheck(Promotion::kIntegerToFloat, /*inplace=*/true));
}

// ---------------------------------------------------------------- neg / exp

at::Tensor neg(const at::Tensor& self) {
  checkNeg(self);
  return runFunctional("aten::neg", {{"self", self}}, kUnary, resultOf(Promotion::kSameDtype),
                       [](Tensors& t) { at::neg_out(t[0], t[1]); });
}
at::Tensor& neg_out(const at::Tensor& self, at::Tensor& out) {
  checkNeg(self);
  return runInto("aten::neg.out", out, "out", {{"self", self}}, kUnary,
                 [](Tensors& t) { at::neg_out(t[0], t[1]); },
                 elementwiseCheck(Promotion::kSameDtype, /*inplace=*/false));
}
at::Tensor& neg_(at::Tensor& self) {
  checkNeg(self);
  return runInto("aten::neg_", self, "self", {}, kUnary, [](Tensors& t) { t[0].neg_(); },
                 elementwiseCheck(Promotion::kSameDtype, /*inplace=*/true));
}

at::Tensor exp(const at::Tensor& self) {
  return runFunctional("aten::exp", {{"self", self}}, kUnary, resultOf(Promotion::kIntegerToFloat),
                       [](Tensors& t) { at::exp_out(t[0], t[1]); });
}
at::Tensor& exp_out(const at::Tensor& self, at::Tensor& out) {
  return runInto("aten::exp.out", out, "out", {{"self", self}}, kUnary,
                 [](Tensors& t) { at::exp_out(t[0], t[1]); },
                 elementwiseCheck(Promotion::kIntegerToFloat, /*inplace=*/false));
}
at::Tensor& exp_(at::Tensor& self) {
  return runInto("aten::exp_", self, "self", {}, kUnary, [](Tensors& t) { t[0].exp_(); },
                 elementwiseCheck(Promotion::kIntegerToFloat, /*inplace=*/true));
}

// ---------------------------------------------------------------- fill_ / zero_

// fill_ and zero_ write every element of self whatever its layout: nothing to check on meta tensors.
void noCheck(Tensors& /*metas*/) {}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  // An unrepresentable value (e.g. 300 into uint8) must raise here, not on the
  // worker: a 0-dim CPU fill performs ATen's range check.
  at::empty({}, at::TensorOptions().dtype(self.scalar_type())).fill_(value);
  return runInto("aten::fill_.Scalar", self, "self", {}, kUnary, [value](Tensors& t) { t[0].fill_(value); },
                 noCheck);
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports a 0-dimension value tensor, got one with ", value.dim(),
              " dimensions; pass a scalar or a 0-dim tensor");
  // A value on another device (the CPU, another simdev device), or a value
  // on simdev for a CPU self, is read with item(), as ATen's fill_ does on
  // every backend (aten/src/ATen/native/Fill.cpp): CUDA accepts either.
  if (value.device() != self.device()) return self.fill_(value.item());
  // The value may be written by queued work: it is read on the worker, in
  // stream order.
  return runInto("aten::fill_.Tensor", self, "self", {{"value", value}}, kUnary,
                 [](Tensors& t) { t[0].fill_(t[1]); }, noCheck);
}

at::Tensor& zero_(at::Tensor& self) {
  return runInto("aten::zero_", self, "self", {}, kUnary, [](Tensors& t) { t[0].zero_(); }, noCheck);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.Tensor", TORCH_FN(add));
  m.impl("add.out", TORCH_FN(add_out));
  m.impl("add_.Tensor", TORCH_FN(add_));
  m.impl("sub.Tensor", TORCH_FN(sub));
  m.impl("sub.out", TORCH_FN(sub_out));
  m.impl("sub_.Tensor", TORCH_FN(sub_));
  m.impl("mul.Tensor", TORCH_FN(mul));
  m.impl("mul.out", TORCH_FN(mul_out));
  m.impl("mul_.Tensor", TORCH_FN(mul_));
  m.impl("div.Tensor", TORCH_FN(div));
  m.impl("div.out", TORCH_FN(div_out));
  m.impl("div_.Tensor", TORCH_FN(div_));
  m.impl("neg", TORCH_FN(neg));
  m.impl("neg.out", TORCH_FN(neg_out));
  m.impl("neg_", TORCH_FN(neg_));
  m.impl("exp", TORCH_FN(exp));
  m.impl("exp.out", TORCH_FN(exp_out));
  m.impl("exp_", TORCH_FN(exp_));
  m.impl("fill_.Scalar", TORCH_FN(fill_scalar));
  m.impl("fill_.Tensor", TORCH_FN(fill_tensor));
  m.impl("zero_", TORCH_FN(zero_));
}

}  // namespace torch_simdev
