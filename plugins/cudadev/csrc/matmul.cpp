// Matrix products registered directly for cudadev: mm, addmm, bmm, baddbmm
// (functional, out= and, for addmm/baddbmm, in-place), which torch.compile's
// generated code calls on every step (extern_kernels.mm(a, b, out=buf), ...).
//
// They run the same cuBLAS path as torch.cuda, through ATen's CUDA kernels
// (at::cuda::mm_out, ...) on CUDA aliases of the cudadev tensors, with the
// current CUDA stream set to the current cudadev stream. Unlike the boxed
// fallback (fallback.cpp) they box nothing, look nothing up per argument, and
// make their aliases with DirectAliases: the host cost per call is close to
// torch.cuda's own.
//
// Results: CUDA's structured kernels give a functional result a contiguous
// tensor of the shape below and the dtype of one input; cudadev allocates
// that tensor itself (cudadev's allocator, on the current cudadev stream) and
// runs the out= kernel into it, which is what the functional CUDA kernel does
// into its own allocation. Calls the fast path cannot take (inputs of the
// wrong rank, whose error CUDA's kernel raises; an out= tensor that must be
// resized) run the CUDA kernel through an AliasScope, as the fallback would.

#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/addmm_cuda_dispatch.h>
#include <ATen/ops/baddbmm_cuda_dispatch.h>
#include <ATen/ops/bmm_cuda_dispatch.h>
#include <ATen/ops/mm_cuda_dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <array>

#include "allocator.h"
#include "argument_devices.h"
#include "cuda_alias.h"

namespace cudadev {
namespace {

// The result's shape when both factors have the rank the operator needs:
// [n, k] x [k', m] -> [n, m], or [b, n, k] x [b', k', m] -> [b, n, m]
// (CUDA's shape checks still run in the kernel, against this shape). False
// otherwise: the kernel reports that error itself.
template <size_t Rank>
bool product_shape(const at::Tensor& left, const at::Tensor& right,
                   std::array<int64_t, Rank>& shape) {
  if (left.dim() != static_cast<int64_t>(Rank) || right.dim() != static_cast<int64_t>(Rank)) {
    return false;
  }
  for (size_t i = 0; i + 1 < Rank; ++i) {
    shape[i] = left.sizes()[i];
  }
  shape[Rank - 1] = right.sizes()[Rank - 1];
  return true;
}

// A contiguous cudadev tensor from cudadev's allocator, on the current device
// (the operator's, set by the stream guard) and its current cudadev stream.
at::Tensor empty_result(c10::IntArrayRef shape, c10::ScalarType dtype) {
  return at::detail::empty_generic(shape, &allocator(),
                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype,
                                   c10::MemoryFormat::Contiguous);
}

// The slow paths: the CUDA kernel on AliasScope aliases, whose storages grow
// through cudadev's allocator and whose results map back to cudadev tensors.
template <typename Kernel>
at::Tensor functional_through_scope(c10::DeviceIndex idx, Kernel&& kernel) {
  AliasScope scope(idx);
  const at::Tensor result = kernel(scope);
  scope.write_back();
  return scope.to_cudadev(result);
}

template <typename Kernel>
void out_through_scope(c10::DeviceIndex idx, const at::Tensor& out, Kernel&& kernel) {
  AliasScope scope(idx);
  at::Tensor out_alias = scope.to_cuda(out);
  kernel(scope, out_alias);
  scope.write_back();
}

// ------------------------------------------------------------------- mm

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  const c10::DeviceIndex idx = common_cudadev_device("aten::mm", {{"self", &self}, {"mat2", &mat2}});
  c10::cuda::CUDAStreamGuard on_cudadev_stream(current_stream_as_cuda(idx));
  std::array<int64_t, 2> shape{};
  if (C10_UNLIKELY(!product_shape(self, mat2, shape))) {
    return functional_through_scope(
        idx, [&](AliasScope& s) { return at::cuda::mm(s.to_cuda(self), s.to_cuda(mat2)); });
  }
  at::Tensor out = empty_result(shape, self.scalar_type());
  DirectAliases aliases(idx);
  at::Tensor out_alias = aliases.to_cuda(out);
  at::cuda::mm_out(out_alias, aliases.to_cuda(self), aliases.to_cuda(mat2));
  return out;
}

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  const c10::DeviceIndex idx = common_cudadev_device(
      "aten::mm.out", {{"self", &self}, {"mat2", &mat2}, {"out", &out}});
  c10::cuda::CUDAStreamGuard on_cudadev_stream(current_stream_as_cuda(idx));
  std::array<int64_t, 2> shape{};
  if (C10_LIKELY(product_shape(self, mat2, shape) && out.sizes().equals(shape))) {
    DirectAliases aliases(idx);
    at::Tensor out_alias = aliases.to_cuda(out);
    at::cuda::mm_out(out_alias, aliases.to_cuda(self), aliases.to_cuda(mat2));
  } else {
    out_through_scope(idx, out, [&](AliasScope& s, at::Tensor& o) {
      at::cuda::mm_out(o, s.to_cuda(self), s.to_cuda(mat2));
    });
  }
  return out;
}

// ---------------------------------------------------------------- addmm

at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                 const c10::Scalar& beta, const c10::Scalar& alpha) {
  const c10::DeviceIndex idx = common_cudadev_device(
      "aten::addmm", {{"self", &self}, {"mat1", &mat1}, {"mat2", &mat2}});
  c10::cuda::CUDAStreamGuard on_cudadev_stream(current_stream_as_cuda(idx));
  std::array<int64_t, 2> shape{};
  if (C10_UNLIKELY(!product_shape(mat1, mat2, shape))) {
    return functional_through_scope(idx, [&](AliasScope& s) {
      return at::cuda::addmm(s.to_cuda(self), s.to_cuda(mat1), s.to_cuda(mat2), beta, alpha);
    });
  }
  at::Tensor out = empty_result(shape, mat1.scalar_type());
  DirectAliases aliases(idx);
  at::Tensor out_alias = aliases.to_cuda(out);
  at::cuda::addmm_out(out_alias, aliases.to_cuda(self), aliases.to_cuda(mat1),
                      aliases.to_cuda(mat2), beta, alpha);
  return out;
}

at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                      const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  const c10::DeviceIndex idx = common_cudadev_device(
      "aten::addmm.out", {{"self", &self}, {"mat1", &mat1}, {"mat2", &mat2}, {"out", &out}});
  c10::cuda::CUDAStreamGuard on_cudadev_stream(current_stream_as_cuda(idx));
  std::array<int64_t, 2> shape{};
  if (C10_LIKELY(product_shape(mat1, mat2, shape) && out.sizes().equals(shape))) {
    DirectAliases aliases(idx);
    at::Tensor out_alias = aliases.to_cuda(out);
    at::cuda::addmm_out(out_alias, aliases.to_cuda(self), aliases.to_cuda(mat1),
                        aliases.to_cuda(mat2), beta, alpha);
  } else {
    out_through_scope(idx, out, [&](AliasScope& s, at::Tensor& o) {
      at::cuda::addmm_out(o, s.to_cuda(self), s.to_cuda(mat1), s.to_cuda(mat2), beta, alpha);
    });
  }
  return out;
}

// In place: CUDA's kernel checks that self has the result's shape and never
// resizes it, so the aliases need no write-back.
at::Tensor& addmm_(at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                   const c10::Scalar& beta, const c10::Scalar& alpha) {
  const c10::DeviceIndex idx = common_cudadev_device(
      "aten::addmm_", {{"self", &self}, {"mat1", &mat1}, {"mat2", &mat2}});
  c10::cuda::CUDAStreamGuard on_cudadev_stream(current_stream_as_cuda(idx));
  DirectAliases aliases(idx);
  at::Tensor self_alias = aliases.to_cuda(self);
  at::cuda::addmm_(self_alias, aliases.to_cuda(mat1), aliases.to_cuda(mat2), beta, alpha);
  return self;
}

// ------------------------------------------------------------------ bmm

// bmm and baddbmm take the result's dtype from their second factor, as CUDA's
// kernels do (a dtype mismatch is the kernel's error to report).
at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  const c10::DeviceIndex idx = common_cudadev_device("aten::bmm", {{"self", &self}, {"mat2", &mat2}});
  c10::cuda::CUDAStreamGuard on_cudadev_stream(current_stream_as_cuda(idx));
  std::array<int64_t, 3> shape{};
  if (C10_UNLIKELY(!product_shape(self, mat2, shape))) {
    return functional_through_scope(
        idx, [&](AliasScope& s) { return at::cuda::bmm(s.to_cuda(self), s.to_cuda(mat2)); });
  }
  at::Tensor out = empty_result(shape, mat2.scalar_type());
  DirectAliases aliases(idx);
  at::Tensor out_alias = aliases.to_cuda(out);
  at::cuda::bmm_out(out_alias, aliases.to_cuda(self), aliases.to_cuda(mat2));
  return out;
}

at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  const c10::DeviceIndex idx = common_cudadev_device(
      "aten::bmm.out", {{"self", &self}, {"mat2", &mat2}, {"out", &out}});
  c10::cuda::CUDAStreamGuard on_cudadev_stream(current_stream_as_cuda(idx));
  std::array<int64_t, 3> shape{};
  if (C10_LIKELY(product_shape(self, mat2, shape) && out.sizes().equals(shape))) {
    DirectAliases aliases(idx);
    at::Tensor out_alias = aliases.to_cuda(out);
    at::cuda::bmm_out(out_alias, aliases.to_cuda(self), aliases.to_cuda(mat2));
  } else {
    out_through_scope(idx, out, [&](AliasScope& s, at::Tensor& o) {
      at::cuda::bmm_out(o, s.to_cuda(self), s.to_cuda(mat2));
    });
  }
  return out;
}

// -------------------------------------------------------------- baddbmm

at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                   const c10::Scalar& beta, const c10::Scalar& alpha) {
  const c10::DeviceIndex idx = common_cudadev_device(
      "aten::baddbmm", {{"self", &self}, {"batch1", &batch1}, {"batch2", &batch2}});
  c10::cuda::CUDAStreamGuard on_cudadev_stream(current_stream_as_cuda(idx));
  std::array<int64_t, 3> shape{};
  if (C10_UNLIKELY(!product_shape(batch1, batch2, shape))) {
    return functional_through_scope(idx, [&](AliasScope& s) {
      return at::cuda::baddbmm(s.to_cuda(self), s.to_cuda(batch1), s.to_cuda(batch2), beta, alpha);
    });
  }
  at::Tensor out = empty_result(shape, batch2.scalar_type());
  DirectAliases aliases(idx);
  at::Tensor out_alias = aliases.to_cuda(out);
  at::cuda::baddbmm_out(out_alias, aliases.to_cuda(self), aliases.to_cuda(batch1),
                        aliases.to_cuda(batch2), beta, alpha);
  return out;
}

at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                        const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  const c10::DeviceIndex idx = common_cudadev_device(
      "aten::baddbmm.out",
      {{"self", &self}, {"batch1", &batch1}, {"batch2", &batch2}, {"out", &out}});
  c10::cuda::CUDAStreamGuard on_cudadev_stream(current_stream_as_cuda(idx));
  std::array<int64_t, 3> shape{};
  if (C10_LIKELY(product_shape(batch1, batch2, shape) && out.sizes().equals(shape))) {
    DirectAliases aliases(idx);
    at::Tensor out_alias = aliases.to_cuda(out);
    at::cuda::baddbmm_out(out_alias, aliases.to_cuda(self), aliases.to_cuda(batch1),
                          aliases.to_cuda(batch2), beta, alpha);
  } else {
    out_through_scope(idx, out, [&](AliasScope& s, at::Tensor& o) {
      at::cuda::baddbmm_out(o, s.to_cuda(self), s.to_cuda(batch1), s.to_cuda(batch2), beta, alpha);
    });
  }
  return out;
}

at::Tensor& baddbmm_(at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                     const c10::Scalar& beta, const c10::Scalar& alpha) {
  const c10::DeviceIndex idx = common_cudadev_device(
      "aten::baddbmm_", {{"self", &self}, {"batch1", &batch1}, {"batch2", &batch2}});
  c10::cuda::CUDAStreamGuard on_cudadev_stream(current_stream_as_cuda(idx));
  DirectAliases aliases(idx);
  at::Tensor self_alias = aliases.to_cuda(self);
  at::cuda::baddbmm_(self_alias, aliases.to_cuda(batch1), aliases.to_cuda(batch2), beta, alpha);
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm", TORCH_FN(mm));
  m.impl("mm.out", TORCH_FN(mm_out));
  m.impl("addmm", TORCH_FN(addmm));
  m.impl("addmm.out", TORCH_FN(addmm_out));
  m.impl("addmm_", TORCH_FN(addmm_));
  m.impl("bmm", TORCH_FN(bmm));
  m.impl("bmm.out", TORCH_FN(bmm_out));
  m.impl("baddbmm", TORCH_FN(baddbmm));
  m.impl("baddbmm.out", TORCH_FN(baddbmm_out));
  m.impl("baddbmm_", TORCH_FN(baddbmm_));
}

}  // namespace cudadev
