/*!
 * \file devbridge/c_launch_api.h
 * \brief devbridge's kernel-launch ABI: the signature descriptor of a compiled
 *  kernel, its launch metadata, and the kernel-runtime adapter table a launch
 *  goes through.
 *
 * One generic launcher serves every compiled Triton kernel on every plugin
 * device: it is built once per kernel from the descriptor below (data, not
 * generated code), packs the Python arguments into a `params` array exactly as
 * the kernel's ABI lays them out, and hands the launch to a *kernel runtime*:
 * the small table of functions below, one per kind of binary (CUDA cubins
 * through a dlopen'ed libcuda.so.1, simdev's host-function kernels, ...).
 * Nothing here includes torch, a vendor header or Python.
 *
 * The kernel-parameter ABI has two layouts (DevbridgeParamLayout), chosen
 * by the kernel's metadata:
 *
 * kDevbridgeLayoutTriton (upstream Triton's GPU backends), `params` holds:
 *  1. every non-constexpr argument of the kernel, tuples flattened and tensor
 *     descriptors decomposed, each at its type's size (DevbridgeArgType);
 *  2. always two trailing pointers: global scratch and profile scratch
 *     (NULL when the metadata asks for 0 bytes).
 *
 * kDevbridgeLayoutAscend (triton-ascend and FlagTree's Ascend backend), one
 * packed argument block (DevbridgeLaunchConfig.arg_block), in order:
 *  1. `ffts_addr`, 8 bytes, when DEVBRIDGE_LAUNCH_ASCEND_FFTS is set (the
 *     kernel runtime's hardware_sync_address);
 *  2. `syncBlockLock` and `workspace`, 8 bytes each, unless
 *     DEVBRIDGE_LAUNCH_ASCEND_SIMT_ONLY (NULL when the metadata asks for none);
 *  3. every non-constexpr argument: pointers, 64-bit integers and fp64 at
 *     8-byte aligned offsets, everything else in a 4-byte aligned slot;
 *     i1 and u1 are passed as 32-bit integers, fp16, bf16 and fp32 as fp32;
 *  4. gridX, gridY, gridZ as int32;
 *  the block's size rounded up to 8 (the packed struct triton-ascend
 *  generates). The launch is 1-D: gridX*gridY*gridZ blocks, or at most the
 *  device's core count with DEVBRIDGE_LAUNCH_ASCEND_CAP_BLOCKS; the kernel
 *  rebuilds its program id from the trailing grid.
 *
 * Errors: every function returns 0 on success and -1 on failure; the message
 * is then available from the table's `get_last_error` on the same thread. No
 * function throws. None needs the GIL.
 *
 * Versioning: as DevbridgeRuntimeAPI (c_runtime_api.h) — the header prefix
 * never changes, a minor bump appends fields, a major bump changes layout.
 */
#ifndef DEVBRIDGE_C_LAUNCH_API_H_
#define DEVBRIDGE_C_LAUNCH_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DEVBRIDGE_LAUNCH_API_MAJOR 1
#define DEVBRIDGE_LAUNCH_API_MINOR 1

/*! \brief Name of the PyCapsule carrying a `DevbridgeKernelRuntime*`. */
#define DEVBRIDGE_KERNEL_RUNTIME_CAPSULE_NAME "devbridge_kernel_runtime"

/*!
 * \brief Type of one kernel parameter, after flattening. The value is what a
 *  Triton signature string names; the comment gives the bytes the parameter
 *  occupies in `params` (the kernel ABI's size, verified against PTX `.entry`
 *  parameter lists: i1/u1 are `.u8`, fp16/bf16 are `.b8[2]`).
 */
typedef enum {
  kDevbridgeArgPointer = 1, /*!< "*<dtype>": 8 bytes, a device address (or 0) */
  kDevbridgeArgI1 = 2,      /*!< "i1": 1 byte, 0 or 1 */
  kDevbridgeArgI8 = 3,      /*!< "i8": 1 byte */
  kDevbridgeArgI16 = 4,     /*!< "i16": 2 bytes */
  kDevbridgeArgI32 = 5,     /*!< "i32": 4 bytes */
  kDevbridgeArgI64 = 6,     /*!< "i64": 8 bytes */
  kDevbridgeArgU1 = 7,      /*!< "u1": 1 byte, 0 or 1 */
  kDevbridgeArgU8 = 8,      /*!< "u8": 1 byte */
  kDevbridgeArgU16 = 9,     /*!< "u16": 2 bytes */
  kDevbridgeArgU32 = 10,    /*!< "u32": 4 bytes */
  kDevbridgeArgU64 = 11,    /*!< "u64": 8 bytes */
  kDevbridgeArgFP16 = 12,   /*!< "fp16": 2 bytes, IEEE binary16, rounded to nearest */
  kDevbridgeArgBF16 = 13,   /*!< "bf16": 2 bytes, the upper half of the fp32 value (truncated, as Triton does) */
  kDevbridgeArgFP32 = 14,   /*!< "fp32" (also "f32"): 4 bytes */
  kDevbridgeArgFP64 = 15    /*!< "fp64": 8 bytes */
} DevbridgeArgType;

/*! \brief How a kernel's parameters are laid out (see the file comment). Minor 1. */
typedef enum {
  kDevbridgeLayoutTriton = 0, /*!< params[] + two trailing scratch pointers */
  kDevbridgeLayoutAscend = 1  /*!< one packed block: [ffts] [lock, workspace] args gridX gridY gridZ */
} DevbridgeParamLayout;

/*! \brief Flags of DevbridgeLaunchMetadata and DevbridgeLaunchConfig. */
#define DEVBRIDGE_LAUNCH_COOPERATIVE 1u /*!< metadata.launch_cooperative_grid */
#define DEVBRIDGE_LAUNCH_PDL 2u         /*!< metadata.launch_pdl (programmatic dependent launch) */
/*! \brief Ascend layout: a leading ffts_addr (FFTS-capable targets, FFTS not disabled). Minor 1. */
#define DEVBRIDGE_LAUNCH_ASCEND_FFTS 4u
/*! \brief Ascend layout: no lock and workspace slots (metadata.force_simt_only). Minor 1. */
#define DEVBRIDGE_LAUNCH_ASCEND_SIMT_ONLY 8u
/*! \brief Ascend layout: at most the device's core count of blocks (TRITON_ALL_BLOCKS_PARALLEL). Minor 1. */
#define DEVBRIDGE_LAUNCH_ASCEND_CAP_BLOCKS 16u
/*! \brief Ascend layout: the kernel runs on vector cores (mix_mode "aiv"): its core count
 *  is the vector core count. Minor 1. */
#define DEVBRIDGE_LAUNCH_ASCEND_VECTOR_CORES 32u
/*! \brief The flags that only the Ascend layout gives meaning to. */
#define DEVBRIDGE_LAUNCH_ASCEND_FLAGS 60u

/*!
 * \brief What a compiled kernel's metadata says about launching it. Built once
 *  per compiled kernel (Triton's `CompiledKernel.metadata`).
 */
typedef struct {
  uint32_t num_warps;             /*!< threads per program = num_warps * warp_size */
  uint32_t num_ctas;              /*!< programs per cluster along x (1: no cluster) */
  uint32_t shared_bytes;          /*!< dynamic shared memory per program */
  uint64_t global_scratch_size;   /*!< bytes of global scratch per program (0: none) */
  uint32_t global_scratch_align;  /*!< alignment of the global scratch block, a power of two */
  uint64_t profile_scratch_size;  /*!< bytes of profile scratch per program (0: none) */
  uint32_t profile_scratch_align; /*!< alignment of the profile scratch block, a power of two */
  uint32_t flags;                 /*!< DEVBRIDGE_LAUNCH_* */
  /* minor 1: the Ascend layout (zero for kDevbridgeLayoutTriton) */
  uint32_t layout;                /*!< DevbridgeParamLayout */
  uint64_t workspace_size;        /*!< Ascend: workspace bytes per program (of gridX*gridY*gridZ); 0: none */
  uint64_t lock_num;              /*!< Ascend: int64 sync-block-lock words; 0: none */
  int64_t lock_init_value;        /*!< Ascend: every lock word's value before the kernel runs */
} DevbridgeLaunchMetadata;

/*!
 * \brief Signature descriptor of a compiled kernel: its flattened parameter
 *  types (without the pointers and the grid the layout adds) and its launch
 *  metadata.
 */
typedef struct {
  uint32_t num_params;             /*!< entries of param_types */
  const DevbridgeArgType* param_types;
  DevbridgeLaunchMetadata metadata;
} DevbridgeKernelSignature;

/*! \brief One launch as a kernel runtime receives it. */
typedef struct {
  uint32_t grid[3];         /*!< programs in x, y, z; each >= 1 (empty grids never reach the runtime);
                                 Ascend layout: {blocks, 1, 1}, the 1-D block count */
  uint32_t num_warps;       /*!< from the packed metadata of the call */
  uint32_t num_ctas;        /*!< cluster size along x; the runtime multiplies grid[0] by it */
  uint32_t shared_bytes;    /*!< dynamic shared memory per program */
  uint32_t flags;           /*!< DEVBRIDGE_LAUNCH_* of the metadata */
  void* stream;             /*!< the native stream to enqueue on */
  void** params;            /*!< num_params pointers, params[i] points at the i-th value */
  const size_t* param_sizes;/*!< bytes of each value */
  uint32_t num_params;      /*!< Triton layout: kernel parameters + the 2 scratch pointers;
                                 Ascend layout: every slot of the block, in order */
  /* minor 1 */
  uint32_t layout;          /*!< DevbridgeParamLayout */
  const void* arg_block;    /*!< Ascend layout: the packed argument block (host memory, valid during
                                 the call; runtimes copy it); NULL in the Triton layout */
  size_t arg_block_size;    /*!< its bytes */
} DevbridgeLaunchConfig;

/*! \brief What loading a binary gives back. */
typedef struct {
  void* module;        /*!< runtime-specific module handle (unload it with unload_module) */
  void* function;      /*!< runtime-specific kernel handle, valid while the module is loaded */
  int32_t num_regs;    /*!< registers per thread (0 where the runtime has none) */
  int32_t num_spills;  /*!< spilled registers per thread */
  int32_t max_threads; /*!< most threads per program the function accepts */
} DevbridgeLoadedKernel;

/*!
 * \brief What a compiler and a driver need to know of one device: filled by a
 *  kernel runtime's `device_properties` from the hardware itself.
 */
typedef struct {
  int32_t arch;                  /*!< compiler target architecture (CUDA: 10 * major + minor, e.g. 90) */
  int32_t warp_size;             /*!< threads per warp (32 on NVIDIA; 1 where programs are single calls) */
  int32_t multiprocessor_count;  /*!< streaming multiprocessors / cores */
  int32_t max_shared_mem;        /*!< most dynamic shared memory per program, opted in (bytes) */
  int32_t max_num_regs;          /*!< registers per multiprocessor */
  int32_t max_threads_per_block; /*!< most threads per program */
} DevbridgeDeviceProperties;

/*!
 * \brief A kernel runtime: how one kind of binary is loaded and launched on
 *  one device type. devbridge ships "cuda" (libcuda.so.1 opened at run time,
 *  never linked) and "simdev" (the simdev runtime library opened at run time);
 *  a plugin may hand in its own table as a PyCapsule named
 *  DEVBRIDGE_KERNEL_RUNTIME_CAPSULE_NAME. Every function may be called from
 *  any host thread; `self` is the table's own `self` field.
 */
typedef struct DevbridgeKernelRuntime {
  uint32_t major; /*!< DEVBRIDGE_LAUNCH_API_MAJOR of the producer */
  uint32_t minor; /*!< DEVBRIDGE_LAUNCH_API_MINOR of the producer */
  size_t size;    /*!< sizeof(DevbridgeKernelRuntime) of the producer */
  const char* name; /*!< "cuda", "simdev", ...: shown in error messages */
  void* self;       /*!< passed back as the first argument of every function */
  /*!
   * \brief Load `image` (`image_size` bytes: a cubin, a shared library, ...)
   *  on device `device_id` and look up the kernel `kernel_name`. When
   *  `shared_bytes` exceeds the runtime's default dynamic shared memory limit
   *  (48 KB on CUDA), raise the function's limit so launches with that much
   *  succeed; fail, naming both numbers, when the device cannot.
   */
  int (*load)(void* self, int32_t device_id, const void* image, size_t image_size,
              const char* kernel_name, uint32_t shared_bytes, DevbridgeLoadedKernel* out);
  /*! \brief Unload a module from `load`. Launches already queued still run. */
  int (*unload)(void* self, void* module);
  /*!
   * \brief Enqueue one launch of `function` (from `load` on `device_id`) on
   *  `config->stream`. Returns once enqueued; never synchronizes. Reports only
   *  errors of the enqueue itself (the kernel's own failures surface at the
   *  stream's next synchronization, as the runtime defines).
   */
  int (*launch)(void* self, int32_t device_id, void* function, const DevbridgeLaunchConfig* config);
  /*!
   * \brief Optional (may be NULL): the device owning `address`, for pointer
   *  arguments that come without a device (raw integers are trusted, as
   *  Triton trusts them; objects with only `data_ptr()` are checked here).
   *  *out_device_id = -1 when the address is host memory or unknown.
   */
  int (*pointer_device)(void* self, uint64_t address, int32_t* out_device_id);
  /*! \brief The calling thread's last error of this runtime; never NULL. */
  const char* (*get_last_error)(void* self);
  /*! \brief Properties of device `device_id`, read from the hardware. Ascend:
   *  multiprocessor_count is the AI core count; the vector core count is twice
   *  that (the rule triton-ascend's driver applies, num_vectorcore = 2 * num_aicore). */
  int (*device_properties)(void* self, int32_t device_id, DevbridgeDeviceProperties* out);
  /* ---- minor 1 (read only when `size` covers them) */
  /*! \brief Bit (1u << layout) for every DevbridgeParamLayout `launch` accepts; 0 reads as
   *  the Triton layout only (what every 1.0 table launches). */
  uint32_t layouts;
  /*!
   * \brief Optional: enqueue on `stream` the fill of `count` int64 words at device
   *  address `dst` with `value`, ordered with the stream's other work (the Ascend
   *  sync-block lock is initialised this way). Never synchronizes.
   */
  int (*fill_async)(void* self, int32_t device_id, void* dst, int64_t value, uint64_t count, void* stream);
  /*!
   * \brief Optional: the device's hardware synchronisation address (Ascend FFTS,
   *  aclrtGetHardwareSyncAddr), passed as the Ascend layout's leading ffts_addr.
   */
  int (*hardware_sync_address)(void* self, int32_t device_id, uint64_t* out_address);
} DevbridgeKernelRuntime;

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // DEVBRIDGE_C_LAUNCH_API_H_
