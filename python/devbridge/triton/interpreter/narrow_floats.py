"""Arithmetic on bfloat16 (and fp8) values for the interpreter Triton target, as a GPU computes it.

Triton's interpreter keeps bfloat16 values as their bits in numpy uint16
arrays and fp8 values in uint8 arrays (it has no such numpy types), and its
builder computes with numpy on whatever arrays it holds: on bfloat16 `a + b`
added the bit patterns as integers, `a < b` compared them as unsigned
integers (wrong for every negative value), tl.sum summed them, `a * 2.0`
failed (the builder has no get_bf16), and tl.atomic_add raised "Unsupported
data type" (Triton 3.6.0, 3.7.1 and 3.8.0 alike). During an interpreted launch
the builder methods below compute on the values instead, with what Triton's
NVIDIA backend makes a Hopper GPU (sm_90) compute; every other type goes to
the interpreter's own method after one dtype check.

bfloat16, as sm_90 computes it (third_party/nvidia/lib/TritonNVIDIAGPUToLLVM/
ElementwiseOpToLLVM.cpp maps arith.addf/subf/mulf to LLVM's fadd/fsub/fmul,
which NVPTX selects as add.rn.bf16 / sub.rn.bf16 / mul.rn.bf16 on sm_90;
math.fma is fma.rn.bf16):
  + - * and comparisons: computed in float32 from the exact widened values,
      rounded to nearest even once; float32's 24 bits make this double
      rounding innocuous for one +, -, * of 8-bit significands, so the result
      is the PTX instruction's single correctly rounded bfloat16.
  tl.fma: fma.rn.bf16, one rounding of the exact a*b+c (float64 rounded to
      odd, then to bfloat16: exact for every input).
  unary minus: Triton 3.6/3.7 emit 0 - x (so -(+0) is +0, as on the GPU);
      3.8 emits neg, a sign flip.
  NaN results are the canonical NaN 0x7fff, as casts.py documents for the
      conversions.
  tl.fdiv (`/` itself promotes to float32): the backend cannot compile it
      (FDivOpConversion lowers 32 and 64 bits only: "Unsupported bitwidth"),
      so it is refused here, naming the fix.
  constants (`a * 2.0`, tl.full(..., 1.5, tl.bfloat16)): python/src/ir.cc's
      get_bf16 takes a C float and parses std::to_string of it (printf's "%f",
      six decimals) as a bfloat16: 2.5 is 2.5, but 1e-7 is 0 and 4.9768e-05
      (read as 0.000050) is 5.0068e-05, not 4.9829e-05, on a GPU and here
      alike (NaN is 0x7fc0, APFloat's quiet NaN).
  tl.minimum / tl.maximum / tl.clamp, tl.max / tl.min / tl.argmax /
      tl.argmin, tl.cumsum / tl.cumprod: the front end promotes bfloat16 to
      float32 first (language/core.py, language/standard.py). The float
      min/max/clamp builder methods are set to LLVM's semantics here for
      every float type: minnum/maxnum (the default) return the number where
      one operand is NaN, which Triton 3.6/3.7's interpreter did not
      (np.minimum / np.clip; 3.8's uses np.fmin / np.fmax, as here).
  tl.sum (not promoted): the GPU's reduction combines in bfloat16, rounding
      at every step, in an order its layout decides; here the combines are a
      pairwise tree halving the axis (a warp's butterfly shuffles when the
      axis lies one element per lane), each rounded. Sums whose partial sums
      round may differ from a GPU's in the last bits where its layout
      combines in another order. tl.reduce with a combine function of its
      own: the interpreter's sequential loop, through the methods here.
  tl.associative_scan with the sum or product combine: sequential, each step
      rounded.
  tl.atomic_add (atom.add.noftz.bf16): each lane's add rounded once; lanes
      of one launch that hit the same address are applied in lane order,
      each seeing the previous one's result, through the interpreter's atomic
      compare-and-swap (so concurrent writers are not lost).
Math functions (tl.exp, tl.sqrt, ...) take float32 and float64 only: the
front end refuses bfloat16 for them on every target.

fp8 (float8e4nv, float8e5, float8e4b15): the front end types same-type fp8
arithmetic as fp8, but no Triton backend lowers it (fp8 values are i8 in
LLVM: "'llvm.fadd' op operand #0 must be floating point", triton-lang/triton
#11898): + - * fma, unary minus, comparisons, tl.sum and sum/product scans of
fp8 are refused, naming the fix. tl.minimum / tl.maximum / tl.clamp (not
promoted for fp8), which the issue reports as compiling, and tl.reduce with
the min/max combines compute on the values (exact).

The interpreter's names it uses are listed, with the Triton versions
checked, in _triton_api.
"""

from __future__ import annotations

import numpy as np

from . import _triton_api
from . import casts as _casts

_BF16 = "bf16"
_FP8 = frozenset({"fp8e4nv", "fp8e5", "fp8e4b15"})
_NARROW = _FP8 | {_BF16}  # the names of the float types the interpreter keeps as bits
_CANONICAL_NAN = np.uint16(0x7FFF)
_TL_NAMES = {"bf16": "bfloat16", "fp8e4nv": "float8e4nv", "fp8e5": "float8e5", "fp8e4b15": "float8e4b15"}


def _widen(data, name: str) -> np.ndarray:
    """The float32 values of bfloat16 / fp8 bits (exact)."""
    if name == _BF16:
        return _casts.bfloat16_to_float32(data)
    return _casts._fp_to_fp(name, "fp32", data, None)


def _narrow(values, name: str) -> np.ndarray:
    """float32 values as bfloat16 / fp8 bits, rounded to nearest even (NaN: 0x7fff for bfloat16)."""
    if name == _BF16:
        return _casts._float32_to_bfloat16(values, rtz=False)
    return _casts._fp_to_fp("fp32", name, values, None)


def _bf16_add(a_bits, b_bits) -> np.ndarray:
    """add.rn.bf16 of bits."""
    return _narrow(_widen(a_bits, _BF16) + _widen(b_bits, _BF16), _BF16)


def _refused(what: str, name: str, why: str, fix: str):
    return NotImplementedError(f"devbridge: Triton's NVIDIA backend cannot compile {what} on {_TL_NAMES[name]} "
                               f"operands ({why}), so the interpreter Triton target refuses it too; {fix}")


def _fp8_refused(what: str, name: str):
    return _refused(what, name, "fp8 values are bytes in its LLVM lowering: 'llvm.fadd' op operand #0 must be "
                    "floating point; triton-lang/triton#11898",
                    "convert to float16 or float32 first (x.to(tl.float32)) and back after")


def _fma_bf16(x, y, z) -> np.ndarray:
    """fma.rn.bf16: x*y+z rounded once. x*y is exact in float64 (16-bit significands);
    the sum is rounded to odd there (TwoSum's error decides), after which rounding to
    bfloat16's 8 bits gives the correctly rounded result."""
    product = _widen(x, _BF16).astype(np.float64) * _widen(y, _BF16).astype(np.float64)
    addend = _widen(z, _BF16).astype(np.float64)
    total = product + addend
    partial = total - product
    error = (product - (total - partial)) + (addend - partial)
    even = (total.view(np.uint64) & np.uint64(1)) == 0
    to_odd = (error != 0) & np.isfinite(total) & even
    total = np.where(to_odd, np.nextafter(total, np.where(error > 0, np.inf, -np.inf)), total)
    bits = _casts._float_to_float(total, "fp64", "bf16")
    return np.where(np.isnan(total), _CANONICAL_NAN, bits).astype(np.uint16)


def _bf16_constant(value) -> np.ndarray:
    """get_bf16 of python/src/ir.cc: APFloat(BFloat16, std::to_string((float) value))."""
    with np.errstate(over="ignore"):
        single = np.float32(value)  # the C float parameter: nearest, overflow to inf
    if np.isnan(single):
        return np.array([0xFFC0 if np.signbit(single) else 0x7FC0], dtype=np.uint16)
    text = "%f" % float(single)  # std::to_string(float) is sprintf("%f")
    return _casts._float_to_float(np.array([float(text)]), "fp64", "bf16").astype(np.uint16)


# ---------------------------------------------------------------- reductions and scans


def _tree_sum_bf16(bits: np.ndarray, axis: int) -> np.ndarray:
    """The bfloat16 sum of `bits` along `axis`: halves added pairwise, each add rounded."""
    rest = np.moveaxis(bits, axis, 0)
    while rest.shape[0] > 1:
        half = rest.shape[0] // 2
        summed = _bf16_add(rest[:half], rest[half:2 * half])
        rest = summed if rest.shape[0] % 2 == 0 else np.concatenate([summed, rest[2 * half:]])
    return rest[0]


def _sequential_scan_bf16(bits: np.ndarray, axis: int, combine) -> np.ndarray:
    rest = np.moveaxis(bits, axis, 0)
    out = np.empty_like(rest)
    out[0] = accumulated = rest[0]
    for i in range(1, rest.shape[0]):
        widened = combine(_widen(accumulated, _BF16), _widen(rest[i], _BF16))
        out[i] = accumulated = _narrow(widened, _BF16)
    return np.moveaxis(out, 0, axis)


# ---------------------------------------------------------------- atomics


def _atomic_add_bf16(builder, ptr, val, mask, sem, scope_):
    """tl.atomic_add on bfloat16 through the builder's atomic_cas. Lanes are grouped by
    address; each group's chain of rounded adds is computed from the value the first
    compare-and-swap reads, then swapped in at once; a group whose memory another
    writer changed meanwhile is recomputed from what the swap found."""
    TensorHandle = _triton_api.interpreter().TensorHandle  # noqa: N806 (a class)
    shape = np.broadcast_shapes(np.shape(ptr.data), np.shape(val.data), np.shape(mask.data))
    pointers = np.broadcast_to(ptr.data, shape).reshape(-1)
    values = np.broadcast_to(val.data, shape).reshape(-1)
    lanes = np.flatnonzero(np.broadcast_to(np.asarray(mask.data, dtype=bool), shape))
    old = np.zeros(pointers.size, dtype=np.uint16)  # masked-out lanes return 0
    if lanes.size:
        order = lanes[np.argsort(pointers[lanes], kind="stable")]  # by address, lane order within one
        addresses = pointers[order]
        first = np.flatnonzero(np.r_[True, addresses[1:] != addresses[:-1]])
        group = np.cumsum(np.r_[True, addresses[1:] != addresses[:-1]]) - 1
        rank = np.arange(order.size) - first[group]  # position of each lane in its address's chain
        by_rank = [np.flatnonzero(rank == r) for r in range(int(rank.max()) + 1)]

        def swap(targets, expected, new):
            handle = builder.create_atomic_cas(TensorHandle(addresses[first[targets]], ptr.dtype),
                                               TensorHandle(expected, val.dtype), TensorHandle(new, val.dtype),
                                               sem, scope_)
            return np.asarray(handle.data, dtype=np.uint16).reshape(-1)

        groups = np.arange(first.size)
        zeros = np.zeros(first.size, dtype=np.uint16)
        current = swap(groups, zeros, zeros)  # an atomic read: swaps 0 for 0 or changes nothing
        while groups.size:
            start = np.zeros(first.size, dtype=np.uint16)
            start[groups] = current
            accumulated = start.copy()
            chosen = np.zeros(first.size, dtype=bool)
            chosen[groups] = True
            for members in by_rank:
                members = members[chosen[group[members]]]
                owners = group[members]
                old[order[members]] = accumulated[owners]
                accumulated[owners] = _bf16_add(accumulated[owners], values[order[members]])
            found = swap(groups, start[groups], accumulated[groups])
            lost = found != start[groups]
            groups, current = groups[lost], found[lost]
    return TensorHandle(old.reshape(shape), val.dtype)


# ---------------------------------------------------------------- installing


# the predicates language/semantic.py builds (3.6.0, 3.7.1, 3.8.0): the others are never called
_FCMP = ("OLT", "OGT", "OLE", "OGE", "OEQ", "UNE")
_ARITHMETIC = {"create_fadd": np.add, "create_fsub": np.subtract, "create_fmul": np.multiply}
_SYMBOLS = {"create_fadd": "+", "create_fsub": "-", "create_fmul": "*"}
# LLVM's minnum/maxnum (tl.minimum / tl.maximum by default; PTX min/max) return the number
# where one operand is NaN, minimum/maximum (propagate_nan=tl.PropagateNan.ALL; min/max.NaN)
# return NaN. Triton 3.6/3.7's interpreter uses np.minimum/np.maximum for both, for every
# float type: set right here for all of them (3.8's uses np.fmin/np.fmax, as here).
_MIN_MAX = {"create_minnumf": np.fmin, "create_maxnumf": np.fmax, "create_minimumf": np.minimum,
            "create_maximumf": np.maximum}


_ABSENT = object()
_recorded = None  # [(owner, name, original or _ABSENT, replacement)], built at the first launch


class _Recorder:
    """What _build sets, recorded with the originals it replaces (nothing is set)."""

    def __init__(self):
        self.entries = []

    def set_attr(self, owner, name, value):
        self.entries.append((owner, name, getattr(owner, name, _ABSENT), value))


def patch(scope) -> None:
    """Install the value arithmetic for the launch (undone by scope.restore()). The
    replacements are built once and set again at every launch while the builder's
    methods are still the ones they wrap (a launch's fixed cost)."""
    global _recorded
    if _recorded is None or any(getattr(owner, name, _ABSENT) is not was for owner, name, was, _ in _recorded):
        recorder = _Recorder()
        _build(recorder)
        _recorded = recorder.entries
    for owner, name, _, replacement in _recorded:
        scope.set_attr(owner, name, replacement)


def _build(scope) -> None:
    import triton.language as tl

    interpreter = _triton_api.interpreter()
    InterpreterBuilder = interpreter.InterpreterBuilder  # noqa: N806 (a class)
    TensorHandle = interpreter.TensorHandle  # noqa: N806 (a class)

    def widened(handle, name):
        return TensorHandle(_widen(handle.data, name), tl.float32)

    def binary(method, compute=None):  # + - * and comparisons: `compute` on float32 values, or the interpreter's
        original = getattr(InterpreterBuilder, method)
        what = _SYMBOLS.get(method, "a comparison")

        def on_values(self, lhs, rhs):
            name = lhs.dtype.name
            if name not in _NARROW:
                return original(self, lhs, rhs)
            if name in _FP8:
                raise _fp8_refused(what, name)
            if compute is not None:
                return TensorHandle(_narrow(compute(_widen(lhs.data, name), _widen(rhs.data, name)), name), lhs.dtype)
            return original(self, widened(lhs, name), widened(rhs, name))  # a comparison's booleans

        scope.set_attr(InterpreterBuilder, method, on_values)

    def min_max(method, compute):  # every float type; fp8 on its values (language/core.py promotes bfloat16)
        def on_values(self, lhs, rhs):
            name = lhs.dtype.name
            if name not in _NARROW:
                return TensorHandle(compute(lhs.data, rhs.data), lhs.dtype.scalar)
            return TensorHandle(_narrow(compute(_widen(lhs.data, name), _widen(rhs.data, name)), name), lhs.dtype)

        scope.set_attr(InterpreterBuilder, method, on_values)

    for method, compute in _ARITHMETIC.items():
        binary(method, compute)
    for predicate in _FCMP:
        binary(f"create_fcmp{predicate}")
    for method, compute in _MIN_MAX.items():
        min_max(method, compute)

    fdiv = InterpreterBuilder.create_fdiv

    def create_fdiv(self, lhs, rhs):
        name = lhs.dtype.name
        if name not in _NARROW:
            return fdiv(self, lhs, rhs)
        raise _refused("tl.fdiv", name, "its FDivOpConversion lowers 32- and 64-bit division only: 'Unsupported "
                       "bitwidth'", "divide with `/`, which computes in float32, or convert to float32 first")

    def create_clampf(self, arg, lo, hi, propagate_nans):
        # every float type, as lib/Conversion/TritonGPUToLLVM/ElementwiseOpToLLVM.cpp's
        # ClampFOpConversion: maxnum then minnum, or maximum then minimum where NaNs propagate
        # (3.6/3.7's interpreter: np.clip, which returned NaN for a NaN x either way)
        low, high = (np.maximum, np.minimum) if propagate_nans == tl.PropagateNan.ALL else (np.fmax, np.fmin)
        name = arg.dtype.name
        if name not in _NARROW:
            return TensorHandle(high(low(arg.data, lo.data), hi.data), arg.dtype.scalar)
        values = high(low(_widen(arg.data, name), _widen(lo.data, name)), _widen(hi.data, name))
        return TensorHandle(_narrow(values, name), arg.dtype)

    fma = InterpreterBuilder.create_fma

    def create_fma(self, x, y, z):
        name = z.dtype.name
        if name not in _NARROW:
            return fma(self, x, y, z)
        if name in _FP8:
            raise _fp8_refused("tl.fma", name)
        return TensorHandle(_fma_bf16(x.data, y.data, z.data), z.dtype)

    def get_bf16(self, value):
        return TensorHandle(_bf16_constant(value), tl.bfloat16)

    scope.set_attr(InterpreterBuilder, "create_fdiv", create_fdiv)
    scope.set_attr(InterpreterBuilder, "create_clampf", create_clampf)
    scope.set_attr(InterpreterBuilder, "create_fma", create_fma)
    scope.set_attr(InterpreterBuilder, "get_bf16", get_bf16)  # absent from the interpreter's builder
    if hasattr(InterpreterBuilder, "create_fneg"):  # Triton 3.8 (earlier ones emit 0 - x)
        fneg = InterpreterBuilder.create_fneg

        def create_fneg(self, arg):
            name = arg.dtype.name
            if name not in _NARROW:
                return fneg(self, arg)
            if name in _FP8:
                raise _fp8_refused("unary -", name)
            return TensorHandle(np.asarray(arg.data, dtype=np.uint16) ^ np.uint16(0x8000), arg.dtype)

        scope.set_attr(InterpreterBuilder, "create_fneg", create_fneg)

    atomic_rmw = InterpreterBuilder.create_atomic_rmw

    def create_atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope_):  # noqa: N803 (Triton's names)
        if val.dtype.name != _BF16:  # (fp8 atomics: the front end refuses them)
            return atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope_)
        return _atomic_add_bf16(self, ptr, val, mask, sem, scope_)  # (the front end allows only add on bf16)

    scope.set_attr(InterpreterBuilder, "create_atomic_rmw", create_atomic_rmw)
    _patch_reduce_scan(scope, interpreter, tl)


def _patch_reduce_scan(scope, interpreter, tl) -> None:
    """The fast paths of the interpreter's reductions and scans (ReduceOps / ScanOps, which
    tl.reduce and tl.associative_scan run during a launch) on bfloat16 and fp8 values: sum,
    sum and product scans of bfloat16 rounded at every step, min/max of fp8 (bfloat16 min/max
    combines do not compile: their combine promotes to float32)."""
    ReduceOps, ScanOps = interpreter.ReduceOps, interpreter.ScanOps  # noqa: N806 (classes)
    TensorHandle = interpreter.TensorHandle  # noqa: N806 (a class)
    total, min_max = ReduceOps.sum, ReduceOps.min_max

    def reduce_sum(self, input):
        name = input.dtype.name
        if name not in _NARROW:
            return total(self, input)
        if name in _FP8:
            raise _fp8_refused("tl.sum", name)
        data = np.asarray(input.handle.data)
        if self.axis is None:
            summed = _tree_sum_bf16(data.reshape(-1), 0)
            summed = summed.reshape((1,) * data.ndim) if self.keep_dims else summed
        else:
            summed = _tree_sum_bf16(data, self.axis)
            summed = np.expand_dims(summed, self.axis) if self.keep_dims else summed
        return self.to_tensor(summed, input.dtype)

    def reduce_min_max(self, input, val_reduce_op, idx_reduce_op=None):
        tensor = input[0] if isinstance(input, tuple) else input
        name = tensor.dtype.name
        if name not in _NARROW:
            return min_max(self, input, val_reduce_op, idx_reduce_op)
        wide = tl.core.tensor(TensorHandle(_widen(tensor.handle.data, name), tl.float32),
                              tensor.type.with_element_ty(tl.float32))
        result = min_max(self, wide, val_reduce_op, idx_reduce_op)
        results = result if isinstance(result, tuple) else (result,)
        narrowed = tuple(self.to_tensor(_narrow(r.handle.data, name).reshape(r.handle.data.shape if r.type.is_block()
                                                                             else ()), tensor.dtype)
                         if r.dtype == tl.float32 else r for r in results)  # (the indices stay)
        return narrowed if isinstance(result, tuple) else narrowed[0]

    def scan(method, combine, what):
        original = getattr(ScanOps, method)

        def on_values(self, input):
            name = input.dtype.name
            if name not in _NARROW:
                return original(self, input)
            if name in _FP8:
                raise _fp8_refused(what, name)
            return [self.to_tensor(_sequential_scan_bf16(np.asarray(input.handle.data), self.axis, combine),
                                   input.dtype)]

        scope.set_attr(ScanOps, method, on_values)

    scope.set_attr(ReduceOps, "sum", reduce_sum)
    scope.set_attr(ReduceOps, "min_max", reduce_min_max)
    scan("cumsum", np.add, "a sum scan (tl.associative_scan)")
    scan("cumprod", np.multiply, "a product scan (tl.associative_scan)")
