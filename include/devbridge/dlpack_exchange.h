// devbridge's DLPack C exchange table (DLPack 1.3 DLPackExchangeAPI) and the
// C++ conversions behind it.
//
// The table serves every torch.Tensor device: CPU and other built-in devices
// exactly as PyTorch's own table does, plus the PrivateUse1 plugin's live
// current stream for kDLExtDev. current_work_stream for CUDA/ROCm/XPU is
// delegated to the table PyTorch installed (see SetDelegateExchangeAPI).
//
// Ownership rule of managed_tensor_to_py_object_no_sync: on success the
// managed tensor is consumed (its deleter runs when the torch tensor dies);
// on failure it is NOT consumed and the caller still owns it (calls its
// deleter). This is what PyTorch's own table does and what tvm-ffi, the main
// consumer, relies on: it calls the deleter itself when the import fails.
#pragma once

#include <ATen/Tensor.h>
#include <ATen/dlpack.h>

namespace devbridge {

// The table: static, valid for the whole process.
const DLPackExchangeAPI* ExchangeAPI() noexcept;

// The table whose current_work_stream answers for device types devbridge does
// not own (CUDA, ROCm, XPU, ...): PyTorch's original table, captured before
// devbridge replaced it. NULL means "none": those queries then go through the
// c10 runtime (or report NULL where c10 has no such device). Throws
// devbridge::Error for devbridge's own table (that would recurse) or a table
// of another DLPack major version.
void SetDelegateExchangeAPI(const DLPackExchangeAPI* api);
const DLPackExchangeAPI* DelegateExchangeAPI() noexcept;

// C++ face of the conversions (used by the table and by launch code).
// The DLPack device of a torch device: PrivateUse1 -> kDLExtDev (or 21 when
// Options::export_ascend_device_type), others as PyTorch maps them.
DLDevice ToDLDevice(c10::Device device);
// Owning export, like at::toDLPackVersioned: the result keeps `tensor` alive
// until its deleter runs (on any thread, without the GIL). Throws
// devbridge::Error(kBuffer) for conjugate/negative-bit views and non-strided
// layouts, which DLPack cannot describe.
DLManagedTensorVersioned* ExportOwning(const at::Tensor& tensor);
// The same for DLPack's legacy (pre-1.0, unversioned) struct, which Python's
// `__dlpack__()` hands to consumers that pass no max_version.
DLManagedTensor* ExportOwningLegacy(const at::Tensor& tensor);
// Non-owning export into `out`: shape/strides point into the tensor's own
// metadata and stay valid while the tensor is alive and unmodified.
void ExportNonOwning(const at::Tensor& tensor, DLTensor* out);
// A torch tensor viewing `managed`'s memory WITHOUT taking ownership (the
// caller keeps the deleter). Validates everything DLPack allows to be wrong.
at::Tensor ImportBorrowing(const DLManagedTensorVersioned& managed);
// Makes `tensor` (from ImportBorrowing(*managed)) own `managed`: its deleter
// runs exactly once, when the tensor's storage dies. Never throws.
void AdoptManagedTensor(const at::Tensor& tensor, DLManagedTensorVersioned* managed) noexcept;

}  // namespace devbridge
