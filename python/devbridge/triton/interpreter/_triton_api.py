"""Every private Triton name the interpreter Triton target touches, in one place, with
the Triton versions each was checked on (3.6.0, 3.7.1 and 3.8.0; the files are
python/triton/runtime/interpreter.py and runtime/jit.py of each).

The other modules of this package reach Triton's interpreter only through
interpreter() (the module, once this Triton was checked) and the functions
below; what each of them reads of it:

  interpreter.py   _patch_lang(fn) (a _LangPatchScope with set_attr / restore
                   and its _changes list of (owner, name, original), with
                   _MISSING for an attribute that did not exist; of fn it reads
                   only __globals__, for the triton.language and
                   triton.language.core to patch), _implicit_cvt(arg),
                   TensorHandle(data, dtype), InterpreterOptions (its
                   supported_fp8_dtypes and deprecated_fp8_dot_operand_dtypes),
                   InterpreterBuilder().codegen_fns["min_dot_size"],
                   interpreter_builder.set_grid_dim(x, y, z) / .set_grid_idx(x,
                   y, z) and .options (an InterpreterOptions dataclass, replaced
                   during a launch with the specialization's debug and
                   sanitize_overflow); GridExecutor's convention of passing
                   constexpr-annotated parameters raw and converting the others;
                   interpreter_semantic.make_tensor_descriptor(base, shape,
                   strides, block_shape, padding_option), as _implicit_cvt
                   calls it for a host TensorDescriptor
  source.py        FunctionRewriter.ast_transformer (an ast.NodeTransformer
                   instance), interpreter_semantic
  memory.py        InterpreterBuilder.create_masked_load(ptrs, mask, other,
                   cache_modifier, eviction_policy, is_volatile),
                   create_masked_store(ptrs, value, mask, cache_modifier,
                   eviction_policy), create_atomic_rmw(rmwOp, ptr, val, mask,
                   sem, scope) (rmwOp an ir.ATOMIC_OP, of which it reads
                   .name for messages), create_atomic_cas(ptr, cmp, val, sem,
                   scope), TensorHandle(data, dtype) with .data a numpy array
                   (pointers uint64) and .get_element_ty(), _get_np_dtype (the
                   element a load reads per lane, what create_masked_load
                   passes the C++ load)
  dot.py           InterpreterBuilder.create_dot(a, b, d, input_precision,
                   max_num_imprecise_acc) (np.matmul of the handles'
                   arrays), TensorHandle.get_element_ty(), bfloat16 kept as
                   uint16 bits (_get_np_dtype)
  casts.py         InterpreterBuilder.create_fp_trunc(src, dst_type),
                   create_fp_ext(src, dst_type), create_fp_to_fp(src,
                   dst_type, rounding_mode), create_si_to_fp / create_ui_to_fp
                   / create_fp_to_si / create_fp_to_ui(src, dst_type): class
                   attributes, with dst_type a tl type (block or scalar, read
                   through .scalar) and rounding_mode None or a
                   libtriton ir.ROUNDING_MODE (read by its .name, RTNE / RTZ);
                   which of them language/semantic.py's cast calls for which
                   pair of types (identical in the three versions), and the
                   interpreter's convert_custom_types (ExtraFunctions), which
                   sends fp8e4b15 to create_fp_to_fp; TensorHandle(data, dtype)
                   with bfloat16 kept as uint16 bits and fp8 as uint8
                   (_get_np_dtype)
  narrow_floats.py InterpreterBuilder.create_fadd / create_fsub /
                   create_fmul / create_fdiv / create_minimumf /
                   create_minnumf / create_maximumf / create_maxnumf and
                   create_fcmp{OLT,OGT,OLE,OGE,OEQ,UNE} (the predicates
                   language/semantic.py builds)(lhs, rhs): class attributes,
                   numpy on the handles' arrays, the result typed as lhs
                   (a comparison's data bool); create_clampf(arg, lo, hi,
                   propagate_nans) with propagate_nans a tl.PropagateNan;
                   create_fma(x, y, z); create_fneg(arg) (3.8.0 only; 3.6.0
                   and 3.7.1 negate as 0 - x); create_atomic_rmw (as for
                   memory.py) and create_atomic_cas(ptr, cmp, val, sem,
                   scope) (bitwise, 16-bit elements included); no get_bf16
                   (language/semantic.py's scalar_constant calls it: added);
                   ReduceOps.sum(self, input) and .min_max(self, input,
                   val_reduce_op, idx_reduce_op) with .axis, .keep_dims and
                   .to_tensor(ret, dtype), ScanOps.cumsum / .cumprod(self,
                   input) returning a list, with .axis (apply_impl flips
                   around them for reverse): the fast paths of the
                   interpreter's tl.reduce / tl.associative_scan;
                   TensorHandle(data, dtype) with dtype a scalar tl type read
                   by its .name, bfloat16 kept as uint16 bits and fp8 as
                   uint8 (_get_np_dtype)
  libdevice.py     InterpreterBuilder.create_extern_elementwise(libName,
                   libPath, symbol, argList, retType, isPure), _get_np_dtype,
                   interpreter_semantic; the modules
                   triton.language.extra.libdevice (device-neutral stubs) and
                   triton.language.extra.cuda.libdevice (each function takes
                   `_semantic=`)

and of triton.runtime.jit (normalize_ty, jit_function): _normalize_ty, and
JITFunction's src / raw_src / starting_line_number / fn / arg_names, with
JITFunction.__call__ replaced during a launch only, so helper @triton.jit
functions a kernel calls run interpreted (what InterpretedFunction.__call__
does, under the launch's patches).

The kernel's source at compile time comes from devbridge's public
devbridge.triton.compiling_source(); compiler.py relies on triton.compile
calling the backend's add_stages before the source's make_ir (the front end),
as 3.6.0, 3.7.1 and 3.8.0 do (python/triton/compiler/compiler.py, compile()), to run
that front end outside interpreted launches. A Triton outside the checked versions is
refused, naming them, before any of these is read.
"""

from __future__ import annotations

CHECKED_VERSIONS = ((3, 6), (3, 7), (3, 8))
#: The opt-in devbridge documents for an unchecked torch or Triton; the
#: interpreter target honours the same one, with its own warning.
ALLOW_UNCHECKED_ENV = "DEVBRIDGE_ALLOW_UNCHECKED_VERSIONS"

_checked = None  # the interpreter module, once the version was checked


def _major_minor(version: str) -> tuple[int, int]:
    parts = version.split("+")[0].split(".")
    return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)


def _allow_unchecked() -> bool:
    import os

    return os.environ.get(ALLOW_UNCHECKED_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def interpreter():
    """triton.runtime.interpreter, after checking this Triton's version."""
    global _checked
    if _checked is None:
        import triton

        if _major_minor(triton.__version__) not in CHECKED_VERSIONS:
            checked = ", ".join(f"{a}.{b}" for a, b in CHECKED_VERSIONS)
            if not _allow_unchecked():
                raise RuntimeError(f"devbridge: Triton {triton.__version__} is not a release the interpreter Triton "
                                   f"target was checked on ({checked}); install one of those (pip install triton==3.8.0), or "
                                   f"set {ALLOW_UNCHECKED_ENV}=1 to try this one anyway")
            import warnings

            warnings.warn(f"devbridge: running the interpreter Triton target on Triton {triton.__version__}, "
                          f"which it was not checked on ({checked}), because {ALLOW_UNCHECKED_ENV} is set", RuntimeWarning)
        import triton.runtime.interpreter as module

        _checked = module
    return _checked


def tensor_descriptor_flags() -> int:
    """How many i1 flags follow the strides of a host TensorDescriptor in the
    kernel's parameters without TMA: padding == "nan" in Triton 3.6, and
    round_f32_to_tf32 after it from 3.7 (third_party/nvidia/backend/driver.py,
    make_tensordesc_arg, of each)."""
    import triton

    interpreter()
    return 1 if _major_minor(triton.__version__) < (3, 7) else 2


def make_tensor_descriptor(**arguments):
    """triton.runtime.interpreter.interpreter_semantic.make_tensor_descriptor:
    what the interpreter makes of a host TensorDescriptor (base, shape,
    strides, block_shape, padding_option)."""
    return interpreter().interpreter_semantic.make_tensor_descriptor(**arguments)


def normalize_ty(ty):
    """triton.runtime.jit._normalize_ty: an annotation as the JIT reads it ("constexpr", "*fp32", ...)."""
    interpreter()
    from triton.runtime.jit import _normalize_ty

    return _normalize_ty(ty)


def jit_function():
    """triton.runtime.jit.JITFunction, whose __call__ a launch replaces."""
    interpreter()
    from triton.runtime.jit import JITFunction

    return JITFunction


def language_tensor():
    """triton.language.tensor, whose __index__ a launch replaces (Triton 3.6's
    interpreter sets one that NumPy 2 refuses: interpreter._index)."""
    interpreter()
    import triton.language as tl

    return tl.tensor


def libdevice_modules():
    """(the device-neutral libdevice stubs, NVIDIA's libdevice or None where
    this Triton lacks the NVIDIA backend)."""
    interpreter()
    import triton.language.extra.libdevice as stubs

    try:
        import triton.language.extra.cuda.libdevice as cuda
    except ImportError:
        cuda = None
    return stubs, cuda
