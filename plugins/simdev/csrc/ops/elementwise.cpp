// Elementwise operators that run as stream-ordered host work (OpRunner.h):
// arithmetic (functional, out= and in-place), neg, exp, fill_ and zero_.
// Everything else reaches simdev through the CPU fallback (fallback.cpp).
#include <ATen/ATen.h>
#include <ATen/native/BinaryOps.h>
#include <torch/library.h>

#include "ops/OpRunner.h"

namespace torch_simdev {
namespace {

using Tensors = std::vector<at::Tensor>;

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

// ---------------------------------------------------------------- add / sub

at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  checkAddSub("add", self, other, alpha);
  return runFunctional("add", {self, other}, resultOf(Promotion::kCommonDtype),
                       [alpha](Tensors& t) { at::add_out(t[0], t[1], t[2], alpha); });
}
at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  checkAddSub("add", self, other, alpha);
  return runInto("add.out", out, {self, other}, [alpha](Tensors& t) { at::add_out(t[0], t[1], t[2], alpha); },
                 elementwiseCheck(Promotion::kCommonDtype, /*inplace=*/false));
}
at::Tensor& add_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  checkAddSub("add", self, other, alpha);
  return runInto("add_", self, {other}, [alpha](Tensors& t) { t[0].add_(t[1], alpha); },
                 elementwiseCheck(Promotion::kCommonDtype, /*inplace=*/true));
}

at::Tensor sub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  checkAddSub("sub", self, other, alpha);
  return runFunctional("sub", {self, other}, resultOf(Promotion::kCommonDtype),
                       [alpha](Tensors& t) { at::sub_out(t[0], t[1], t[2], alpha); });
}
at::Tensor& sub_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  checkAddSub("sub", self, other, alpha);
  return runInto("sub.out", out, {self, other}, [alpha](Tensors& t) { at::sub_out(t[0], t[1], t[2], alpha); },
                 elementwiseCheck(Promotion::kCommonDtype, /*inplace=*/false));
}
at::Tensor& sub_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  checkAddSub("sub", self, other, alpha);
  return runInto("sub_", self, {other}, [alpha](Tensors& t) { t[0].sub_(t[1], alpha); },
                 elementwiseCheck(Promotion::kCommonDtype, /*inplace=*/true));
}

// ---------------------------------------------------------------- mul / div

at::Tensor mul(const at::Tensor& self, const at::Tensor& other) {
  return runFunctional("mul", {self, other}, resultOf(Promotion::kCommonDtype),
                       [](Tensors& t) { at::mul_out(t[0], t[1], t[2]); });
}
at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return runInto("mul.out", out, {self, other}, [](Tensors& t) { at::mul_out(t[0], t[1], t[2]); },
                 elementwiseCheck(Promotion::kCommonDtype, /*inplace=*/false));
}
at::Tensor& mul_(at::Tensor& self, const at::Tensor& other) {
  return runInto("mul_", self, {other}, [](Tensors& t) { t[0].mul_(t[1]); },
                 elementwiseCheck(Promotion::kCommonDtype, /*inplace=*/true));
}

at::Tensor div(const at::Tensor& self, const at::Tensor& other) {
  return runFunctional("div", {self, other}, resultOf(Promotion::kIntegerToFloat),
                       [](Tensors& t) { at::div_out(t[0], t[1], t[2]); });
}
at::Tensor& div_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return runInto("div.out", out, {self, other}, [](Tensors& t) { at::div_out(t[0], t[1], t[2]); },
                 elementwiseCheck(Promotion::kIntegerToFloat, /*inplace=*/false));
}
at::Tensor& div_(at::Tensor& self, const at::Tensor& other) {
  return runInto("div_", self, {other}, [](Tensors& t) { t[0].div_(t[1]); },
                 elementwiseCheck(Promotion::kIntegerToFloat, /*inplace=*/true));
}

// ---------------------------------------------------------------- neg / exp

at::Tensor neg(const at::Tensor& self) {
  checkNeg(self);
  return runFunctional("neg", {self}, resultOf(Promotion::kSameDtype),
                       [](Tensors& t) { at::neg_out(t[0], t[1]); });
}
at::Tensor& neg_out(const at::Tensor& self, at::Tensor& out) {
  checkNeg(self);
  return runInto("neg.out", out, {self}, [](Tensors& t) { at::neg_out(t[0], t[1]); },
                 elementwiseCheck(Promotion::kSameDtype, /*inplace=*/false));
}
at::Tensor& neg_(at::Tensor& self) {
  checkNeg(self);
  return runInto("neg_", self, {}, [](Tensors& t) { t[0].neg_(); },
                 elementwiseCheck(Promotion::kSameDtype, /*inplace=*/true));
}

at::Tensor exp(const at::Tensor& self) {
  return runFunctional("exp", {self}, resultOf(Promotion::kIntegerToFloat),
                       [](Tensors& t) { at::exp_out(t[0], t[1]); });
}
at::Tensor& exp_out(const at::Tensor& self, at::Tensor& out) {
  return runInto("exp.out", out, {self}, [](Tensors& t) { at::exp_out(t[0], t[1]); },
                 elementwiseCheck(Promotion::kIntegerToFloat, /*inplace=*/false));
}
at::Tensor& exp_(at::Tensor& self) {
  return runInto("exp_", self, {}, [](Tensors& t) { t[0].exp_(); },
                 elementwiseCheck(Promotion::kIntegerToFloat, /*inplace=*/true));
}

// ---------------------------------------------------------------- fill_ / zero_

// fill_ and zero_ write every element of self whatever its layout: nothing to check on meta tensors.
void noCheck(Tensors& /*metas*/) {}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  // An unrepresentable value (e.g. 300 into uint8) must raise here, not on the
  // worker: a 0-dim CPU fill performs ATen's range check.
  at::empty({}, at::TensorOptions().dtype(self.scalar_type())).fill_(value);
  return runInto("fill_", self, {}, [value](Tensors& t) { t[0].fill_(value); }, noCheck);
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports a 0-dimension value tensor, got one with ", value.dim(),
              " dimensions; pass a scalar or a 0-dim tensor");
  // The value may be a simdev tensor written by queued work: it is read on
  // the worker, in stream order.
  return runInto("fill_", self, {value}, [](Tensors& t) { t[0].fill_(t[1]); }, noCheck);
}

at::Tensor& zero_(at::Tensor& self) {
  return runInto("zero_", self, {}, [](Tensors& t) { t[0].zero_(); }, noCheck);
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
