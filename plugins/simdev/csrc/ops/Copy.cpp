// Copies to, from and between simdev devices (Tensor.copy_, .to(), .cpu()).
//
// Which stream: host-to-device and device-to-device on the destination
// device's current stream, device-to-host on the source device's current
// stream. Across two devices the copy runs on the destination's stream, after
// the work already queued on the source's stream (an event wait), and the
// source's stream waits for the copy in turn, so both sides stay ordered.
//
// How: a dense same-dtype same-layout copy between different storages is one
// sdMemcpyAsync; anything else (dtype conversion, broadcasting, non-contiguous
// views, conj/neg views, overlapping storages) is host work running ATen's
// CPU copy_ on aliases of the two sides.
//
// non_blocking=False waits for a copy to or from the host (a device-to-host
// copy is complete on return); non_blocking=True returns at once. A copy
// between simdev tensors never makes the host wait, as on CUDA: it is ordered
// on the streams only, so a consumer on another stream still needs an event
// (a host wait here would hide exactly that bug); under graph capture it is
// recorded like any work. Copies to or from the host synchronize, and so fail
// under capture with the runtime's message. The queued copy keeps both
// sides' storages alive, but, as with CUDA pinned memory, the host tensor
// must not be written (H2D) or read (D2H) until the stream has reached the
// copy (synchronize the stream or an event).
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <torch/library.h>

#include <memory>

#include "GilReleased.h"
#include "SimdevCheck.h"
#include "SimdevStream.h"
#include "ops/HostWork.h"
#include "ops/StorageResize.h"

namespace torch_simdev {
namespace {

bool isSimdev(const at::Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

// A plain byte copy suffices: same dtype and layout, dense, no lazy conj/neg,
// and distinct storages (an overlapping copy needs ATen's overlap checks).
bool isByteCopy(const at::Tensor& src, const at::Tensor& dst) {
  return src.scalar_type() == dst.scalar_type() && src.sizes() == dst.sizes() &&
         src.strides() == dst.strides() && src.is_non_overlapping_and_dense() && !src.is_conj() &&
         !dst.is_conj() && !src.is_neg() && !dst.is_neg() && !src.is_alias_of(dst);
}

sdMemcpyKind kindOf(const at::Tensor& src, const at::Tensor& dst) {
  if (isSimdev(src)) return isSimdev(dst) ? sdMemcpyDeviceToDevice : sdMemcpyDeviceToHost;
  return sdMemcpyHostToDevice;
}

// Queues the copy src -> dst on `stream` (no waiting).
void enqueueCopy(const at::Tensor& src, const at::Tensor& dst, sdStream_t stream) {
  if (isByteCopy(src, dst)) {
    SIMDEV_CHECK(sdMemcpyAsync(dst.mutable_data_ptr(), src.const_data_ptr(), dst.nbytes(),
                               kindOf(src, dst), stream));
    // The memcpy reads/writes these storages when the stream reaches it;
    // this (empty) work, queued right behind it, holds them until then.
    enqueueHostWork(stream, "copy_ (keep operands alive)",
                    [src_storage = src.storage(), dst_storage = dst.storage()] {});
    return;
  }
  Operands operands{Operand::output(dst), Operand::of(src)};
  enqueueHostWork(stream, "copy_", [operands = std::move(operands)] {
    at::Tensor dst_alias = operands[0].materialize();
    dst_alias.copy_(operands[1].materialize());
  });
}

// A one-shot event recorded on `stream`. Destroying it right after use is
// fine: waits queued on it keep what they need (runtime.h, Event.cpp).
struct ScopedEvent {
  sdEvent_t event = nullptr;
  explicit ScopedEvent(sdStream_t stream) {
    SIMDEV_CHECK(sdEventCreate(&event, sdEventDisableTiming));
    const sdError_t status = sdEventRecord(event, stream);
    if (status != sdSuccess) {
      const std::string message = describeRuntimeError("sdEventRecord", status);
      (void)sdEventDestroy(event);
      TORCH_CHECK(false, message);
    }
  }
  ~ScopedEvent() { (void)sdEventDestroy(event); }
  ScopedEvent(const ScopedEvent&) = delete;
  ScopedEvent& operator=(const ScopedEvent&) = delete;
};

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  const at::Tensor& src = self;
  for (const at::Tensor* t : {&src, &dst}) {
    TORCH_CHECK(isSimdev(*t) || t->is_cpu(), "copy_: simdev copies to and from CPU or simdev tensors only, got a ",
                t->device(), " tensor; copy through the CPU (.cpu()) first");
  }
  TORCH_CHECK(at::is_expandable_to(src.sizes(), dst.sizes()), "copy_: the source of shape ",
              src.sizes(), " does not broadcast to the destination's shape ", dst.sizes(),
              "; reshape or expand the source to match");
  if (dst.numel() == 0) return dst;

  if (isSimdev(src) && isSimdev(dst) && src.device() != dst.device()) {
    const sdStream_t src_stream = currentNativeStream(src.device().index());
    const sdStream_t dst_stream = currentNativeStream(dst.device().index());
    {
      ScopedEvent src_ready(src_stream);
      SIMDEV_CHECK(sdStreamWaitEvent(dst_stream, src_ready.event));
    }
    enqueueCopy(src, dst, dst_stream);
    {
      ScopedEvent copied(dst_stream);
      SIMDEV_CHECK(sdStreamWaitEvent(src_stream, copied.event));
    }
    return dst;
  }

  const c10::DeviceIndex device = isSimdev(dst) ? dst.device().index() : src.device().index();
  const sdStream_t stream = currentNativeStream(device);
  enqueueCopy(src, dst, stream);
  if (!non_blocking && !(isSimdev(src) && isSimdev(dst))) {
    GilReleasedIfHeld no_gil;  // the stream's work may need it (GilReleased.h)
    SIMDEV_CHECK(sdStreamSynchronize(stream));
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) {
    if (isSimdev(dst)) {
      resizeTensor(dst, self.sizes(), std::nullopt);
    } else {
      dst.resize_(self.sizes());
    }
  }
  return copy_from(self, dst, /*non_blocking=*/false);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
}

// copy_from handles conjugate and negative views itself (the host-work path
// carries the bits into the aliases, and ATen's CPU copy_ resolves them).
// Without these fallthroughs the Conjugate/Negative fallbacks would
// materialize the source with clone(), which copies, which calls _copy_from
// again: endless recursion. (Only backends that implement _copy_from, such as
// PrivateUse1 ones, reach these keys for _copy_from.)
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace torch_simdev
