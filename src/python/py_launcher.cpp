// devbridge._C.Launcher: the generic launcher object a Triton driver hands
// out as `launcher_cls`, one per compiled kernel, called exactly as Triton
// calls launchers (the same on Triton 3.6 and 3.7+):
//
//   launcher(gx, gy, gz, stream, function, packed_metadata, launch_metadata,
//            enter_hook, exit_hook, *kernel_args)
//
// The call is a vectorcall with no Python frame of devbridge's own: parse
// the grid, find the loaded kernel, run the enter hook (skipped when it is
// None or an empty HookChain), pack the arguments into parameter slots, then
// release the GIL for the launch itself (scratch, submit hook or kernel
// runtime, src/launch/launch.cpp), then the exit hook.
//
// launcher.bind(function) gives the static-launcher shape of the same call,
// (gx, gy, gz, stream, *kernel_args): the kernel fixed, no hooks, the
// metadata it was built with (devbridge/inductor/static_launch.py).
//
// Construction takes Triton's (src, metadata): describing them is Python
// (devbridge/triton/_describe.py, the one module that reads Triton objects),
// the plan it returns is data parsed here once.
#include "python/py_launcher.h"

#include <structmember.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "devbridge/error.h"
#include "devbridge/runtime.h"
#include "dlpack/python_abi.h"
#include "launch/launch.h"
#include "launch/param_layout.h"
#include "python/device_type.h"
#include "python/py_args.h"

namespace devbridge {
namespace launch {
namespace {

constexpr Py_ssize_t kFixedArgs = 9;  // gx gy gz stream function packed launch_md enter exit
constexpr uint32_t kStackSlots = 64;

struct LauncherState {
  std::string kernel_name;
  std::vector<ArgNode> nodes;  // one per top-level kernel argument
  std::vector<std::string> arg_names;
  std::vector<DevbridgeArgType> param_types;  // flattened, without the slots the layout adds
  std::vector<size_t> param_sizes;            // every slot of the layout, in order
  uint32_t leading_slots = 0;                 // the layout's slots before the kernel's own
  DevbridgeKernelSignature signature{};       // the C descriptor: views param_types, holds the metadata
  // Caches, read and written with the GIL held.
  uint64_t cached_function = 0;
  uint64_t cached_generation = 0;
  std::shared_ptr<const LoadedKernel> cached_kernel;
  PyObject* cached_packed = nullptr;  // strong reference: identity stays meaningful
  uint32_t warps = 1, ctas = 1, shared = 0;
};

struct PyLauncher {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  LauncherState* state;
};

PyObject* g_hook_chain_type = nullptr;  // triton.knobs.HookChain, once known

PyObject* CallsName() {
  static PyObject* name = PyUnicode_InternFromString("calls");
  return name;
}

// True when `hook` must be called: not None and not an empty HookChain.
bool HookIsLive(PyObject* hook) {
  if (hook == Py_None) return false;
  if (g_hook_chain_type == nullptr || reinterpret_cast<PyObject*>(Py_TYPE(hook)) != g_hook_chain_type) {
    return true;
  }
  PyObject* calls = PyObject_GetAttr(hook, CallsName());
  if (calls == nullptr) {
    PyErr_Clear();
    return true;
  }
  const bool live = !PyList_Check(calls) || PyList_GET_SIZE(calls) != 0;
  Py_DECREF(calls);
  return live;
}

bool CallHook(PyObject* hook, PyObject* launch_metadata) {
  PyObject* result = PyObject_CallOneArg(hook, launch_metadata);
  if (result == nullptr) return false;
  Py_DECREF(result);
  return true;
}

[[noreturn]] void Fail(ErrorKind kind, const std::string& message) { throw Error(kind, message); }

uint32_t ParseGrid(PyObject* value, const char* axis, const LauncherState& state) {
  if (!PyLong_Check(value)) {
    Fail(ErrorKind::kType, "devbridge: grid " + std::string(axis) + " of kernel '" + state.kernel_name +
                               "' must be an int, got " + Py_TYPE(value)->tp_name);
  }
  int overflow = 0;
  const long long g = PyLong_AsLongLongAndOverflow(value, &overflow);
  if (overflow != 0 || g < 0 || g > 0x7fffffffLL) {
    if (overflow != 0) {
      Fail(ErrorKind::kValue, "devbridge: grid " + std::string(axis) + " of kernel '" + state.kernel_name +
                                  "' does not fit in 64 bits; it must be in [0, 2**31 - 1]");
    }
    Fail(ErrorKind::kValue, "devbridge: grid " + std::string(axis) + " of kernel '" + state.kernel_name +
                                "' is " + std::to_string(g) + "; it must be in [0, 2**31 - 1]");
  }
  return static_cast<uint32_t>(g);
}

uint64_t ParseHandle(PyObject* value, const char* what, const LauncherState& state) {
  if (value == Py_None) return 0;
  const unsigned long long h = PyLong_Check(value) ? PyLong_AsUnsignedLongLong(value) : 0;
  if (!PyLong_Check(value) || (h == static_cast<unsigned long long>(-1) && PyErr_Occurred())) {
    PyErr_Clear();
    Fail(ErrorKind::kType, std::string("devbridge: the ") + what + " passed to kernel '" + state.kernel_name +
                               "' must be a non-negative int, got " + Py_TYPE(value)->tp_name);
  }
  return h;
}

const std::shared_ptr<const LoadedKernel>& FindLaunchKernel(LauncherState& state, uint64_t function) {
  const uint64_t generation = KernelRegistryGeneration();
  if (state.cached_kernel && function == state.cached_function && generation == state.cached_generation) {
    return state.cached_kernel;
  }
  std::shared_ptr<const LoadedKernel> kernel = FindKernel(function);
  if (!kernel) {
    Fail(ErrorKind::kValue, "devbridge: function handle " + std::to_string(function) + " passed to kernel '" +
                                state.kernel_name +
                                "' is not a kernel loaded by devbridge (unloaded, or from another "
                                "launcher); load the binary with the devbridge driver's utils.load_binary");
  }
  state.cached_kernel = std::move(kernel);
  state.cached_function = function;
  state.cached_generation = generation;
  return state.cached_kernel;
}

void ParsePackedMetadata(LauncherState& state, PyObject* packed) {
  // The Ascend backends pack a dict (kernel_name, tensor_kinds, ...) that
  // says nothing the launch needs: its metadata came with the plan.
  if (state.signature.metadata.layout == kDevbridgeLayoutAscend) return;
  if (packed == state.cached_packed) return;
  if (!PyTuple_Check(packed) || PyTuple_GET_SIZE(packed) != 3) {
    Fail(ErrorKind::kType, "devbridge: packed_metadata of kernel '" + state.kernel_name +
                               "' must be the tuple (num_warps, num_ctas, shared) that the compiler's "
                               "pack_metadata returns");
  }
  long values[3];
  for (int i = 0; i < 3; ++i) {
    values[i] = PyLong_AsLong(PyTuple_GET_ITEM(packed, i));
    if ((values[i] == -1 && PyErr_Occurred()) || values[i] < 0 || values[i] > 0x7fffffffL) {
      PyErr_Clear();
      Fail(ErrorKind::kValue, "devbridge: packed_metadata of kernel '" + state.kernel_name +
                                  "' must hold three non-negative ints (num_warps, num_ctas, shared)");
    }
  }
  Py_INCREF(packed);
  Py_XSETREF(state.cached_packed, packed);
  state.warps = static_cast<uint32_t>(values[0] == 0 ? 1 : values[0]);
  state.ctas = static_cast<uint32_t>(values[1] == 0 ? 1 : values[1]);
  state.shared = static_cast<uint32_t>(values[2]);
}

std::string ArgNameList(const LauncherState& state) {
  std::string names;
  for (const std::string& name : state.arg_names) names += (names.empty() ? "" : ", ") + name;
  return names;
}

// The launch shared by both call shapes: `head` is (gx, gy, gz, stream),
// `kernel_args` one object per plan node. `packed` is nullptr when the
// launch metadata the launcher was built with applies (a bound launch).
PyObject* LaunchFromPython(LauncherState& state, PyObject* const* head, uint64_t function, PyObject* packed,
                 PyObject* launch_metadata, PyObject* enter_hook, PyObject* exit_hook,
                 PyObject* const* kernel_args) {
  LaunchRequest request;
  request.grid[0] = ParseGrid(head[0], "x", state);
  request.grid[1] = ParseGrid(head[1], "y", state);
  request.grid[2] = ParseGrid(head[2], "z", state);
  request.stream = reinterpret_cast<void*>(static_cast<uintptr_t>(ParseHandle(head[3], "stream", state)));
  request.kernel = FindLaunchKernel(state, function);
  if (packed != nullptr) ParsePackedMetadata(state, packed);
  request.num_warps = state.warps;
  request.num_ctas = state.ctas;
  request.shared_bytes = state.shared;
  if (enter_hook != nullptr && HookIsLive(enter_hook) && !CallHook(enter_hook, launch_metadata)) return nullptr;

  const uint32_t num_params = static_cast<uint32_t>(state.param_sizes.size());
  uint64_t stack_slots[kStackSlots];
  void* stack_params[kStackSlots];
  std::vector<uint64_t> heap_slots;
  std::vector<void*> heap_params;
  uint64_t* slots = stack_slots;
  void** params = stack_params;
  if (num_params > kStackSlots) {
    heap_slots.resize(num_params);
    heap_params.resize(num_params);
    slots = heap_slots.data();
    params = heap_params.data();
  }
  PackContext pack;
  pack.kernel = request.kernel.get();
  pack.kernel_name = &state.kernel_name;
  pack.arg_names = &state.arg_names;
  pack.slots = slots;
  pack.next = state.leading_slots;
  pack.layout = state.signature.metadata.layout;
  for (size_t i = 0; i < state.nodes.size(); ++i) {
    PackArgument(state.nodes[i], kernel_args[i], static_cast<int>(i), &pack);
  }
  for (uint32_t i = 0; i < num_params; ++i) params[i] = &slots[i];
  request.params = params;
  request.param_sizes = state.param_sizes.data();
  request.num_params = num_params;

  // The launch itself runs without the GIL (the kernel runtime may block
  // on a full queue; a submit hook may hand off to another thread).
  std::string error_message;
  ErrorKind error_kind = ErrorKind::kRuntime;
  bool failed = false;
  Py_BEGIN_ALLOW_THREADS
  try {
    Launch(*RuntimeAPI(), state.signature, request);
  } catch (...) {
    failed = true;
    error_kind = DescribeCurrentException(&error_message);
  }
  Py_END_ALLOW_THREADS
  if (failed) throw Error(error_kind, error_message);

  if (exit_hook != nullptr && HookIsLive(exit_hook) && !CallHook(exit_hook, launch_metadata)) return nullptr;
  Py_RETURN_NONE;
}

PyObject* Call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  LauncherState& state = *reinterpret_cast<PyLauncher*>(self)->state;
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  try {
    if (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0) {
      Fail(ErrorKind::kType, "devbridge: a launcher takes positional arguments only");
    }
    const Py_ssize_t expected = kFixedArgs + static_cast<Py_ssize_t>(state.nodes.size());
    if (nargs != expected) {
      if (nargs < kFixedArgs) {
        Fail(ErrorKind::kType, "devbridge: the launcher of kernel '" + state.kernel_name +
                                   "' is called as (gx, gy, gz, stream, function, packed_metadata, "
                                   "launch_metadata, enter_hook, exit_hook, *kernel_args); got " +
                                   std::to_string(nargs) + " arguments");
      }
      Fail(ErrorKind::kType, "devbridge: kernel '" + state.kernel_name + "' takes " +
                                 std::to_string(state.nodes.size()) + " arguments (" + ArgNameList(state) +
                                 "), got " + std::to_string(nargs - kFixedArgs));
    }
    return LaunchFromPython(state, args, ParseHandle(args[4], "function handle", state), args[5], args[6], args[7],
                  args[8], args + kFixedArgs);
  } catch (const PythonErrorAlreadySet&) {
    return nullptr;
  } catch (...) {
    RaiseCurrentExceptionInPython();
    return nullptr;
  }
}

// ---------------------------------------------------------------- bound launches
//
// launcher.bind(function): the launcher with its loaded kernel fixed, called
// as (gx, gy, gz, stream, *kernel_args), with the launch metadata it was
// built with and no launch hooks: the call shape of a static launcher
// (Inductor's StaticallyLaunchedCudaKernel.run), for launches that never had
// hooks or per-launch metadata to pass.

constexpr Py_ssize_t kBoundFixedArgs = 4;  // gx gy gz stream

struct PyBoundLaunch {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* launcher;  // strong reference: owns the LauncherState
  uint64_t function;
};

PyObject* CallBound(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* bound = reinterpret_cast<PyBoundLaunch*>(self);
  LauncherState& state = *reinterpret_cast<PyLauncher*>(bound->launcher)->state;
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  try {
    if (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0) {
      Fail(ErrorKind::kType, "devbridge: a bound launch takes positional arguments only");
    }
    if (nargs != kBoundFixedArgs + static_cast<Py_ssize_t>(state.nodes.size())) {
      Fail(ErrorKind::kType, "devbridge: the bound launch of kernel '" + state.kernel_name +
                                 "' is called as (gx, gy, gz, stream, " + ArgNameList(state) + "); got " +
                                 std::to_string(nargs) + " arguments");
    }
    return LaunchFromPython(state, args, bound->function, nullptr, nullptr, nullptr, nullptr, args + kBoundFixedArgs);
  } catch (const PythonErrorAlreadySet&) {
    return nullptr;
  } catch (...) {
    RaiseCurrentExceptionInPython();
    return nullptr;
  }
}

void DeallocBound(PyObject* self) {
  auto* bound = reinterpret_cast<PyBoundLaunch*>(self);
  Py_XDECREF(bound->launcher);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyObject* GetBoundFunction(PyObject* self, void*) {
  return PyLong_FromUnsignedLongLong(reinterpret_cast<PyBoundLaunch*>(self)->function);
}

PyObject* GetBoundLauncher(PyObject* self, void*) {
  PyObject* launcher = reinterpret_cast<PyBoundLaunch*>(self)->launcher;
  Py_INCREF(launcher);
  return launcher;
}

PyGetSetDef kBoundGetSet[] = {
    {"function", &GetBoundFunction, nullptr, "The loaded kernel's function handle.", nullptr},
    {"launcher", &GetBoundLauncher, nullptr, "The Launcher this launch was bound from.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMemberDef kBoundMembers[] = {
    {"__vectorcalloffset__", T_PYSSIZET, static_cast<Py_ssize_t>(offsetof(PyBoundLaunch, vectorcall)), READONLY,
     nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyType_Slot kBoundSlots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(&DeallocBound)},
    {Py_tp_call, reinterpret_cast<void*>(&PyVectorcall_Call)},
    {Py_tp_getset, kBoundGetSet},
    {Py_tp_members, kBoundMembers},
    {Py_tp_doc, const_cast<char*>("A Launcher bound to one loaded kernel: (gx, gy, gz, stream, *kernel_args).")},
    {0, nullptr},
};

PyType_Spec kBoundSpec = {
    "devbridge.triton.BoundLaunch",
    static_cast<int>(sizeof(PyBoundLaunch)),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    kBoundSlots,
};

PyTypeObject* g_bound_type = nullptr;

PyObject* Bind(PyObject* self, PyObject* arg) {
  LauncherState& state = *reinterpret_cast<PyLauncher*>(self)->state;
  try {
    const uint64_t function = ParseHandle(arg, "function handle", state);
    FindLaunchKernel(state, function);  // refuse a handle devbridge did not load, now rather than at launch
    if (g_bound_type == nullptr) {
      g_bound_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&kBoundSpec));
      if (g_bound_type == nullptr) return nullptr;
    }
    auto* bound = reinterpret_cast<PyBoundLaunch*>(g_bound_type->tp_alloc(g_bound_type, 0));
    if (bound == nullptr) return nullptr;
    bound->vectorcall = &CallBound;
    Py_INCREF(self);
    bound->launcher = self;
    bound->function = function;
    return reinterpret_cast<PyObject*>(bound);
  } catch (const PythonErrorAlreadySet&) {
    return nullptr;
  } catch (...) {
    RaiseCurrentExceptionInPython();
    return nullptr;
  }
}

// ---------------------------------------------------------------- construction

std::vector<std::string> StringList(PyObject* sequence, const char* what) {
  PyObject* fast = PySequence_Fast(sequence, what);
  if (fast == nullptr) throw PythonErrorAlreadySet();
  std::vector<std::string> out;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); ++i) {
    const char* text = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(fast, i));
    if (text == nullptr) {
      Py_DECREF(fast);
      throw PythonErrorAlreadySet();
    }
    out.emplace_back(text);
  }
  Py_DECREF(fast);
  return out;
}

uint64_t MetadataField(PyObject* metadata, const char* name, uint64_t fallback, bool required) {
  PyObject* value = PyMapping_GetItemString(metadata, name);
  if (value == nullptr) {
    PyErr_Clear();
    if (required) throw Error(ErrorKind::kValue, std::string("devbridge: launch metadata lacks '") + name + "'");
    return fallback;
  }
  uint64_t result = 0;
  if (PyBool_Check(value)) {
    result = value == Py_True ? 1 : 0;
  } else {
    const long long v = PyLong_AsLongLong(value);
    if ((v == -1 && PyErr_Occurred()) || v < 0) {
      Py_DECREF(value);
      PyErr_Clear();
      throw Error(ErrorKind::kValue,
                  std::string("devbridge: launch metadata '") + name + "' must be a non-negative int");
    }
    result = static_cast<uint64_t>(v);
  }
  Py_DECREF(value);
  return result;
}

int64_t SignedMetadataField(PyObject* metadata, const char* name) {
  PyObject* value = PyMapping_GetItemString(metadata, name);
  if (value == nullptr) {
    PyErr_Clear();
    return 0;
  }
  const long long v = PyLong_AsLongLong(value);
  Py_DECREF(value);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    throw Error(ErrorKind::kValue, std::string("devbridge: launch metadata '") + name + "' must be a 64-bit int");
  }
  return v;
}

// "layout": "triton" (default) or "ascend".
uint32_t LayoutField(PyObject* metadata) {
  PyObject* value = PyMapping_GetItemString(metadata, "layout");
  if (value == nullptr) {
    PyErr_Clear();
    return kDevbridgeLayoutTriton;
  }
  const char* text = PyUnicode_Check(value) ? PyUnicode_AsUTF8(value) : nullptr;
  const std::string layout = text ? text : "";
  Py_DECREF(value);
  if (!text) PyErr_Clear();
  if (layout == "triton") return kDevbridgeLayoutTriton;
  if (layout == "ascend") return kDevbridgeLayoutAscend;
  throw Error(ErrorKind::kValue, "devbridge: launch metadata 'layout' must be 'triton' or 'ascend', got '" +
                                     layout + "'");
}

void CheckAlign(uint64_t align, const char* name) {
  if (align == 0 || (align & (align - 1)) != 0 || align > (1u << 20)) {
    throw Error(ErrorKind::kValue, std::string("devbridge: launch metadata '") + name +
                                       "' must be a power of two up to 1 MiB, got " + std::to_string(align));
  }
}

std::unique_ptr<LauncherState> BuildState(PyObject* name, PyObject* plan, PyObject* arg_names,
                                          PyObject* metadata) {
  auto state = std::make_unique<LauncherState>();
  const char* kernel_name = PyUnicode_AsUTF8(name);
  if (kernel_name == nullptr) throw PythonErrorAlreadySet();
  state->kernel_name = kernel_name;
  if (!PyTuple_Check(plan)) throw Error(ErrorKind::kType, "devbridge: the launcher plan must be a tuple");
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(plan); ++i) {
    state->nodes.push_back(ParseArgNode(PyTuple_GET_ITEM(plan, i)));
  }
  state->arg_names = StringList(arg_names, "arg_names must be a sequence of str");
  if (state->arg_names.size() != state->nodes.size()) {
    throw Error(ErrorKind::kValue, "devbridge: the launcher plan has " + std::to_string(state->nodes.size()) +
                                       " entries but " + std::to_string(state->arg_names.size()) + " names");
  }
  if (!PyMapping_Check(metadata)) throw Error(ErrorKind::kType, "devbridge: launch metadata must be a mapping");
  DevbridgeLaunchMetadata& md = state->signature.metadata;
  md.num_warps = static_cast<uint32_t>(MetadataField(metadata, "num_warps", 4, false));
  md.num_ctas = static_cast<uint32_t>(MetadataField(metadata, "num_ctas", 1, false));
  md.shared_bytes = static_cast<uint32_t>(MetadataField(metadata, "shared", 0, false));
  md.global_scratch_size = MetadataField(metadata, "global_scratch_size", 0, false);
  md.global_scratch_align = static_cast<uint32_t>(MetadataField(metadata, "global_scratch_align", 1, false));
  md.profile_scratch_size = MetadataField(metadata, "profile_scratch_size", 0, false);
  md.profile_scratch_align = static_cast<uint32_t>(MetadataField(metadata, "profile_scratch_align", 1, false));
  CheckAlign(md.global_scratch_align, "global_scratch_align");
  CheckAlign(md.profile_scratch_align, "profile_scratch_align");
  if (MetadataField(metadata, "launch_cooperative_grid", 0, false)) md.flags |= DEVBRIDGE_LAUNCH_COOPERATIVE;
  if (MetadataField(metadata, "launch_pdl", 0, false)) md.flags |= DEVBRIDGE_LAUNCH_PDL;
  md.layout = LayoutField(metadata);
  const bool ascend = md.layout == kDevbridgeLayoutAscend;
  static const char* const kAscendOnly[] = {"workspace_size", "lock_num", "lock_init_value", "ffts",
                                            "simt_only", "cap_blocks", "vector_cores"};
  for (const char* key : kAscendOnly) {
    if (!ascend && PyMapping_HasKeyString(metadata, key)) {
      throw Error(ErrorKind::kValue, std::string("devbridge: launch metadata '") + key +
                                         "' belongs to the Ascend layout; pass layout='ascend' with it");
    }
  }
  if (ascend) {
    if (md.global_scratch_size > 0 || md.profile_scratch_size > 0) {
      throw Error(ErrorKind::kValue, "devbridge: the Ascend layout has no global/profile scratch; "
                                     "an Ascend kernel's scratch is its workspace (workspace_size)");
    }
    if (md.flags != 0) {
      throw Error(ErrorKind::kValue, "devbridge: launch_cooperative_grid and launch_pdl do not apply to "
                                     "the Ascend layout");
    }
    md.workspace_size = MetadataField(metadata, "workspace_size", 0, false);
    md.lock_num = MetadataField(metadata, "lock_num", 0, false);
    md.lock_init_value = SignedMetadataField(metadata, "lock_init_value");
    if (MetadataField(metadata, "ffts", 0, false)) md.flags |= DEVBRIDGE_LAUNCH_ASCEND_FFTS;
    if (MetadataField(metadata, "simt_only", 0, false)) md.flags |= DEVBRIDGE_LAUNCH_ASCEND_SIMT_ONLY;
    if (MetadataField(metadata, "cap_blocks", 0, false)) md.flags |= DEVBRIDGE_LAUNCH_ASCEND_CAP_BLOCKS;
    if (MetadataField(metadata, "vector_cores", 0, false)) md.flags |= DEVBRIDGE_LAUNCH_ASCEND_VECTOR_CORES;
    if ((md.flags & DEVBRIDGE_LAUNCH_ASCEND_SIMT_ONLY) && (md.workspace_size > 0 || md.lock_num > 0)) {
      throw Error(ErrorKind::kValue, "devbridge: a simt_only Ascend kernel has no lock and workspace slots, "
                                     "but its metadata asks for workspace_size or lock_num");
    }
  }
  state->warps = md.num_warps == 0 ? 1 : md.num_warps;
  state->ctas = md.num_ctas == 0 ? 1 : md.num_ctas;
  state->shared = md.shared_bytes;
  for (const ArgNode& node : state->nodes) FlattenArgNode(node, &state->param_types);
  const LayoutSlots slots = SlotsOf(md);
  state->leading_slots = slots.leading;
  for (uint32_t i = 0; i < slots.leading; ++i) state->param_sizes.push_back(sizeof(void*));  // ffts, lock, ws
  for (DevbridgeArgType type : state->param_types) state->param_sizes.push_back(ParamSize(md.layout, type));
  // Triton: global and profile scratch pointers; Ascend: gridX, gridY, gridZ (int32).
  for (uint32_t i = 0; i < slots.trailing; ++i) state->param_sizes.push_back(ascend ? 4 : sizeof(void*));
  state->signature.num_params = static_cast<uint32_t>(state->param_types.size());
  state->signature.param_types = state->param_types.data();
  return state;
}

PyObject* NewFromPlan(PyTypeObject* type, PyObject* name, PyObject* plan, PyObject* arg_names,
                      PyObject* metadata) {
  try {
    std::unique_ptr<LauncherState> state = BuildState(name, plan, arg_names, metadata);
    auto* self = reinterpret_cast<PyLauncher*>(type->tp_alloc(type, 0));
    if (self == nullptr) return nullptr;
    self->vectorcall = &Call;
    self->state = state.release();
    return reinterpret_cast<PyObject*>(self);
  } catch (const PythonErrorAlreadySet&) {
    return nullptr;
  } catch (...) {
    RaiseCurrentExceptionInPython();
    return nullptr;
  }
}

// Launcher(src, metadata): Triton's constructor. devbridge.triton._describe
// turns Triton's objects into (name, plan, arg_names, metadata mapping).
PyObject* New(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject* src = nullptr;
  PyObject* metadata = nullptr;
  static const char* keywords[] = {"src", "metadata", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:Launcher", const_cast<char**>(keywords), &src, &metadata)) {
    return nullptr;
  }
  PyObject* module = PyImport_ImportModule("devbridge.triton._describe");
  if (module == nullptr) return nullptr;
  PyObject* described = PyObject_CallMethod(module, "describe", "OO", src, metadata);
  Py_DECREF(module);
  if (described == nullptr) return nullptr;
  PyObject* result = nullptr;
  if (!PyTuple_Check(described) || PyTuple_GET_SIZE(described) != 4) {
    PyErr_SetString(PyExc_RuntimeError, "devbridge.triton._describe.describe must return 4 items");
  } else {
    result = NewFromPlan(type, PyTuple_GET_ITEM(described, 0), PyTuple_GET_ITEM(described, 1),
                         PyTuple_GET_ITEM(described, 2), PyTuple_GET_ITEM(described, 3));
  }
  Py_DECREF(described);
  return result;
}

PyObject* FromPlan(PyObject* cls, PyObject* args) {
  PyObject *name, *plan, *arg_names, *metadata;
  if (!PyArg_ParseTuple(args, "UOOO:_from_plan", &name, &plan, &arg_names, &metadata)) return nullptr;
  return NewFromPlan(reinterpret_cast<PyTypeObject*>(cls), name, plan, arg_names, metadata);
}

void Dealloc(PyObject* self) {
  auto* launcher = reinterpret_cast<PyLauncher*>(self);
  if (launcher->state != nullptr) {
    Py_XDECREF(launcher->state->cached_packed);
    delete launcher->state;
  }
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);  // instances of heap types own a reference to their type
}

// ---------------------------------------------------------------- introspection

PyObject* GetSignature(PyObject* self, void*) {
  const LauncherState& state = *reinterpret_cast<PyLauncher*>(self)->state;
  PyObject* result = PyTuple_New(static_cast<Py_ssize_t>(state.param_types.size()));
  if (result == nullptr) return nullptr;
  for (size_t i = 0; i < state.param_types.size(); ++i) {
    const DevbridgeArgType t = state.param_types[i];
    PyObject* name = PyUnicode_FromString(t == kDevbridgeArgPointer ? "*" : ArgTypeName(t));
    if (name == nullptr) {
      Py_DECREF(result);
      return nullptr;
    }
    PyTuple_SET_ITEM(result, static_cast<Py_ssize_t>(i), name);
  }
  return result;
}

PyObject* GetParamSizes(PyObject* self, void*) {
  const LauncherState& state = *reinterpret_cast<PyLauncher*>(self)->state;
  PyObject* result = PyTuple_New(static_cast<Py_ssize_t>(state.param_sizes.size()));
  if (result == nullptr) return nullptr;
  for (size_t i = 0; i < state.param_sizes.size(); ++i) {
    PyTuple_SET_ITEM(result, static_cast<Py_ssize_t>(i), PyLong_FromSize_t(state.param_sizes[i]));
  }
  return result;
}

PyObject* GetKernelName(PyObject* self, void*) {
  return PyUnicode_FromString(reinterpret_cast<PyLauncher*>(self)->state->kernel_name.c_str());
}

PyObject* GetMetadata(PyObject* self, void*) {
  const DevbridgeLaunchMetadata& md = reinterpret_cast<PyLauncher*>(self)->state->signature.metadata;
  if (md.layout == kDevbridgeLayoutAscend) {
    return Py_BuildValue("{s:s,s:I,s:K,s:K,s:L,s:O,s:O,s:O,s:O}", "layout", "ascend", "num_warps", md.num_warps,
                         "workspace_size", static_cast<unsigned long long>(md.workspace_size), "lock_num",
                         static_cast<unsigned long long>(md.lock_num), "lock_init_value",
                         static_cast<long long>(md.lock_init_value), "ffts",
                         (md.flags & DEVBRIDGE_LAUNCH_ASCEND_FFTS) ? Py_True : Py_False, "simt_only",
                         (md.flags & DEVBRIDGE_LAUNCH_ASCEND_SIMT_ONLY) ? Py_True : Py_False, "cap_blocks",
                         (md.flags & DEVBRIDGE_LAUNCH_ASCEND_CAP_BLOCKS) ? Py_True : Py_False, "vector_cores",
                         (md.flags & DEVBRIDGE_LAUNCH_ASCEND_VECTOR_CORES) ? Py_True : Py_False);
  }
  return Py_BuildValue("{s:I,s:I,s:I,s:K,s:I,s:K,s:I,s:O,s:O}", "num_warps", md.num_warps, "num_ctas",
                       md.num_ctas, "shared", md.shared_bytes, "global_scratch_size",
                       static_cast<unsigned long long>(md.global_scratch_size), "global_scratch_align",
                       md.global_scratch_align, "profile_scratch_size",
                       static_cast<unsigned long long>(md.profile_scratch_size), "profile_scratch_align",
                       md.profile_scratch_align, "launch_cooperative_grid",
                       (md.flags & DEVBRIDGE_LAUNCH_COOPERATIVE) ? Py_True : Py_False, "launch_pdl",
                       (md.flags & DEVBRIDGE_LAUNCH_PDL) ? Py_True : Py_False);
}

PyGetSetDef kGetSet[] = {
    {"signature", &GetSignature, nullptr,
     "Flattened parameter types without the two scratch pointers ('*' for pointers).", nullptr},
    {"param_sizes", &GetParamSizes, nullptr,
     "Bytes of every slot of the kernel's layout: Triton, its parameters and the two scratch pointers; "
     "Ascend, [ffts] [lock, workspace], its parameters, gridX, gridY, gridZ.", nullptr},
    {"kernel_name", &GetKernelName, nullptr, "The kernel's name.", nullptr},
    {"metadata", &GetMetadata, nullptr, "The launch metadata the launcher was built with.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMethodDef kMethods[] = {
    {"_from_plan", &FromPlan, METH_VARARGS | METH_CLASS,
     "_from_plan(name, plan, arg_names, metadata): build from an argument plan (see "
     "src/python/py_args.h) and a metadata mapping."},
    {"bind", &Bind, METH_O,
     "bind(function) -> BoundLaunch: this launcher with the loaded kernel `function` fixed, called as\n"
     "(gx, gy, gz, stream, *kernel_args) with the metadata it was built with and no launch hooks."},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef kMembers[] = {
    // Tells CPython where the vectorcall pointer lives (heap types, 3.9+).
    {"__vectorcalloffset__", T_PYSSIZET, static_cast<Py_ssize_t>(offsetof(PyLauncher, vectorcall)), READONLY,
     nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

const char kDoc[] =
    "Launcher(src, metadata): devbridge's generic launcher for one compiled Triton kernel.\n\n"
    "Called as Triton calls launchers: (gx, gy, gz, stream, function, packed_metadata,\n"
    "launch_metadata, enter_hook, exit_hook, *kernel_args). `function` is a handle from the\n"
    "devbridge driver's utils.load_binary; `stream` a native stream handle of the kernel's device.";

PyType_Slot kSlots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(&Dealloc)},
    {Py_tp_call, reinterpret_cast<void*>(&PyVectorcall_Call)},
    {Py_tp_new, reinterpret_cast<void*>(&New)},
    {Py_tp_getset, kGetSet},
    {Py_tp_methods, kMethods},
    {Py_tp_members, kMembers},
    {Py_tp_doc, const_cast<char*>(kDoc)},
    {0, nullptr},
};

PyType_Spec kSpec = {
    "devbridge.triton.Launcher",
    static_cast<int>(sizeof(PyLauncher)),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    kSlots,
};

PyTypeObject* g_launcher_type = nullptr;

// plugin_current_device_key(keys): keys[current device], the driver's
// canonical device objects (bound with functools.partial, so Triton's JIT
// gets its device key without a Python frame).
PyObject* PluginCurrentDeviceKey(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 1 || !PyList_CheckExact(args[0])) {
    PyErr_SetString(PyExc_TypeError, "plugin_current_device_key(keys) takes one list");
    return nullptr;
  }
  try {
    const long index = DeviceRuntime::For(c10::DeviceType::PrivateUse1).CurrentDevice();
    if (index < 0 || index >= PyList_GET_SIZE(args[0])) return PyLong_FromLong(index);
    PyObject* key = PyList_GET_ITEM(args[0], index);
    Py_INCREF(key);
    return key;
  } catch (...) {
    RaiseCurrentExceptionInPython();
    return nullptr;
  }
}

// current_stream(device=None, device_type=None): the native handle of the
// current stream of device_type:device. The one current-stream binding: the
// public devbridge.current_stream and graphs pass both, Triton's driver and
// Inductor's get_raw_stream call it with the index alone (device_type None:
// the PrivateUse1 plugin), once per launch, hence METH_FASTCALL.
PyObject* CurrentStream(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs > 2) {
    PyErr_SetString(PyExc_TypeError,
                    "current_stream(device=None, device_type=None) takes at most two arguments");
    return nullptr;
  }
  try {
    c10::DeviceType type = c10::DeviceType::PrivateUse1;
    if (nargs == 2 && args[1] != Py_None) {
      if (!PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "current_stream: device_type must be a str such as 'cpu' or "
                                         "the plugin's name, or None for the PrivateUse1 plugin");
        return nullptr;
      }
      const char* name = PyUnicode_AsUTF8(args[1]);
      if (name == nullptr) return nullptr;
      type = python::ParseDeviceType(name);
    }
    const DeviceRuntime& runtime = DeviceRuntime::For(type);
    c10::DeviceIndex index;
    if (nargs == 0 || args[0] == Py_None) {
      index = runtime.CurrentDevice();
    } else {
      const long value = PyLong_AsLong(args[0]);
      if (value == -1 && PyErr_Occurred()) return nullptr;
      if (value < 0 || value > 127) {
        PyErr_Format(PyExc_ValueError, "devbridge: device index %ld is out of range", value);
        return nullptr;
      }
      index = static_cast<c10::DeviceIndex>(value);
    }
    // The GIL stays held: the query is non-blocking and releasing it would
    // cost more than the query (a Python resolver re-enters it, which is allowed).
    return PyLong_FromVoidPtr(runtime.CurrentNativeStream(index));
  } catch (...) {
    RaiseCurrentExceptionInPython();
    return nullptr;
  }
}

PyMethodDef kHotPath[] = {
    {"plugin_current_device_key",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&PluginCurrentDeviceKey)), METH_FASTCALL,
     "keys[the calling thread's current PrivateUse1 device index] (the index itself beyond the list)."},
    {"current_stream", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&CurrentStream)), METH_FASTCALL,
     "current_stream(device=None, device_type=None): the native handle of the current stream of "
     "device_type:device (device_type None: the PrivateUse1 plugin; device None: its current device; "
     "0 for cpu)."},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

PyMethodDef* HotPathFunctions() { return kHotPath; }

PyTypeObject* LauncherType() {
  if (g_launcher_type == nullptr) {
    g_launcher_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&kSpec));
  }
  return g_launcher_type;  // nullptr with a Python error set when creation failed
}

void SetHookChainType(PyObject* type) {
  Py_XINCREF(type);
  Py_XSETREF(g_hook_chain_type, type);
}

}  // namespace launch
}  // namespace devbridge
