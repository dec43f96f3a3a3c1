// Copies into, out of and between cudadev tensors (aten::_copy_from, which
// Tensor.copy_ and Tensor.to reach whenever a cudadev tensor is involved), and
// reading one element (aten::_local_scalar_dense, behind Tensor.item()).
//
// Every direction is stream-ordered on the current cudadev stream of the
// cudadev side:
//  * CPU -> cudadev, cudadev -> CPU: cudaMemcpyAsync on that stream; the host
//    waits for it unless non_blocking and the host memory is pinned (with
//    pageable memory CUDA itself makes the copy synchronous);
//  * cudadev -> cudadev: where the bytes are the values on both sides, one
//    cudaMemcpyAsync on the current cudadev stream; otherwise torch's CUDA copy
//    kernel with the current CUDA stream of each device set to its current
//    cudadev stream; across two devices that kernel orders both streams
//    against each other;
//  * cudadev <-> torch.cuda: the copy runs on the cudadev stream after it has
//    waited for the torch.cuda tensor's current CUDA stream, and that stream
//    then waits for the copy, so work queued later on either side is ordered
//    after it.

#include <ATen/core/CachingHostAllocator.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cuda_runtime_api.h>

#include "cuda_alias.h"
#include "cuda_check.h"
#include "device.h"
#include "streams.h"

namespace cudadev {
namespace {

constexpr auto kCudadev = c10::DeviceType::PrivateUse1;

bool is_cudadev(const at::Tensor& t) { return t.device().type() == kCudadev; }

// True when a raw copy of t's bytes is its values in row-major order.
bool is_plain_dense(const at::Tensor& t) {
  return t.is_contiguous() && !t.is_conj() && !t.is_neg();
}

// Keeps a pinned host block from being reused before the copy on `stream`
// has finished with it (for blocks of torch's CUDA pinned-memory allocator;
// other pinned memory is the caller's to keep alive, as with torch.cuda).
void protect_pinned_block(const at::Tensor& host, c10::DeviceIndex idx, cudaStream_t stream) {
  const c10::DataPtr& data = host.storage().data_ptr();
  at::getHostAllocator(c10::DeviceType::CUDA)
      ->record_event(data.get(), data.get_context(),
                     c10::cuda::getStreamFromExternal(stream, idx).unwrap());
}

// Whether the byte ranges of two tensors' elements intersect.
bool bytes_overlap(const at::Tensor& a, const at::Tensor& b) {
  const auto* a_begin = static_cast<const char*>(a.const_data_ptr());
  const auto* b_begin = static_cast<const char*>(b.const_data_ptr());
  return a_begin < b_begin + b.nbytes() && b_begin < a_begin + a.nbytes();
}

// cudadev -> cudadev on one device where the bytes are the values on both
// sides (same dtype and shape, both contiguous, no conj/neg bits, apart in
// memory): one cudaMemcpyAsync on the current cudadev stream, which is what
// torch's CUDA copy kernel would end in, without two CUDA aliases and a
// second dispatch. The hot path of reduce-overhead's input copies.
bool copy_bytes_on_device(const at::Tensor& src, const at::Tensor& dst) {
  if (src.scalar_type() != dst.scalar_type() || !src.sizes().equals(dst.sizes()) || !is_plain_dense(src) ||
      !is_plain_dense(dst) || bytes_overlap(src, dst)) {
    return false;
  }
  const c10::DeviceIndex idx = dst.device().index();
  ScopedDevice on(idx);
  CUDADEV_CHECK(cudaMemcpyAsync(dst.mutable_data_ptr(), src.const_data_ptr(), dst.nbytes(),
                                cudaMemcpyDeviceToDevice, current_native_stream(idx)));
  return true;
}

// cudadev -> cudadev on one device, or `src` -> `dst` where both are already
// CUDA aliases: torch's CUDA copy kernel on the current (cudadev) stream.
void copy_on_device(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  const c10::DeviceIndex idx = dst.device().index();
  c10::cuda::CUDAStreamGuard on_cudadev_stream(current_stream_as_cuda(idx));
  AliasScope scope(idx);
  at::Tensor dst_alias = scope.to_cuda(dst);
  dst_alias.copy_(scope.to_cuda(src), non_blocking);
  scope.write_back();
}

void copy_between_devices(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  const c10::DeviceIndex src_idx = src.device().index();
  const c10::DeviceIndex dst_idx = dst.device().index();
  const c10::cuda::CUDAStream streams[] = {current_stream_as_cuda(src_idx),
                                           current_stream_as_cuda(dst_idx)};
  // Sets each device's current CUDA stream without changing the current
  // device; CUDA's cross-device copy then makes the two streams wait for each
  // other around the copy.
  c10::cuda::CUDAMultiStreamGuard on_cudadev_streams(streams);
  AliasScope src_scope(src_idx);
  AliasScope dst_scope(dst_idx);
  at::Tensor dst_alias = dst_scope.to_cuda(dst);
  dst_alias.copy_(src_scope.to_cuda(src), non_blocking);
  dst_scope.write_back();
}

void copy_from_host(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  const c10::DeviceIndex idx = dst.device().index();
  ScopedDevice on(idx);
  const cudaStream_t stream = current_native_stream(idx);

  // Host side: the values dst must hold, dense in dst's shape and dtype.
  at::Tensor host = src.resolve_conj().resolve_neg();
  if (host.scalar_type() != dst.scalar_type()) {
    host = host.to(dst.scalar_type());
  }
  host = host.expand(dst.sizes()).contiguous();

  const bool direct = is_plain_dense(dst);
  const at::Tensor target =
      direct ? dst : at::empty(dst.sizes(), dst.options().memory_format(c10::MemoryFormat::Contiguous));
  const size_t nbytes = host.nbytes();
  const bool pinned = is_pinned_host_pointer(host.const_data_ptr());
  if (nbytes > 0) {
    CUDADEV_CHECK(cudaMemcpyAsync(target.mutable_data_ptr(), host.const_data_ptr(), nbytes,
                                  cudaMemcpyHostToDevice, stream));
    if (pinned && non_blocking) {
      protect_pinned_block(host, idx, stream);
    }
  }
  if (!direct) {
    copy_on_device(target, dst, /*non_blocking=*/true);
  }
  if (!non_blocking) {
    CUDADEV_CHECK(cudaStreamSynchronize(stream));
  }
}

void copy_to_host(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  const c10::DeviceIndex idx = src.device().index();
  ScopedDevice on(idx);
  const cudaStream_t stream = current_native_stream(idx);
  c10::cuda::CUDAStreamGuard on_cudadev_stream(current_stream_as_cuda(idx));
  AliasScope scope(idx);

  // Device side: the values dst must hold, dense in dst's shape and dtype,
  // prepared by CUDA kernels on the cudadev stream (conversion on the GPU is
  // cheaper than on the host).
  at::Tensor device_values = scope.to_cuda(src).resolve_conj().resolve_neg();
  if (device_values.scalar_type() != dst.scalar_type()) {
    device_values = device_values.to(dst.scalar_type());
  }
  device_values = device_values.expand(dst.sizes()).contiguous();

  const bool direct = is_plain_dense(dst);
  const at::Tensor target =
      direct ? dst : at::empty(dst.sizes(), dst.options().memory_format(c10::MemoryFormat::Contiguous));
  const size_t nbytes = device_values.nbytes();
  const bool async = direct && non_blocking && is_pinned_host_pointer(target.const_data_ptr());
  if (nbytes > 0) {
    CUDADEV_CHECK(cudaMemcpyAsync(target.mutable_data_ptr(), device_values.const_data_ptr(),
                                  nbytes, cudaMemcpyDeviceToHost, stream));
    if (async) {
      protect_pinned_block(target, idx, stream);
    }
  }
  if (!async) {
    CUDADEV_CHECK(cudaStreamSynchronize(stream));
  }
  if (!direct) {
    dst.copy_(target);  // host to host: geometry, conj/neg bits of dst
  }
}

void copy_with_torch_cuda(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  const bool src_is_cudadev = is_cudadev(src);
  const at::Tensor& cudadev_side = src_is_cudadev ? src : dst;
  const at::Tensor& cuda_side = src_is_cudadev ? dst : src;
  const c10::DeviceIndex idx = cudadev_side.device().index();
  const c10::DeviceIndex cuda_idx = cuda_side.device().index();
  const c10::cuda::CUDAStream cudadev_stream = current_stream_as_cuda(idx);

  AliasScope scope(idx);
  const at::Tensor cudadev_alias = scope.to_cuda(cudadev_side);
  const at::Tensor& from = src_is_cudadev ? cudadev_alias : cuda_side;
  const at::Tensor& to = src_is_cudadev ? cuda_side : cudadev_alias;

  if (idx == cuda_idx) {
    const c10::cuda::CUDAStream torch_cuda_stream = c10::cuda::getCurrentCUDAStream(cuda_idx);
    c10::cuda::CUDAStreamGuard on_cudadev_stream(cudadev_stream);
    // Before: the copy waits for torch.cuda's work on either tensor so far.
    stream_wait_stream(cudadev_stream.stream(), torch_cuda_stream.stream());
    to.copy_(from, non_blocking);
    // After: torch.cuda's later work (reading dst, or overwriting src) waits
    // for the copy.
    stream_wait_stream(torch_cuda_stream.stream(), cudadev_stream.stream());
  } else {
    // Different GPUs: the cudadev device's current CUDA stream becomes the
    // cudadev stream; torch's cross-device copy orders it against the other
    // device's current stream in both directions.
    const c10::cuda::CUDAStream streams[] = {cudadev_stream};
    c10::cuda::CUDAMultiStreamGuard on_cudadev_stream(streams);
    to.copy_(from, non_blocking);
  }
  scope.write_back();
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  // aten::_copy_from(self, dst): self is the source.
  const at::Tensor& src = self;
  TORCH_CHECK(src.defined() && dst.defined(), "cudadev: copy needs defined tensors");
  if (dst.numel() == 0 || src.is_same(dst)) {
    return dst;
  }
  const c10::DeviceType src_type = src.device().type();
  const c10::DeviceType dst_type = dst.device().type();
  if (src_type == kCudadev && dst_type == kCudadev) {
    if (src.device().index() == dst.device().index()) {
      if (!copy_bytes_on_device(src, dst)) {
        copy_on_device(src, dst, non_blocking);
      }
    } else {
      copy_between_devices(src, dst, non_blocking);
    }
  } else if (src_type == c10::DeviceType::CPU && dst_type == kCudadev) {
    copy_from_host(src, dst, non_blocking);
  } else if (src_type == kCudadev && dst_type == c10::DeviceType::CPU) {
    copy_to_host(src, dst, non_blocking);
  } else if ((src_type == kCudadev && dst_type == c10::DeviceType::CUDA) ||
             (src_type == c10::DeviceType::CUDA && dst_type == kCudadev)) {
    copy_with_torch_cuda(src, dst, non_blocking);
  } else {
    TORCH_CHECK(false, "cudadev: cannot copy from ", src.device(), " to ", dst.device(),
                "; cudadev copies to and from cpu, cuda and cudadev tensors. Copy through the "
                "CPU instead: t.cpu().to(...).");
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (!dst.sizes().equals(self.sizes())) {
    dst.resize_(self.sizes());
  }
  return copy_from(self, dst, /*non_blocking=*/false);
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  // One element to the host (a synchronous copy on the current cudadev
  // stream), then ATen's CPU implementation reads it.
  return at::native::_local_scalar_dense_cpu(self.to(c10::DeviceType::CPU));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
}

// _copy_from handles conjugate and negative views itself (the CUDA aliases
// carry the bits and CUDA's copy kernel resolves them). Without these
// fallthroughs the Conjugate/Negative fallbacks would materialize the source
// with clone(), which copies, which calls _copy_from again: endless recursion.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace cudadev
