#include "ops/HostWork.h"

#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/core/DeviceGuard.h>

#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "SimdevCheck.h"
#include "SimdevStream.h"
#include "ops/StorageResize.h"

namespace torch_simdev {
namespace {

struct HostWork {
  const char* what;
  std::function<void()> run;
};

// Hands the failure's cause to the runtime, which puts it into the failure
// its stream reports at the next synchronization (sdSetWorkFailureMessage).
void reportFailure(const HostWork& work, const char* cause) noexcept {
  try {
    (void)sdSetWorkFailureMessage((std::string(work.what) + ": " + cause).c_str());
  } catch (...) {
    (void)sdSetWorkFailureMessage(work.what);  // out of memory formatting it: the operator's name at least
  }
}

// The sdHostFn_t of every piece of host work: runs it and turns any
// exception into a stream failure (never across the C ABI). The runtime owns
// the work (sdLaunchHostFuncWithCleanup): a captured graph runs it again on
// every replay and frees it with the graph.
int runHostWork(void* user_data) {
  HostWork* work = static_cast<HostWork*>(user_data);
  try {
    // The aliases are plain CPU tensors without autograd history.
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    work->run();
    return 0;
  } catch (const c10::Error& e) {
    reportFailure(*work, e.what_without_backtrace());
  } catch (const std::exception& e) {
    reportFailure(*work, e.what());
  } catch (...) {
    reportFailure(*work, "unknown exception");
  }
  return 1;
}

void freeHostWork(void* user_data) { delete static_cast<HostWork*>(user_data); }

}  // namespace

void enqueueHostWork(sdStream_t stream, const char* what, std::function<void()> work) {
  auto* owned = new HostWork{what, std::move(work)};
  const sdError_t status = sdLaunchHostFuncWithCleanup(stream, &runHostWork, owned, &freeHostWork);
  if (status != sdSuccess) {  // the runtime did not take the work
    const std::string message = describeRuntimeError("sdLaunchHostFuncWithCleanup", status);
    delete owned;
    TORCH_CHECK(false, what, ": ", message);
  }
}

Operand Operand::output(const at::Tensor& tensor) {
  if (tensor.device().type() != c10::DeviceType::PrivateUse1) {
    Operand operand;
    operand.host_ = tensor;
    return operand;
  }
  return of(tensor);
}

Operand Operand::of(const at::Tensor& tensor) {
  Operand operand;
  if (tensor.device().type() != c10::DeviceType::PrivateUse1) {
    if (tensor.dim() == 0) {
      operand.host_ = tensor.clone();
      if (tensor.unsafeGetTensorImpl()->is_wrapped_number()) {
        operand.host_.unsafeGetTensorImpl()->set_wrapped_number(true);
      }
    } else {
      operand.host_ = tensor;
    }
    return operand;
  }
  operand.storage_ = tensor.storage();
  operand.data_ = tensor.numel() == 0 ? nullptr : tensor.mutable_data_ptr();
  operand.sizes_ = tensor.sizes().vec();
  operand.strides_ = tensor.strides().vec();
  operand.dtype_ = tensor.scalar_type();
  operand.is_conj_ = tensor.is_conj();
  operand.is_neg_ = tensor.is_neg();
  return operand;
}

at::Tensor Operand::materialize() const {
  if (host_.defined()) return host_;
  at::Tensor alias = at::from_blob(data_, sizes_, strides_, at::TensorOptions().dtype(dtype_));
  if (is_conj_) alias._set_conj(true);
  if (is_neg_) alias._set_neg(true);
  return alias;
}

void launchOnDevice(const char* what, c10::DeviceIndex device, Operands operands,
                    std::function<void(std::vector<at::Tensor>&)> kernel) {
  enqueueHostWork(currentNativeStream(device), what,
                  [operands = std::move(operands), kernel = std::move(kernel)] {
                    std::vector<at::Tensor> tensors;
                    tensors.reserve(operands.size());
                    for (const Operand& operand : operands) tensors.push_back(operand.materialize());
                    kernel(tensors);
                  });
}

at::Tensor toMeta(const at::Tensor& tensor) {
  if (!tensor.defined()) return tensor;
  // A CPU scalar operand stays as it is: meta kernels accept CPU scalars next
  // to meta tensors (as device kernels do), and some meta kernels are Python
  // functions, which insist that wrapped numbers live on the CPU.
  if (tensor.device().is_cpu() && tensor.dim() == 0) return tensor;
  return at::empty_strided(tensor.sizes(), tensor.strides(),
                           at::TensorOptions().dtype(tensor.scalar_type()).device(at::kMeta));
}

at::Tensor emptyLike(const at::Tensor& meta, c10::DeviceIndex device) {
  return at::empty_strided(meta.sizes(), meta.strides(),
                           at::TensorOptions()
                               .dtype(meta.scalar_type())
                               .device(c10::Device(c10::DeviceType::PrivateUse1, device)));
}

void matchLayout(const at::Tensor& out, const at::Tensor& meta_out) {
  if (out.sizes() == meta_out.sizes() && out.strides() == meta_out.strides()) return;
  setSizesAndStrides(out, meta_out.sizes(), meta_out.strides());
}

}  // namespace torch_simdev
