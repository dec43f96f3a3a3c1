/*!
 * \file simdev_add_one.cc
 * \brief A TVM-FFI kernel library for simdev tensors, compiled at test time by
 *  tests/python/test_tvm_ffi_stream.py with `tvm_ffi.cpp.load`.
 *
 * It is what a real vendor kernel looks like from TVM-FFI's side: it never
 * sees torch, only DLTensors, the stream TVM-FFI's environment hands it
 * (`TVMFFIEnvGetStream`) and the device's own C runtime (simdev's, standing in
 * for a vendor runtime such as ACL). That stream comes from the exchange table
 * installed on torch.Tensor: devbridge's reports the plugin's live current
 * stream for kDLExtDev, PyTorch's reports NULL.
 *
 * Exported functions:
 *   current_stream(x) -> int         the env stream for x's device, as an int
 *   env_tensor_allocator(x) -> int   the env's DLPack tensor allocator: TVM-FFI
 *                                    installs the managed_tensor_allocator of the
 *                                    table it used for x, so this names the table
 *   add_one(x, out) -> int           queue out[i] = x[i] + 1 on the env stream;
 *                                    returns the stream it used
 *   add_one_on_default_stream(x, out) -> int
 *                                    the same on the device's default stream:
 *                                    the wrong stream when the caller is on a
 *                                    non-default one (used to show that the
 *                                    ordering test can fail)
 */
#include <simdev/runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#include <cstdint>
#include <memory>

namespace {

using tvm::ffi::TensorView;

/*! \brief What the queued host function needs. Owned by the host function once
 *  it is queued: the kernel call returns long before the stream runs it. */
struct AddOneWork {
  const float* x;
  float* out;
  int64_t numel;
};

int RunAddOne(void* user_data) {
  std::unique_ptr<AddOneWork> work(static_cast<AddOneWork*>(user_data));
  for (int64_t i = 0; i < work->numel; ++i) {
    work->out[i] = work->x[i] + 1.0f;
  }
  return 0;
}

void CheckSimdevTensor(const TensorView& t, const char* name) {
  if (t.device().device_type != kDLExtDev) {
    TVM_FFI_THROW(ValueError)
        << name << " must be a simdev tensor (DLPack device type kDLExtDev = 12), got device type "
        << t.device().device_type;
  }
}

void CheckContiguousSimdevFloat(const TensorView& t, const char* name) {
  const DLDataType f32{kDLFloat, 32, 1};
  CheckSimdevTensor(t, name);
  if (t.dtype() != f32) TVM_FFI_THROW(TypeError) << name << " must be float32";
  if (!t.IsContiguous()) TVM_FFI_THROW(ValueError) << name << " must be contiguous";
}

template <typename T>
T* DataOf(const TensorView& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data_ptr()) + t.byte_offset());
}

void CheckSimdev(sdError_t rc, const char* what) {
  if (rc != sdSuccess) {
    TVM_FFI_THROW(RuntimeError) << what << " failed: " << sdGetErrorName(rc) << ": "
                                << sdGetLastErrorString();
  }
}

/*! \brief The stream TVM-FFI set for this call: the exchange table's
 *  current_work_stream answer for the first non-CPU tensor argument. */
sdStream_t EnvStreamOf(const TensorView& t) {
  return static_cast<sdStream_t>(TVMFFIEnvGetStream(t.device().device_type, t.device().device_id));
}

int64_t EnqueueAddOne(sdStream_t stream, const TensorView& x, const TensorView& out) {
  CheckContiguousSimdevFloat(x, "x");
  CheckContiguousSimdevFloat(out, "out");
  if (x.numel() != out.numel()) {
    TVM_FFI_THROW(ValueError) << "x and out must have the same number of elements, got "
                              << x.numel() << " and " << out.numel();
  }
  if (x.device().device_id != out.device().device_id) {
    TVM_FFI_THROW(ValueError) << "x and out must be on the same simdev device, got simdev:"
                              << x.device().device_id << " and simdev:" << out.device().device_id;
  }
  auto work = std::make_unique<AddOneWork>(AddOneWork{DataOf<float>(x), DataOf<float>(out), x.numel()});
  CheckSimdev(sdLaunchHostFunc(stream, RunAddOne, work.get()), "sdLaunchHostFunc");
  work.release();  // the queued host function owns it now
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(stream));
}

int64_t CurrentStream(TensorView x) {
  CheckSimdevTensor(x, "x");
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(EnvStreamOf(x)));
}

int64_t EnvTensorAllocator(TensorView x) {
  CheckSimdevTensor(x, "x");
  return static_cast<int64_t>(
      reinterpret_cast<intptr_t>(TVMFFIEnvGetDLPackManagedTensorAllocator()));
}

int64_t AddOne(TensorView x, TensorView out) {
  sdStream_t stream = EnvStreamOf(x);
  if (stream == nullptr) {
    TVM_FFI_THROW(RuntimeError)
        << "TVM-FFI passed no stream for simdev:" << x.device().device_id
        << " (TVMFFIEnvGetStream(kDLExtDev, id) is NULL): the DLPack exchange table on "
           "torch.Tensor does not report PrivateUse1 streams. Call devbridge.install() before "
           "the first TVM-FFI call on this thread.";
  }
  return EnqueueAddOne(stream, x, out);
}

int64_t AddOneOnDefaultStream(TensorView x, TensorView out) {
  sdStream_t stream = nullptr;
  CheckSimdev(sdStreamGetDefault(x.device().device_id, &stream), "sdStreamGetDefault");
  return EnqueueAddOne(stream, x, out);
}

}  // namespace

// The export macro defines a C wrapper whose `self` parameter is unused; the
// warning is tvm-ffi's, not ours, and would otherwise fail the -Werror build.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
TVM_FFI_DLL_EXPORT_TYPED_FUNC(current_stream, CurrentStream);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(env_tensor_allocator, EnvTensorAllocator);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one, AddOne);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one_on_default_stream, AddOneOnDefaultStream);
#pragma GCC diagnostic pop
