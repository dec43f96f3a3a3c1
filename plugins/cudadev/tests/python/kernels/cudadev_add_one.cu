/*!
 * \file cudadev_add_one.cu
 * \brief A TVM-FFI CUDA kernel library for cudadev tensors, compiled at test
 *  time by plugins/cudadev/tests/python/test_cudadev_tvm_ffi.py with
 *  `tvm_ffi.cpp.load` (nvcc).
 *
 * It is what a real vendor kernel looks like from TVM-FFI's side: it never sees
 * torch, only DLTensors (cudadev tensors arrive as kDLExtDev = 12), the stream
 * TVM-FFI's environment hands it (`TVMFFIEnvGetStream`) and the CUDA runtime.
 * That stream comes from the DLPack exchange table on torch.Tensor:
 * devbridge's reports cudadev's live current stream for kDLExtDev; PyTorch's
 * own table (torch 2.11) reports NULL.
 *
 * Exported functions:
 *   stream_of(x) -> int              the env stream for x's device, as an int
 *   env_tensor_allocator(x) -> int   the env's DLPack tensor allocator: TVM-FFI
 *                                    installs the managed_tensor_allocator of the
 *                                    table it used for x, so this names the table
 *   add_one(x, out) -> int           launch out[i] = x[i] + 1 on the env stream
 *                                    of x's device; returns the stream it used
 *   add_one_on(x, out, stream) -> int
 *                                    the same on an explicitly given stream (the
 *                                    wrong one, in the test showing that the
 *                                    ordering test can fail)
 *   stream_device(stream) -> int     the CUDA device a stream belongs to
 */
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#include <algorithm>
#include <cstdint>

namespace {

using tvm::ffi::TensorView;

constexpr int kThreadsPerBlock = 256;
// Enough blocks to fill an H200 several times over; the grid-stride loop
// covers any larger tensor.
constexpr int64_t kMaxBlocks = 4096;

__global__ void AddOneKernel(const float* x, float* out, int64_t numel) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel;
       i += stride) {
    out[i] = x[i] + 1.0f;
  }
}

void CheckCuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << what << " failed: " << cudaGetErrorName(rc) << ": "
                                << cudaGetErrorString(rc);
  }
}

int64_t AsInt(cudaStream_t stream) {
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(stream));
}

cudaStream_t AsStream(int64_t handle) {
  return reinterpret_cast<cudaStream_t>(static_cast<intptr_t>(handle));
}

/*! \brief Makes `device` CUDA's current device for this thread while alive.
 *  The caller's current device (cudadev's, which is CUDA's) may differ from the
 *  tensor's; the kernel must run on the tensor's GPU, and the caller must get
 *  its own device back. */
class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int device) {
    CheckCuda(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) {
      CheckCuda(cudaSetDevice(device), "cudaSetDevice");
      switched_ = true;
    }
  }
  ~CudaDeviceGuard() {
    // A destructor must not throw; cudaSetDevice back to a device that was
    // current a moment ago cannot fail short of a broken context.
    if (switched_) static_cast<void>(cudaSetDevice(previous_));
  }
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

void CheckCudadevTensor(const TensorView& t, const char* name) {
  if (t.device().device_type != kDLExtDev) {
    TVM_FFI_THROW(ValueError)
        << name << " must be a cudadev tensor (DLPack device type kDLExtDev = 12), got device type "
        << t.device().device_type;
  }
}

void CheckContiguousCudadevFloat(const TensorView& t, const char* name) {
  const DLDataType f32{kDLFloat, 32, 1};
  CheckCudadevTensor(t, name);
  if (t.dtype() != f32) TVM_FFI_THROW(TypeError) << name << " must be float32";
  if (!t.IsContiguous()) TVM_FFI_THROW(ValueError) << name << " must be contiguous";
}

template <typename T>
T* DataOf(const TensorView& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data_ptr()) + t.byte_offset());
}

/*! \brief The stream TVM-FFI set for this call: the exchange table's
 *  current_work_stream answer for the first non-CPU tensor argument. */
cudaStream_t EnvStreamOf(const TensorView& t) {
  return static_cast<cudaStream_t>(
      TVMFFIEnvGetStream(t.device().device_type, t.device().device_id));
}

int StreamDevice(cudaStream_t stream) {
#if CUDART_VERSION >= 12080
  int device = -1;
  CheckCuda(cudaStreamGetDevice(stream, &device), "cudaStreamGetDevice");
  return device;
#else
  static_cast<void>(stream);
  TVM_FFI_THROW(RuntimeError) << "stream_device needs CUDA 12.8 or newer (cudaStreamGetDevice); "
                                 "this library was built with CUDA runtime "
                              << CUDART_VERSION;
  return -1;  // not reached: TVM_FFI_THROW throws
#endif
}

int64_t LaunchAddOne(cudaStream_t stream, const TensorView& x, const TensorView& out) {
  CheckContiguousCudadevFloat(x, "x");
  CheckContiguousCudadevFloat(out, "out");
  if (x.numel() != out.numel()) {
    TVM_FFI_THROW(ValueError) << "x and out must have the same number of elements, got "
                              << x.numel() << " and " << out.numel();
  }
  const int device = x.device().device_id;
  if (out.device().device_id != device) {
    TVM_FFI_THROW(ValueError) << "x and out must be on the same cudadev device, got cudadev:"
                              << device << " and cudadev:" << out.device().device_id;
  }
  CudaDeviceGuard on_tensors_device(device);
  if (stream != nullptr) {
    // Launching on another GPU's stream fails with an unhelpful "invalid
    // resource handle"; say what went wrong instead.
    const int stream_device = StreamDevice(stream);
    if (stream_device != device) {
      TVM_FFI_THROW(ValueError) << "stream " << stream << " belongs to CUDA device "
                                << stream_device << ", but the tensors are on cudadev:" << device;
    }
  }
  const int64_t numel = x.numel();
  if (numel > 0) {
    const int64_t blocks =
        std::min<int64_t>((numel + kThreadsPerBlock - 1) / kThreadsPerBlock, kMaxBlocks);
    AddOneKernel<<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0, stream>>>(
        DataOf<const float>(x), DataOf<float>(out), numel);
    CheckCuda(cudaGetLastError(), "launching AddOneKernel");
  }
  return AsInt(stream);
}

int64_t StreamOf(TensorView x) {
  CheckCudadevTensor(x, "x");
  return AsInt(EnvStreamOf(x));
}

int64_t EnvTensorAllocator(TensorView x) {
  CheckCudadevTensor(x, "x");
  return static_cast<int64_t>(
      reinterpret_cast<intptr_t>(TVMFFIEnvGetDLPackManagedTensorAllocator()));
}

int64_t AddOne(TensorView x, TensorView out) {
  CheckCudadevTensor(x, "x");
  cudaStream_t stream = EnvStreamOf(x);
  if (stream == nullptr) {
    // NULL would launch on CUDA's legacy default stream, which cudadev's
    // non-blocking streams do not wait for: refuse instead of racing.
    TVM_FFI_THROW(RuntimeError)
        << "TVM-FFI passed no stream for cudadev:" << x.device().device_id
        << " (TVMFFIEnvGetStream(kDLExtDev, id) is NULL): the DLPack exchange table on "
           "torch.Tensor does not report PrivateUse1 streams. Call devbridge.install() before "
           "the first TVM-FFI call on this thread.";
  }
  return LaunchAddOne(stream, x, out);
}

int64_t AddOneOn(TensorView x, TensorView out, int64_t stream) {
  return LaunchAddOne(AsStream(stream), x, out);
}

int64_t StreamDeviceOf(int64_t stream) { return StreamDevice(AsStream(stream)); }

}  // namespace

// The export macro defines a C wrapper whose `self` parameter is unused; the
// warning is tvm-ffi's, not ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
TVM_FFI_DLL_EXPORT_TYPED_FUNC(stream_of, StreamOf);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(env_tensor_allocator, EnvTensorAllocator);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one, AddOne);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one_on, AddOneOn);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(stream_device, StreamDeviceOf);
#pragma GCC diagnostic pop
