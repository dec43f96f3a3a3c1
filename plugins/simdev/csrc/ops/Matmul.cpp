// Matrix products that run as stream-ordered host work (OpRunner.h): mm,
// addmm, bmm and baddbmm, functional, out= and in-place. torch.compile's
// generated code calls them for every matmul (extern_kernels.mm(..., out=)),
// so through the synchronous CPU fallback a compiled step would wait for its
// stream at each one, and a graph capture of it would fail there.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <vector>

#include "ops/OpRunner.h"

namespace torch_simdev {
namespace {

using Tensors = std::vector<at::Tensor>;

// CUDA's matrix products take no CPU tensor beside device tensors.
constexpr CpuScalars kMatmul = CpuScalars::kRefused;

Inputs pair(const char* a, const at::Tensor& x, const char* b, const at::Tensor& y) { return {{a, x}, {b, y}}; }

// ---------------------------------------------------------------- mm / bmm

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  return runFunctional("aten::mm", pair("self", self, "mat2", mat2), kMatmul,
                       [](Tensors& m) { return at::mm(m[0], m[1]); },
                       [](Tensors& t) { at::mm_out(t[0], t[1], t[2]); });
}
at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  return runInto("aten::mm.out", out, "out", pair("self", self, "mat2", mat2), kMatmul,
                 [](Tensors& t) { at::mm_out(t[0], t[1], t[2]); });
}

at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  return runFunctional("aten::bmm", pair("self", self, "mat2", mat2), kMatmul,
                       [](Tensors& m) { return at::bmm(m[0], m[1]); },
                       [](Tensors& t) { at::bmm_out(t[0], t[1], t[2]); });
}
at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  return runInto("aten::bmm.out", out, "out", pair("self", self, "mat2", mat2), kMatmul,
                 [](Tensors& t) { at::bmm_out(t[0], t[1], t[2]); });
}

// ------------------------------------------------------------ addmm / baddbmm

Inputs triple(const at::Tensor& self, const char* a, const at::Tensor& x, const char* b, const at::Tensor& y) {
  return {{"self", self}, {a, x}, {b, y}};
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                 const at::Scalar& alpha) {
  return runFunctional("aten::addmm", triple(self, "mat1", mat1, "mat2", mat2), kMatmul,
                       [&](Tensors& m) { return at::addmm(m[0], m[1], m[2], beta, alpha); },
                       [beta, alpha](Tensors& t) { at::addmm_out(t[0], t[1], t[2], t[3], beta, alpha); });
}
at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                      const at::Scalar& alpha, at::Tensor& out) {
  return runInto("aten::addmm.out", out, "out", triple(self, "mat1", mat1, "mat2", mat2), kMatmul,
                 [beta, alpha](Tensors& t) { at::addmm_out(t[0], t[1], t[2], t[3], beta, alpha); });
}
at::Tensor& addmm_(at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                   const at::Scalar& alpha) {
  return runInto("aten::addmm_", self, "self", pair("mat1", mat1, "mat2", mat2), kMatmul,
                 [beta, alpha](Tensors& t) { t[0].addmm_(t[1], t[2], beta, alpha); });
}

at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const at::Scalar& beta,
                   const at::Scalar& alpha) {
  return runFunctional("aten::baddbmm", triple(self, "batch1", batch1, "batch2", batch2), kMatmul,
                       [&](Tensors& m) { return at::baddbmm(m[0], m[1], m[2], beta, alpha); },
                       [beta, alpha](Tensors& t) { at::baddbmm_out(t[0], t[1], t[2], t[3], beta, alpha); });
}
at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                        const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  return runInto("aten::baddbmm.out", out, "out", triple(self, "batch1", batch1, "batch2", batch2), kMatmul,
                 [beta, alpha](Tensors& t) { at::baddbmm_out(t[0], t[1], t[2], t[3], beta, alpha); });
}
at::Tensor& baddbmm_(at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const at::Scalar& beta,
                     const at::Scalar& alpha) {
  return runInto("aten::baddbmm_", self, "self", pair("batch1", batch1, "batch2", batch2), kMatmul,
                 [beta, alpha](Tensors& t) { t[0].baddbmm_(t[1], t[2], beta, alpha); });
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm", TORCH_FN(mm));
  m.impl("mm.out", TORCH_FN(mm_out));
  m.impl("bmm", TORCH_FN(bmm));
  m.impl("bmm.out", TORCH_FN(bmm_out));
  m.impl("addmm", TORCH_FN(addmm));
  m.impl("addmm.out", TORCH_FN(addmm_out));
  m.impl("addmm_", TORCH_FN(addmm_));
  m.impl("baddbmm", TORCH_FN(baddbmm));
  m.impl("baddbmm.out", TORCH_FN(baddbmm_out));
  m.impl("baddbmm_", TORCH_FN(baddbmm_));
}

}  // namespace torch_simdev
