#include "python/py_args.h"

#include <ATen/dlpack.h>
#include <c10/core/DeviceType.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "devbridge/error.h"
#include "dlpack/python_abi.h"

namespace devbridge {
namespace launch {
namespace {

constexpr int kDLExtDevType = 12;
constexpr int kDLAscendType = 21;

// ---------------------------------------------------------------- messages

std::string Repr(PyObject* value) {
  PyObject* repr = PyObject_Repr(value);
  if (repr == nullptr) {
    PyErr_Clear();
    return std::string("<") + Py_TYPE(value)->tp_name + " object>";
  }
  const char* text = PyUnicode_AsUTF8(repr);
  std::string result = text ? text : "?";
  Py_DECREF(repr);
  if (!text) PyErr_Clear();
  if (result.size() > 80) result = result.substr(0, 77) + "...";
  return result;
}

// "argument 3 ('n')[1] of kernel 'add'"
std::string Where(const PackContext& ctx, int position, const std::string& path) {
  std::string where = "argument " + std::to_string(position);
  if (ctx.arg_names && position >= 0 && static_cast<size_t>(position) < ctx.arg_names->size()) {
    where += " ('" + (*ctx.arg_names)[static_cast<size_t>(position)] + "')";
  }
  return where + path + " of kernel '" + (ctx.kernel_name ? *ctx.kernel_name : ctx.kernel->name) + "'";
}

// The argument as the caller wrote it, for a suggested fix: "y", "pair[1]"
// (the kernel's parameter name; "tensor" where the launcher has none).
std::string Expression(const PackContext& ctx, int position, const std::string& path) {
  if (ctx.arg_names && position >= 0 && static_cast<size_t>(position) < ctx.arg_names->size()) {
    return (*ctx.arg_names)[static_cast<size_t>(position)] + path;
  }
  return "tensor";
}

[[noreturn]] void Fail(ErrorKind kind, const PackContext& ctx, int position, const std::string& path,
                       const std::string& what) {
  throw Error(kind, "devbridge: " + Where(ctx, position, path) + " " + what);
}

std::string DescribeDevice(const DLDevice& device) {
  switch (static_cast<int>(device.device_type)) {
    case 1: return "cpu";
    case 2: return "cuda:" + std::to_string(device.device_id);
    case 3: return "CUDA pinned host memory";
    case kDLExtDevType:
    case kDLAscendType:
      return c10::get_privateuse1_backend() + ":" + std::to_string(device.device_id);
    default:
      return "DLPack device (" + std::to_string(device.device_type) + ", " +
             std::to_string(device.device_id) + ")";
  }
}

bool IsPluginType(int device_type) { return device_type == kDLExtDevType || device_type == kDLAscendType; }

bool SameDevice(const LoadedKernel& kernel, const DLDevice& device) {
  const bool same_type = device.device_type == kernel.dl_device_type ||
                         (IsPluginType(device.device_type) && IsPluginType(kernel.dl_device_type));
  return same_type && device.device_id == kernel.device_id;
}

// ---------------------------------------------------------------- pointers

PyObject* DataPtrName() {
  static PyObject* name = PyUnicode_InternFromString("data_ptr");
  return name;
}
PyObject* TableAttributeName() {
  static PyObject* name = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
  return name;
}

// The DLPack exchange table a type carries (torch.Tensor: the one installed,
// devbridge's or PyTorch's), or nullptr.
const DLPackExchangeAPI* TableOf(PyTypeObject* type, PackContext* ctx) {
  if (type == ctx->last_type) return static_cast<const DLPackExchangeAPI*>(ctx->last_table);
  const DLPackExchangeAPI* table = nullptr;
  PyObject* capsule = _PyType_Lookup(type, TableAttributeName());  // borrowed; no error set
  if (capsule != nullptr && PyCapsule_CheckExact(capsule)) {
    table = static_cast<const DLPackExchangeAPI*>(PyCapsule_GetPointer(capsule, "dlpack_exchange_api"));
    if (table == nullptr) PyErr_Clear();
    if (table != nullptr && (table->header.version.major != DLPACK_MAJOR_VERSION ||
                             table->dltensor_from_py_object_no_sync == nullptr)) {
      table = nullptr;  // another major version: use the data_ptr() route
    }
  }
  ctx->last_type = type;
  ctx->last_table = table;
  return table;
}

uint64_t ExtractPointer(PyObject* value, int position, const std::string& path, PackContext* ctx) {
  if (value == Py_None) return 0;
  if (PyLong_Check(value)) {
    // A raw device address: trusted, as Triton trusts it.
    const unsigned long long address = PyLong_AsUnsignedLongLong(value);
    if (address == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
      PyErr_Clear();
      Fail(ErrorKind::kValue, *ctx, position, path,
           "is the integer " + Repr(value) + ", which is not a 64-bit device address");
    }
    return address;
  }
  const LoadedKernel& kernel = *ctx->kernel;
  if (const DLPackExchangeAPI* table = TableOf(Py_TYPE(value), ctx)) {
    DLTensor tensor{};
    if (table->dltensor_from_py_object_no_sync(value, &tensor) != 0) throw PythonErrorAlreadySet();
    if (!SameDevice(kernel, tensor.device)) {
      Fail(ErrorKind::kValue, *ctx, position, path,
           "is a tensor on " + DescribeDevice(tensor.device) + ", but the kernel launches on " +
               kernel.device_name + "; move it there first (" + Expression(*ctx, position, path) + ".to('" +
               kernel.device_name + "'))");
    }
    return reinterpret_cast<uint64_t>(tensor.data) + tensor.byte_offset;
  }
  // Duck typing, as Triton: any object with data_ptr(). Its device is asked
  // of the kernel runtime where the runtime can tell.
  PyObject* method = PyObject_GetAttr(value, DataPtrName());
  if (method == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw PythonErrorAlreadySet();
    PyErr_Clear();
    Fail(ErrorKind::kType, *ctx, position, path,
         "is a pointer parameter; pass a tensor, an object with data_ptr(), an int address or "
         "None, got " + std::string(Py_TYPE(value)->tp_name) + " " + Repr(value));
  }
  PyObject* result = PyObject_CallNoArgs(method);  // an error raised inside data_ptr() is the caller's
  Py_DECREF(method);
  if (result == nullptr) throw PythonErrorAlreadySet();
  const unsigned long long address = PyLong_Check(result) ? PyLong_AsUnsignedLongLong(result) : 0;
  const bool bad = !PyLong_Check(result) || (address == static_cast<unsigned long long>(-1) && PyErr_Occurred());
  Py_DECREF(result);
  if (bad) {
    PyErr_Clear();
    Fail(ErrorKind::kType, *ctx, position, path,
         "has a data_ptr() that did not return a 64-bit unsigned int");
  }
  if (address != 0 && kernel.runtime->pointer_device != nullptr) {
    int32_t device = -1;
    if (kernel.runtime->pointer_device(kernel.runtime->self, address, &device) != 0) {
      Fail(ErrorKind::kRuntime, *ctx, position, path,
           std::string("could not be checked: ") + kernel.runtime->get_last_error(kernel.runtime->self));
    }
    if (device != kernel.device_id) {
      const std::string where =
          device < 0 ? std::string("host memory (or memory the ") + kernel.runtime->name + " runtime does not know)"
                     : std::string(kernel.runtime->name) + " device " + std::to_string(device);
      Fail(ErrorKind::kValue, *ctx, position, path,
           "points to " + where + ", but the kernel launches on " + kernel.device_name);
    }
  }
  return address;
}

// ---------------------------------------------------------------- scalars

// "is an i32", "is a u8", "is a bf16"
std::string IsA(DevbridgeArgType type) {
  const char* name = ArgTypeName(type);
  return std::string(name[0] == 'i' || name[0] == 'f' ? "is an " : "is a ") + name;
}

template <class T>
void Store(PackContext* ctx, T value) {
  uint64_t slot = 0;
  std::memcpy(&slot, &value, sizeof(T));
  ctx->slots[ctx->next++] = slot;
}

[[noreturn]] void FailNotInteger(const PackContext& ctx, int position, const std::string& path,
                                 DevbridgeArgType type, PyObject* value) {
  Fail(ErrorKind::kType, ctx, position, path,
       IsA(type) + " parameter; pass an int, got " +
           Py_TYPE(value)->tp_name + " " + Repr(value));
}

[[noreturn]] void FailRange(const PackContext& ctx, int position, const std::string& path,
                            DevbridgeArgType type, PyObject* value, const char* range) {
  Fail(ErrorKind::kValue, ctx, position, path,
       IsA(type) + " parameter, and " + Repr(value) +
           " is outside its range " + range);
}

void PackSigned(PyObject* value, DevbridgeArgType type, int position, const std::string& path,
                PackContext* ctx, long long low, long long high, const char* range) {
  if (!PyLong_Check(value) && !PyIndex_Check(value)) FailNotInteger(*ctx, position, path, type, value);
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
  if (v == -1 && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw PythonErrorAlreadySet();
    PyErr_Clear();
    FailNotInteger(*ctx, position, path, type, value);
  }
  if (overflow != 0 || v < low || v > high) FailRange(*ctx, position, path, type, value, range);
  switch (type) {
    case kDevbridgeArgI8: Store<int8_t>(ctx, static_cast<int8_t>(v)); break;
    case kDevbridgeArgI16: Store<int16_t>(ctx, static_cast<int16_t>(v)); break;
    case kDevbridgeArgI32: Store<int32_t>(ctx, static_cast<int32_t>(v)); break;
    default: Store<int64_t>(ctx, static_cast<int64_t>(v)); break;
  }
}

void PackUnsigned(PyObject* value, DevbridgeArgType type, int position, const std::string& path,
                  PackContext* ctx, unsigned long long high, const char* range) {
  if (!PyLong_Check(value) && !PyIndex_Check(value)) FailNotInteger(*ctx, position, path, type, value);
  PyObject* index = PyNumber_Index(value);
  if (index == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw PythonErrorAlreadySet();
    PyErr_Clear();
    FailNotInteger(*ctx, position, path, type, value);
  }
  const unsigned long long v = PyLong_AsUnsignedLongLong(index);
  Py_DECREF(index);
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();  // negative or wider than 64 bits
    FailRange(*ctx, position, path, type, value, range);
  }
  if (v > high) FailRange(*ctx, position, path, type, value, range);
  switch (type) {
    case kDevbridgeArgU1:
    case kDevbridgeArgU8:
    case kDevbridgeArgI1: Store<uint8_t>(ctx, static_cast<uint8_t>(v)); break;
    case kDevbridgeArgU16: Store<uint16_t>(ctx, static_cast<uint16_t>(v)); break;
    case kDevbridgeArgU32: Store<uint32_t>(ctx, static_cast<uint32_t>(v)); break;
    default: Store<uint64_t>(ctx, static_cast<uint64_t>(v)); break;
  }
}

double AsDouble(PyObject* value, DevbridgeArgType type, int position, const std::string& path,
                const PackContext& ctx) {
  if (PyFloat_CheckExact(value)) return PyFloat_AS_DOUBLE(value);
  const double v = PyFloat_AsDouble(value);
  if (v == -1.0 && PyErr_Occurred()) {
    const bool overflow = PyErr_ExceptionMatches(PyExc_OverflowError);
    if (!overflow && !PyErr_ExceptionMatches(PyExc_TypeError)) throw PythonErrorAlreadySet();
    PyErr_Clear();
    if (overflow) {
      Fail(ErrorKind::kValue, ctx, position, path,
           IsA(type) + " parameter, and " + Repr(value) + " is outside the range of a float");
    }
    Fail(ErrorKind::kType, ctx, position, path,
         IsA(type) + " parameter; pass a float, got " + Py_TYPE(value)->tp_name + " " + Repr(value));
  }
  return v;
}

// A double as float: finite values beyond float's range are refused (the
// conversion would be undefined behaviour, and a silent inf hides the bug);
// NaN and +-inf stay what they are.
float AsFloat(PyObject* value, DevbridgeArgType type, int position, const std::string& path,
              const PackContext& ctx) {
  const double v = AsDouble(value, type, position, path, ctx);
  if (std::isfinite(v) && std::fabs(v) > static_cast<double>(std::numeric_limits<float>::max())) {
    Fail(ErrorKind::kValue, ctx, position, path,
         IsA(type) + " parameter, and " + Repr(value) +
             " is too large for it (finite values up to 3.4e38); pass a smaller value, float('inf'), "
             "or declare the parameter fp64");
  }
  return static_cast<float>(v);
}

void PackValue(DevbridgeArgType type, PyObject* value, int position, const std::string& path,
               PackContext* ctx) {
  switch (type) {
    case kDevbridgeArgPointer:
      Store<uint64_t>(ctx, ExtractPointer(value, position, path, ctx));
      return;
    case kDevbridgeArgI1:
    case kDevbridgeArgU1:
      if (value == Py_True || value == Py_False) {
        Store<uint8_t>(ctx, value == Py_True ? 1 : 0);
        return;
      }
      PackUnsigned(value, type, position, path, ctx, 1, "{0, 1} (or a bool)");
      return;
    case kDevbridgeArgI8: PackSigned(value, type, position, path, ctx, INT8_MIN, INT8_MAX, "[-128, 127]"); return;
    case kDevbridgeArgI16:
      PackSigned(value, type, position, path, ctx, INT16_MIN, INT16_MAX, "[-32768, 32767]");
      return;
    case kDevbridgeArgI32:
      PackSigned(value, type, position, path, ctx, INT32_MIN, INT32_MAX, "[-2**31, 2**31 - 1]");
      return;
    case kDevbridgeArgI64:
      PackSigned(value, type, position, path, ctx, INT64_MIN, INT64_MAX, "[-2**63, 2**63 - 1]");
      return;
    case kDevbridgeArgU8: PackUnsigned(value, type, position, path, ctx, UINT8_MAX, "[0, 255]"); return;
    case kDevbridgeArgU16: PackUnsigned(value, type, position, path, ctx, UINT16_MAX, "[0, 65535]"); return;
    case kDevbridgeArgU32: PackUnsigned(value, type, position, path, ctx, UINT32_MAX, "[0, 2**32 - 1]"); return;
    case kDevbridgeArgU64: PackUnsigned(value, type, position, path, ctx, UINT64_MAX, "[0, 2**64 - 1]"); return;
    case kDevbridgeArgFP16:
    case kDevbridgeArgBF16:
      if (ctx->layout == kDevbridgeLayoutAscend) {  // triton-ascend passes both as fp32
        Store<float>(ctx, AsFloat(value, type, position, path, *ctx));
        return;
      }
      break;
    default: break;
  }
  switch (type) {
    case kDevbridgeArgFP16: {
      const double v = AsDouble(value, type, position, path, *ctx);
      unsigned char bytes[2];
      // Round to nearest, as Triton packs it; NaN and +-inf are fp16 values.
#if PY_VERSION_HEX >= 0x030B0000
      const int status = PyFloat_Pack2(v, reinterpret_cast<char*>(bytes), 1);
#else
      const int status = _PyFloat_Pack2(v, bytes, 1);
#endif
      if (status != 0) {
        PyErr_Clear();
        Fail(ErrorKind::kValue, *ctx, position, path,
             "is an fp16 parameter, and " + Repr(value) +
                 " is too large for fp16 (finite values up to 65504); pass a smaller value or "
                 "declare the parameter fp32");
      }
      uint16_t half = 0;
      std::memcpy(&half, bytes, 2);
      Store<uint16_t>(ctx, half);
      return;
    }
    case kDevbridgeArgBF16: {
      // The upper half of the fp32 bits, truncated: what Triton passes.
      const float f = AsFloat(value, type, position, path, *ctx);
      uint32_t bits = 0;
      std::memcpy(&bits, &f, 4);
      Store<uint16_t>(ctx, static_cast<uint16_t>(bits >> 16));
      return;
    }
    case kDevbridgeArgFP32:
      Store<float>(ctx, AsFloat(value, type, position, path, *ctx));
      return;
    case kDevbridgeArgFP64:
      Store<double>(ctx, AsDouble(value, type, position, path, *ctx));
      return;
    default: break;  // handled above
  }
  throw Error(ErrorKind::kRuntime, "devbridge: unknown parameter type in a launcher plan");
}

// ---------------------------------------------------------------- tuples, descriptors

PyObject* Attribute(PyObject* value, const char* name, int position, const std::string& path,
                    const PackContext& ctx) {
  PyObject* attribute = PyObject_GetAttrString(value, name);
  if (attribute == nullptr) {
    PyErr_Clear();
    Fail(ErrorKind::kType, ctx, position, path,
         std::string("is a tensor descriptor parameter; pass a triton.tools.tensor_descriptor."
                     "TensorDescriptor, got ") +
             Py_TYPE(value)->tp_name + " (it has no '" + name + "')");
  }
  return attribute;
}

// Reads `ndim` entries of a sequence attribute into `out` as exact ints (new
// references kept in `keep`): both copies Triton's decomposition passes
// (i64 and i32) then come from the same values, whatever user code the
// descriptor runs in between.
void IntList(PyObject* value, const char* name, int ndim, int position, const std::string& path,
             const PackContext& ctx, std::vector<PyObject*>* keep, std::vector<PyObject*>* out) {
  PyObject* sequence = Attribute(value, name, position, path, ctx);
  keep->push_back(sequence);
  PyObject* items = PySequence_Tuple(sequence);
  if (items == nullptr) {
    PyErr_Clear();
    Fail(ErrorKind::kType, ctx, position, path, std::string("has a '") + name + "' that is not a sequence");
  }
  keep->push_back(items);
  if (PyTuple_GET_SIZE(items) != ndim) {
    Fail(ErrorKind::kValue, ctx, position, path,
         std::string("has ") + std::to_string(PyTuple_GET_SIZE(items)) + " entries in '" + name +
             "', but the kernel was compiled for a " + std::to_string(ndim) + "-d descriptor");
  }
  for (int i = 0; i < ndim; ++i) {
    PyObject* entry = PyNumber_Index(PyTuple_GET_ITEM(items, i));
    if (entry == nullptr) {
      if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw PythonErrorAlreadySet();
      PyErr_Clear();
      Fail(ErrorKind::kType, ctx, position, path + "." + name,
           "has an entry that is not an int: " + Repr(PyTuple_GET_ITEM(items, i)));
    }
    keep->push_back(entry);
    out->push_back(entry);
  }
}

void PackTensorDesc(const ArgNode& node, PyObject* value, int position, const std::string& path,
                    PackContext* ctx) {
  std::vector<PyObject*> keep;  // new references, released at the end
  struct Release {
    std::vector<PyObject*>& objects;
    ~Release() {
      for (PyObject* o : objects) Py_XDECREF(o);
    }
  } release{keep};
  PyObject* base = Attribute(value, "base", position, path, *ctx);
  keep.push_back(base);
  std::vector<PyObject*> shape, strides;
  IntList(value, "shape", node.ndim, position, path, *ctx, &keep, &shape);
  IntList(value, "strides", node.ndim, position, path, *ctx, &keep, &strides);
  PyObject* padding = Attribute(value, "padding", position, path, *ctx);
  keep.push_back(padding);
  const int nan_padding = PyUnicode_Check(padding) ? PyUnicode_CompareWithASCIIString(padding, "nan") == 0 : 0;

  PackValue(kDevbridgeArgPointer, base, position, path + ".base", ctx);
  for (PyObject* s : shape) PackValue(kDevbridgeArgI64, s, position, path + ".shape", ctx);
  for (PyObject* s : strides) PackValue(kDevbridgeArgI64, s, position, path + ".strides", ctx);
  Store<uint8_t>(ctx, static_cast<uint8_t>(nan_padding));
  if (node.num_flags >= 2) {
    PyObject* round = PyObject_GetAttrString(value, "round_f32_to_tf32");
    int flag = 0;
    if (round == nullptr) {
      PyErr_Clear();
    } else {
      flag = PyObject_IsTrue(round);
      Py_DECREF(round);
      if (flag < 0) throw PythonErrorAlreadySet();
    }
    Store<uint8_t>(ctx, static_cast<uint8_t>(flag));
  }
  for (PyObject* s : shape) PackValue(kDevbridgeArgI32, s, position, path + ".shape", ctx);
  for (PyObject* s : strides) PackValue(kDevbridgeArgI64, s, position, path + ".strides", ctx);
}

void PackNode(const ArgNode& node, PyObject* value, int position, const std::string& path, PackContext* ctx) {
  switch (node.kind) {
    case ArgNode::Kind::kConstexpr: return;
    case ArgNode::Kind::kValue: PackValue(node.type, value, position, path, ctx); return;
    case ArgNode::Kind::kTensorDesc: PackTensorDesc(node, value, position, path, ctx); return;
    case ArgNode::Kind::kTuple: {
      if (!PyTuple_Check(value) && !PyList_Check(value)) {
        Fail(ErrorKind::kType, *ctx, position, path,
             "is a tuple parameter of " + std::to_string(node.children.size()) + " elements; got " +
                 Py_TYPE(value)->tp_name + " " + Repr(value));
      }
      // A snapshot that owns its items: packing one element runs user code
      // (data_ptr(), __index__), which may change a list under our feet.
      PyObject* items = PySequence_Tuple(value);
      if (items == nullptr) throw PythonErrorAlreadySet();
      struct Release {
        PyObject* object;
        ~Release() { Py_DECREF(object); }
      } release{items};
      const Py_ssize_t size = PyTuple_GET_SIZE(items);
      if (size != static_cast<Py_ssize_t>(node.children.size())) {
        Fail(ErrorKind::kValue, *ctx, position, path,
             "is a tuple parameter of " + std::to_string(node.children.size()) + " elements; got " +
                 std::to_string(size));
      }
      for (Py_ssize_t i = 0; i < size; ++i) {
        PackNode(node.children[static_cast<size_t>(i)], PyTuple_GET_ITEM(items, i), position,
                 path + "[" + std::to_string(i) + "]", ctx);
      }
      return;
    }
  }
}

}  // namespace

const char* ArgTypeName(DevbridgeArgType type) noexcept {
  switch (type) {
    case kDevbridgeArgPointer: return "pointer";
    case kDevbridgeArgI1: return "i1";
    case kDevbridgeArgI8: return "i8";
    case kDevbridgeArgI16: return "i16";
    case kDevbridgeArgI32: return "i32";
    case kDevbridgeArgI64: return "i64";
    case kDevbridgeArgU1: return "u1";
    case kDevbridgeArgU8: return "u8";
    case kDevbridgeArgU16: return "u16";
    case kDevbridgeArgU32: return "u32";
    case kDevbridgeArgU64: return "u64";
    case kDevbridgeArgFP16: return "fp16";
    case kDevbridgeArgBF16: return "bf16";
    case kDevbridgeArgFP32: return "fp32";
    case kDevbridgeArgFP64: return "fp64";
  }
  return "?";
}

bool IsArgType(long value) noexcept { return value >= kDevbridgeArgPointer && value <= kDevbridgeArgFP64; }

ArgNode ParseArgNode(PyObject* node) {
  ArgNode parsed;
  if (node == Py_None) return parsed;  // constexpr
  if (PyLong_Check(node)) {
    const long value = PyLong_AsLong(node);
    if (!IsArgType(value)) {
      PyErr_Clear();
      throw Error(ErrorKind::kValue, "devbridge: launcher plan entry " + Repr(node) +
                                         " is not a DevbridgeArgType value");
    }
    parsed.kind = ArgNode::Kind::kValue;
    parsed.type = static_cast<DevbridgeArgType>(value);
    return parsed;
  }
  if (PyTuple_Check(node)) {
    const Py_ssize_t size = PyTuple_GET_SIZE(node);
    if (size == 3 && PyUnicode_Check(PyTuple_GET_ITEM(node, 0))) {
      if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(node, 0), "tensordesc") != 0) {
        throw Error(ErrorKind::kValue, "devbridge: unknown launcher plan entry " + Repr(node));
      }
      parsed.kind = ArgNode::Kind::kTensorDesc;
      parsed.ndim = static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(node, 1)));
      parsed.num_flags = static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(node, 2)));
      if (PyErr_Occurred() || parsed.ndim < 1 || parsed.ndim > 5 || parsed.num_flags < 1 ||
          parsed.num_flags > 2) {
        PyErr_Clear();
        throw Error(ErrorKind::kValue, "devbridge: bad tensordesc plan entry " + Repr(node) +
                                           " (want ('tensordesc', ndim 1..5, flags 1 or 2))");
      }
      return parsed;
    }
    parsed.kind = ArgNode::Kind::kTuple;
    for (Py_ssize_t i = 0; i < size; ++i) parsed.children.push_back(ParseArgNode(PyTuple_GET_ITEM(node, i)));
    return parsed;
  }
  throw Error(ErrorKind::kValue, "devbridge: launcher plan entry " + Repr(node) +
                                     " is neither None, an int, a tuple nor a tensordesc entry");
}

void FlattenArgNode(const ArgNode& node, std::vector<DevbridgeArgType>* out) {
  switch (node.kind) {
    case ArgNode::Kind::kConstexpr: return;
    case ArgNode::Kind::kValue: out->push_back(node.type); return;
    case ArgNode::Kind::kTuple:
      for (const ArgNode& child : node.children) FlattenArgNode(child, out);
      return;
    case ArgNode::Kind::kTensorDesc:
      out->push_back(kDevbridgeArgPointer);
      for (int i = 0; i < 2 * node.ndim; ++i) out->push_back(kDevbridgeArgI64);
      for (int i = 0; i < node.num_flags; ++i) out->push_back(kDevbridgeArgI1);
      for (int i = 0; i < node.ndim; ++i) out->push_back(kDevbridgeArgI32);
      for (int i = 0; i < node.ndim; ++i) out->push_back(kDevbridgeArgI64);
      return;
  }
}

void PackArgument(const ArgNode& node, PyObject* value, int position, PackContext* ctx) {
  static const std::string kTopLevel;
  PackNode(node, value, position, kTopLevel, ctx);
}

}  // namespace launch
}  // namespace devbridge
