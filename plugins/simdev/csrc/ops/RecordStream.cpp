// Tensor.record_stream(stream): tells the caching allocator that `stream`
// uses the tensor's memory, so the block is not reused by another stream
// until the work queued on `stream` so far has finished (SimdevAllocator.h).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "SimdevAllocator.h"

namespace torch_simdev {
namespace {

void record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device() == self.device(), "record_stream: the stream is on ", stream.device(),
              " but the tensor is on ", self.device(), "; record a stream of the tensor's own device");
  allocator().recordStream(self.storage().data_ptr(), stream);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("record_stream", TORCH_FN(record_stream)); }

}  // namespace torch_simdev
