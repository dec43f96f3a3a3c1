// Python kernel arguments -> the kernel's parameter slots.
//
// A launcher is built from an *argument plan*: one node per top-level kernel
// argument, as the Triton signature gives them (constexprs included, because
// Triton passes every bound argument):
//   constexpr      dropped (tl.constexpr, None, ints equal to 1, ...)
//   value          one parameter of a DevbridgeArgType
//   tuple          its elements, flattened in order
//   tensordesc     a host TensorDescriptor decomposed as the Triton version
//                  in use does without TMA: base, shape (i64), strides (i64),
//                  padding=="nan" (i1), [round_f32_to_tf32 (i1), Triton 3.7+],
//                  shape (i32), strides (i64)
// Packing checks every value against its type (range, kind, device) and
// raises a Python exception naming the argument, never truncating silently.
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>
#include <vector>

#include "devbridge/c_launch_api.h"
#include "launch/loaded_kernels.h"

namespace devbridge {
namespace launch {

struct ArgNode {
  enum class Kind { kConstexpr, kValue, kTuple, kTensorDesc };
  Kind kind = Kind::kConstexpr;
  DevbridgeArgType type = kDevbridgeArgPointer;  // kValue
  std::vector<ArgNode> children;                 // kTuple
  int ndim = 0;                                  // kTensorDesc
  int num_flags = 0;                             // kTensorDesc: 1 (Triton 3.6) or 2 (3.7+)
};

// Parses one plan node from Python: None (constexpr), an int (a
// DevbridgeArgType), a tuple of nodes, or ("tensordesc", ndim, num_flags).
// Throws devbridge::Error(kValue) for anything else.
ArgNode ParseArgNode(PyObject* node);

// Appends the parameter types `node` expands to.
void FlattenArgNode(const ArgNode& node, std::vector<DevbridgeArgType>* out);

// The Triton name of `type` (param_layout.h has each layout's parameter sizes).
const char* ArgTypeName(DevbridgeArgType type) noexcept;
bool IsArgType(long value) noexcept;

// Where the values go, and what a message needs to name an argument.
struct PackContext {
  const LoadedKernel* kernel = nullptr;
  const std::string* kernel_name = nullptr;  // the launcher's (Triton's) name
  const std::vector<std::string>* arg_names = nullptr;
  // The slots: slots[i] holds parameter i (8 bytes each; no Triton scalar is
  // wider). `next` is the next free slot.
  uint64_t* slots = nullptr;
  uint32_t next = 0;
  // DevbridgeParamLayout: the Ascend layout passes fp16/bf16 as fp32 (and
  // i1/u1 as 32-bit ints, which the zero-extended slot already is).
  uint32_t layout = kDevbridgeLayoutTriton;
  // One-entry cache of the DLPack table of the last tensor type seen.
  PyTypeObject* last_type = nullptr;
  const void* last_table = nullptr;  // const DLPackExchangeAPI*, or nullptr: none
};

// Packs argument `position` (top level) into ctx's slots. Throws
// devbridge::Error naming the argument, or PythonErrorAlreadySet when a
// Python call (data_ptr(), a DLPack producer) raised.
void PackArgument(const ArgNode& node, PyObject* value, int position, PackContext* ctx);

}  // namespace launch
}  // namespace devbridge
