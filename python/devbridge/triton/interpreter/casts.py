"""Numeric conversions for the interpreter Triton target, as an NVIDIA GPU computes them.

Triton's interpreter converts with numpy casts (InterpreterBuilder.cast_impl)
and its own _convert_float, which is wrong where low-precision types meet
(Triton 3.6.0, 3.7.1 and 3.8.0 alike):

  * float32/float64 -> bfloat16 truncates instead of rounding to nearest even
    (_convert_float is called without a rounding mode), so torch.compile's
    `t.bfloat16()` gave -8.4375 where a GPU gives -8.5;
  * float64 -> bfloat16, bfloat16 -> float64, integer <-> bfloat16 and bool ->
    bfloat16 cast the uint16 array bfloat16 is kept in as numbers: int8 -1
    became the bits 0xffff, a NaN (Triton's own test_cast reports it);
  * float -> integer is numpy's cast: NaN and out-of-range values give
    whatever the CPU gives, where the GPU's cvt saturates;
  * fp8 conversions ignore saturation, ties and NaN.

During an interpreted launch the builder's conversion methods are replaced
by these, which compute what Triton's NVIDIA backend makes a Hopper GPU (the
H200, compute capability 9.0) compute, bit for bit, NaN payloads included.
Sources: the PTX each conversion lowers to (third_party/nvidia/lib/
TritonNVIDIAGPUToLLVM/ElementwiseOpToLLVM.cpp, FpToFpOpConversion, and
LLVM's NVPTX lowering of fptrunc/fpext/sitofp/fptosi), the fp8e4b15 inline
assembly of triton/language/extra/cuda/utils.py (convert_custom_float8), and
every conversion below run on an H200 with Triton 3.6.0 over all 16- and
8-bit inputs and ~10^5 float32/float64/integer inputs around every rounding
boundary, with these results for all of them (tests/python/
test_interpreter_casts.py checks them against torch and measured values):

  float -> narrower float, default rounding (rtne): one correctly rounded
      step (cvt.rn.{f32,f16,bf16}.{f32,f64}), overflow to inf; float64 ->
      bfloat16 too (cvt.rn.bf16.f64, no double rounding through float32).
  fp_downcast_rounding="rtz": cvt.rz, overflow to the largest finite value;
      only from float32 (float64 with rtz fails to compile on a GPU).
  -> fp8e4nv / fp8e5: cvt.rn.satfinite from float32, float16 and bfloat16
      (via float32): nearest even, overflow AND inf to the largest finite
      value (448 / 57344), NaN to 0x7f (torch's float8_e5m2 gives inf).
      float32 -> fp8e5 with rtz: float16 rtz, then the low byte dropped
      (overflow to 57344, inf stays inf).
  -> fp8e4b15 (no native type): float32 -> float16 rtz, then magnitudes
      clamped to 1.75 and rounded half away from zero; NaN becomes 1.75.
      fp8e4b15 -> float16 is a shift: 0x7f is 1.875 (a GPU's front end
      types the result float16 whatever was asked; here it is converted on).
  fp8e4nv / fp8e5 -> float16 (and float32 through it): exact; fp8e5 ->
      bfloat16 is Hopper's bit trick (a multiply by 2**112), which turns inf
      into 65536 and NaN into finite values.
  integer -> float: one correctly rounded step (cvt.rn.<float>.<int>).
  float -> integer: toward zero, saturating at the range of the cvt's type;
      an 8-bit destination takes the low byte of a 16-bit saturating cvt
      (300.0 -> uint8 44). NaN gives 0, or 0x80...0 from float64 and into
      64-bit integers.
  NaN results: a cvt from float32 to float16/bfloat16 and from float16 to
      float32 gives the canonical NaN (0x7fff, 0x7fffffff); float64 <->
      float32 and -> float16/bfloat16 keep sign and payload, quietened;
      bfloat16 -> float32 is a shift.

Conversions a GPU's Triton cannot compile (float64 to or from fp8e4nv/fp8e5,
between those two, rtz from anything but float32, rtz to fp8e4nv) raise an
error naming the detour. Compute capability 8.9 and below differ in places
(float32 -> fp8 goes through float16 rtz there); they are not modelled.

The interpreter's names it uses are listed, with the Triton versions
checked, in _triton_api.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _triton_api


class _Format(NamedTuple):
    bits: int
    man: int  # explicit mantissa bits
    bias: int
    storage: type  # the numpy dtype Triton's interpreter keeps it in (_get_np_dtype)


_FORMATS = {
    "fp64": _Format(64, 52, 1023, np.float64), "fp32": _Format(32, 23, 127, np.float32),
    "fp16": _Format(16, 10, 15, np.float16), "bf16": _Format(16, 7, 127, np.uint16),
    "fp8e5": _Format(8, 2, 15, np.uint8), "fp8e4nv": _Format(8, 3, 7, np.uint8),
    "fp8e4b15": _Format(8, 3, 15, np.uint8),
}  # fmt: skip
_UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_FP8_NAN = 0x7F  # what cvt.rn.satfinite.{e4m3,e5m2} gives for any NaN


def _bits(data, fmt: _Format) -> np.ndarray:
    return np.asarray(data).view(_UINT[fmt.bits]).astype(np.uint64)


def _stored(bits, fmt: _Format) -> np.ndarray:
    return np.asarray(bits).astype(_UINT[fmt.bits]).view(fmt.storage)


def bfloat16_to_float32(bits) -> np.ndarray:
    """The float32 values of bfloat16 bits (the uint16 arrays Triton's
    interpreter keeps bfloat16 in): cvt.f32.bf16 shifts them into float32's
    high half, exactly, NaN payloads and all."""
    return (np.asarray(bits).view(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def _max_finite(name: str) -> int:
    fmt = _FORMATS[name]
    if name == "fp8e4nv":  # no inf: S.1111.111 is NaN, S.1111.110 (448) the largest
        return 0x7E
    return ((1 << (fmt.bits - fmt.man - 1)) - 2) << fmt.man | ((1 << fmt.man) - 1)


def _inf(name: str) -> int:
    fmt = _FORMATS[name]
    return ((1 << (fmt.bits - fmt.man - 1)) - 1) << fmt.man


# ---------------------------------------------------------------- decoding


class _Value(NamedTuple):
    """sign * sig * 2**exp, exactly (sig < 2**53); nan and inf where the format has them."""

    sign: np.ndarray  # uint64, 0 or 1
    sig: np.ndarray  # uint64
    exp: np.ndarray  # int64
    nan: np.ndarray | None
    inf: np.ndarray | None


def _decode(bits: np.ndarray, name: str, specials: bool = True) -> _Value:
    """The value of each float's bits. specials=False reads the all-ones
    exponent as an ordinary one (fp8e5 -> bfloat16 on Hopper, fp8e4b15)."""
    fmt = _FORMATS[name]
    ebits = fmt.bits - fmt.man - 1
    sign = bits >> np.uint64(fmt.bits - 1)
    field = ((bits >> np.uint64(fmt.man)) & np.uint64((1 << ebits) - 1)).astype(np.int64)
    mantissa = bits & np.uint64((1 << fmt.man) - 1)
    sig = np.where(field == 0, mantissa, mantissa | np.uint64(1 << fmt.man))
    exp = np.maximum(field, 1) - (fmt.bias + fmt.man)
    nan = inf = None
    if specials and name == "fp8e4nv":
        nan = (bits & np.uint64(0x7F)) == 0x7F
    elif specials and name != "fp8e4b15":
        top = field == (1 << ebits) - 1
        nan, inf = top & (mantissa != 0), top & (mantissa == 0)
    return _Value(sign, sig, exp, nan, inf)


def _from_integers(data: np.ndarray, signed: bool) -> _Value:
    """An integer array as sign and magnitude; magnitudes of 2**53 and more
    keep their low bits as a sticky bit (enough for every target here, whose
    significands have at most 24 bits)."""
    data = np.asarray(data)
    if data.dtype == np.bool_:
        data = data.astype(np.uint8)
    width = data.dtype.itemsize * 8
    if signed:
        wide = data.astype(np.int64)
        sign = (wide < 0).astype(np.uint64)
        magnitude = np.where(wide < 0, (-wide).view(np.uint64), wide.view(np.uint64))  # -2**63 -> 2**63
    else:
        sign = np.zeros(data.shape, np.uint64)
        magnitude = data.view(_UINT[width]).astype(np.uint64)
    big = magnitude >= np.uint64(1 << 53)
    sticky = (magnitude & np.uint64(0x7FF)) != 0
    sig = np.where(big, (magnitude >> np.uint64(11)) | sticky.astype(np.uint64), magnitude)
    exp = np.where(big, 11, 0).astype(np.int64)
    return _Value(sign, sig, exp, None, None)


# ---------------------------------------------------------------- rounding


def _round(value: _Value, name: str, rtz: bool, saturate: bool) -> np.ndarray:
    """The bits of `name` nearest `value` (even on ties), or toward zero
    (rtz); past the largest finite value: inf, or that value (saturate).
    NaN and inf inputs are the caller's."""
    fmt = _FORMATS[name]
    sig, exp = value.sig, value.exp
    length = np.frexp(sig.astype(np.float64))[1].astype(np.int64)  # bit length (sig < 2**53: exact)
    emin = 1 - fmt.bias
    lsb = np.maximum(exp + length - 1, emin) - fmt.man  # exponent of the result's last bit
    shift = lsb - exp
    left = np.clip(-shift, 0, 63).astype(np.uint64)
    right = np.clip(shift, 0, 63).astype(np.uint64)  # >= 63: below half the smallest step, sig < 2**53
    kept = (sig << left) >> right
    rest = sig & ((np.uint64(1) << right) - np.uint64(1))
    if not rtz:
        half = (np.uint64(1) << right) >> np.uint64(1)
        up = (rest > half) | ((rest == half) & (half > 0) & ((kept & np.uint64(1)) == 1))
        kept = kept + up.astype(np.uint64)
    # The exponent field lands above the mantissa; a mantissa that rounded up
    # to 2**(man+1) carries into it, and a subnormal one into the smallest normal.
    magnitude = ((lsb + fmt.man - emin).astype(np.uint64) << np.uint64(fmt.man)) + kept
    magnitude = np.where(sig == 0, np.uint64(0), magnitude)
    largest = np.uint64(_max_finite(name))
    magnitude = np.where(magnitude > largest, largest if saturate else np.uint64(_inf(name)), magnitude)
    return (value.sign << np.uint64(fmt.bits - 1)) | magnitude


def _specials(bits, value: _Value, name: str, nan, inf) -> np.ndarray:
    """`bits` with NaN inputs given `nan` (bits, or None to keep) and inf inputs `inf`
    (None: the format's signed inf)."""
    fmt = _FORMATS[name]
    if value.inf is not None:
        signed_inf = (value.sign << np.uint64(fmt.bits - 1)) | np.uint64(_inf(name)) if inf is None else inf
        bits = np.where(value.inf, signed_inf, bits)
    if value.nan is not None and nan is not None:
        bits = np.where(value.nan, nan, bits)
    return bits


def _canonical_nan(name: str) -> np.uint64:
    """The NaN cvt gives from float32 to float16/bfloat16 and from float16 to float32: all ones, positive."""
    fmt = _FORMATS[name]
    return np.uint64((1 << (fmt.bits - 1)) - 1)


def _quiet_nan(bits, src: str, dst: str) -> np.ndarray:
    """The NaN a cvt between float64, float32 and 16-bit floats gives where it
    keeps the payload (float64 <-> float32, float64 -> float16/bfloat16):
    sign kept, the payload's top bits, the quiet bit set."""
    s, d = _FORMATS[src], _FORMATS[dst]
    payload = bits & np.uint64((1 << s.man) - 1)
    payload = payload >> np.uint64(s.man - d.man) if s.man > d.man else payload << np.uint64(d.man - s.man)
    sign = (bits >> np.uint64(s.bits - 1)) << np.uint64(d.bits - 1)
    return sign | np.uint64(_inf(dst)) | np.uint64(1 << (d.man - 1)) | payload


# ---------------------------------------------------------------- float <-> float


def _float_to_float(data, src: str, dst: str, rtz: bool = False) -> np.ndarray:
    """A float conversion between float64, float32, float16 and bfloat16 as
    the GPU's cvt chain computes it (float16 <-> bfloat16 through float32, as
    Triton's semantic.cast builds it)."""
    if src in ("fp16", "bf16") and dst in ("fp16", "bf16"):
        return _float_to_float(_float_to_float(data, src, "fp32"), "fp32", dst)
    if src in ("fp16", "bf16") and dst == "fp64":
        return _float_to_float(_float_to_float(data, src, "fp32"), "fp32", "fp64")
    if (src, dst) == ("fp32", "bf16"):
        return _float32_to_bfloat16(data, rtz)
    if not rtz and (src, dst) in _NUMPY_CASTS:
        return _numpy_cast(np.asarray(data), src, dst)
    # what is left narrows: float64 -> float16/bfloat16, and rtz from float32
    bits = _bits(data, _FORMATS[src])
    value = _decode(bits, src)
    out = _round(value, dst, rtz=rtz, saturate=rtz)
    nan = _quiet_nan(bits, src, dst) if src == "fp64" else _canonical_nan(dst)
    return _stored(_specials(out, value, dst, nan, None), _FORMATS[dst])


# Conversions numpy's casts compute as the GPU does, but for NaN payloads
# (fixed after): correctly rounded to nearest even, overflowing to inf; much
# faster than _round. (numpy's float64 -> float16 is left out: where it goes
# through float32, it rounds twice.)
_NUMPY_CASTS = {("fp32", "fp16"), ("fp16", "fp32"), ("fp32", "fp64"), ("fp64", "fp32"), ("bf16", "fp32")}


def _numpy_cast(data: np.ndarray, src: str, dst: str) -> np.ndarray:
    if src == "bf16":
        return bfloat16_to_float32(data)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf is the answer, as on a GPU
        out = data.astype(_FORMATS[dst].storage)
    nan = np.isnan(data)
    if nan.any():
        fixed = _canonical_nan(dst) if src != "fp64" and dst != "fp64" else \
            _quiet_nan(_bits(data, _FORMATS[src]), src, dst)
        out = _stored(np.where(nan, fixed, _bits(out, _FORMATS[dst])), _FORMATS[dst])
    return out


def _float32_to_bfloat16(data, rtz: bool) -> np.ndarray:
    """The common case, with integer arithmetic on the float32 bits (same
    results as _float_to_float, a few times faster): bfloat16 is float32's
    high half, so rounding is adding below the cut."""
    bits = np.asarray(data, dtype=np.float32).view(np.uint32)
    if rtz:
        out = bits >> np.uint32(16)
    else:
        out = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return np.where(nan, np.uint32(0x7FFF), out).astype(np.uint16)


# ---------------------------------------------------------------- fp8


def _to_fp8(data, src: str, dst: str, rtz: bool) -> np.ndarray:
    if dst == "fp8e4b15":
        if src not in ("fp16", "fp32"):  # (the front end already refused it: convert_custom_float8's assert)
            raise _unsupported(src, dst, None, "convert through float16 (x.to(tl.float16).to(tl.float8e4b15))")
        return _to_fp8e4b15(data, src)
    if src == "bf16":  # cvt.f32.bf16 first (Bf16_to_Fp8E*), then as float32
        return _to_fp8(bfloat16_to_float32(data), "fp32", dst, rtz)
    bits = _bits(data, _FORMATS[src])
    if rtz:  # float32 -> fp8e5 only: cvt.rz.f16.f32, then the float16's high byte (Fp16_to_Fp8E5M2_RTZ)
        half = _bits(_float_to_float(data, "fp32", "fp16", rtz=True), _FORMATS["fp16"])
        return (half >> np.uint64(8)).astype(np.uint8)
    value = _decode(bits, src)
    out = _round(value, dst, rtz=False, saturate=True)  # cvt.rn.satfinite
    largest = (value.sign << np.uint64(7)) | np.uint64(_max_finite(dst))
    return _specials(out, value, dst, np.uint64(_FP8_NAN), largest).astype(np.uint8)


def _to_fp8e4b15(data, src: str) -> np.ndarray:
    """convert_float16_to_fp8e4b15 (inline PTX, per 16-bit lane) after a float32's cvt.rz.f16.f32."""
    if src == "fp32":
        data = _float_to_float(data, "fp32", "fp16", rtz=True)
    half = np.asarray(data, dtype=np.float16).view(np.uint16).astype(np.uint32)
    magnitude = half & np.uint32(0x7FFF)
    # min.f16x2 with 1.75 (0x3F00): a NaN operand yields the other one
    clamped = np.where(magnitude > np.uint32(0x7C00), np.uint32(0x3F00), np.minimum(magnitude, np.uint32(0x3F00)))
    rounded = ((clamped * np.uint32(2) + np.uint32(0x80)) >> np.uint32(8)) & np.uint32(0x7F)
    return (rounded | ((half >> np.uint32(8)) & np.uint32(0x80))).astype(np.uint8)


def _from_fp8(data, src: str, dst: str) -> np.ndarray:
    bits = np.asarray(data).view(np.uint8).astype(np.uint64)
    sign = bits >> np.uint64(7)
    if src == "fp8e4b15":  # convert_fp8e4b15_to_float16: the 7 low bits moved up by 7
        half = _stored((sign << np.uint64(15)) | ((bits & np.uint64(0x7F)) << np.uint64(7)), _FORMATS["fp16"])
        # (a GPU's front end types the result float16 whatever was asked,
        # convert_custom_float8: the same value, converted where it is used)
        if dst == "fp16":
            return half
        return _to_fp8(half, "fp16", dst, rtz=False) if dst.startswith("fp8") else _float_to_float(half, "fp16", dst)
    if src == "fp8e5" and dst == "bf16":
        # Fp8E5M2_to_Bf16 on sm90: the bits shifted into bfloat16 and multiplied
        # by 2**112, exactly; the all-ones exponent (inf, NaN) is read as a number.
        value = _decode(bits, src, specials=False)
        return _stored(_round(value, "bf16", rtz=False, saturate=False), _FORMATS["bf16"])
    # cvt.rn.f16x2.e4m3x2 / .e5m2x2: exact; NaN -> 0x7fff. Then float16 -> dst.
    value = _decode(bits, src)
    half = _stored(_specials(_round(value, "fp16", rtz=False, saturate=False), value, "fp16",
                             _canonical_nan("fp16"), None), _FORMATS["fp16"])
    if dst == "fp16":
        return half
    if dst == "bf16":  # cvt.bf16.f16: exact, NaN -> 0x7fff
        return _float_to_float(half, "fp16", "bf16")
    return _float_to_float(half, "fp16", "fp32")


# ---------------------------------------------------------------- integers


def _int_to_float(data, dst: str, signed: bool) -> np.ndarray:
    """cvt.rn.<float>.<int>: one correctly rounded step."""
    data = np.asarray(data)
    if data.dtype == np.bool_ or not signed:  # (ui_to_fp: the bits as unsigned)
        data = data.astype(np.uint8) if data.dtype == np.bool_ else data.view(_UINT[data.dtype.itemsize * 8])
    if dst in ("fp32", "fp64"):
        return data.astype(_FORMATS[dst].storage)  # numpy's C cast: rounded once, to nearest even
    if data.dtype.itemsize <= 2 or data.size and np.abs(data.astype(np.float64)).max() < 2**24:
        # exact in float32: its one rounding to 16 bits is the only one
        return _float_to_float(data.astype(np.float32), "fp32", dst)
    return _stored(_round(_from_integers(data, signed), dst, rtz=False, saturate=False), _FORMATS[dst])


def _float_to_int(data, src: str, dst: np.dtype, signed: bool) -> np.ndarray:
    """cvt.rzi.<int>.<float>: toward zero, saturating; for 8 bits a 16-bit cvt
    whose low byte is kept (LLVM's NVPTX widens i8 results). NaN gives 0, but
    0x80...0 (for unsigned types too) from float64 and into 64 bits."""
    if src == "bf16":
        values = bfloat16_to_float32(data)
    else:
        values = np.asarray(data)
    with np.errstate(invalid="ignore"):  # signalling NaNs: they give the NaN answer below, quietly
        values = np.trunc(values.astype(np.float64))
    width = max(dst.itemsize * 8, 16)
    wide = np.int64 if signed else np.uint64
    low, high = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    # (float64 cannot hold 2**63 - 1 or 2**64 - 1: the bounds are placed as integers)
    above, below = values >= float(high), values <= float(low)
    inside = np.where(above | below | np.isnan(values), 0.0, values).astype(wide)
    result = np.where(above, wide(high), np.where(below, wide(low), inside))
    nan = np.uint64(1 << (width - 1)).astype(wide) if src == "fp64" or width == 64 else wide(0)
    return np.where(np.isnan(values), nan, result).astype(dst)


# ---------------------------------------------------------------- the builder's methods


def _name(dtype) -> str:
    return dtype.scalar.name


def _unsupported(src: str, dst: str, rounding: str | None, fix: str):
    what = f"{_tl(src)} -> {_tl(dst)}" + (f" with fp_downcast_rounding={rounding!r}" if rounding else "")
    return NotImplementedError(f"devbridge: Triton's NVIDIA backend cannot compile the conversion {what} (its "
                               f"lowering to PTX fails), so the interpreter Triton target refuses it too; {fix}")


def _fp_to_fp(src: str, dst: str, data, rounding: str | None):
    """create_fp_to_fp: conversions with an fp8 type, and rtz downcasts."""
    fp8 = ("fp8e4nv", "fp8e5", "fp8e4b15")
    if src in fp8:
        if dst == "fp64" or dst in fp8 and src != "fp8e4b15":
            raise _unsupported(src, dst, None, f"convert through float16 (x.to(tl.float16).to(tl.{_tl(dst)}))")
        return _from_fp8(data, src, dst)
    if dst in fp8:
        if dst != "fp8e4b15":  # (the front end refuses fp8e4b15 from anything but float16 and float32)
            if src == "fp64":
                raise _unsupported(src, dst, rounding,
                                   f"convert through float32 (x.to(tl.float32).to(tl.{_tl(dst)}))")
            if rounding == "rtz" and not (src == "fp32" and dst == "fp8e5"):
                raise _unsupported(src, dst, rounding, "only float32 -> float8e5 takes rtz; drop it for rtne")
        return _to_fp8(data, src, dst, rounding == "rtz")
    if src != "fp32" and rounding == "rtz":
        raise _unsupported(src, dst, rounding, "convert to float32 first, or drop rtz for rtne")
    return _float_to_float(data, src, dst, rtz=rounding == "rtz")


def _tl(name: str) -> str:
    return {"fp64": "float64", "fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp8e4nv": "float8e4nv",
            "fp8e5": "float8e5", "fp8e4b15": "float8e4b15"}.get(name, name)


def _rounding(mode) -> str | None:
    """A ROUNDING_MODE of Triton's ir (RTNE, RTZ) as "rtne" / "rtz"."""
    return None if mode is None else mode.name.lower()


def patch(scope) -> None:
    """Install the GPU's conversions for the launch (undone by scope.restore())."""
    InterpreterBuilder = _triton_api.interpreter().InterpreterBuilder  # noqa: N806 (a class)
    TensorHandle = _triton_api.interpreter().TensorHandle  # noqa: N806 (a class)

    def fp_trunc(self, src, dst_type):  # float64 -> float32/16/bf16, float32 -> float16/bf16
        return TensorHandle(_float_to_float(src.data, _name(src.dtype), _name(dst_type)), dst_type.scalar)

    def fp_ext(self, src, dst_type):  # float16/bf16 -> float32/64, float32 -> float64
        return TensorHandle(_float_to_float(src.data, _name(src.dtype), _name(dst_type)), dst_type.scalar)

    def fp_to_fp(self, src, dst_type, rounding_mode):
        data = _fp_to_fp(_name(src.dtype), _name(dst_type), src.data, _rounding(rounding_mode))
        return TensorHandle(data, dst_type.scalar)

    def int_to_fp(signed):  # integers and bool -> float64/32/16, bfloat16 (semantic.cast has no fp8 here)
        def convert(self, src, dst_type):
            return TensorHandle(_int_to_float(src.data, _name(dst_type), signed), dst_type.scalar)

        return convert

    def fp_to_int(signed):  # float64/32/16, bfloat16 -> integers (bool is a comparison in semantic.cast)
        def convert(self, src, dst_type):
            data = _float_to_int(src.data, _name(src.dtype), np.dtype(_name(dst_type)), signed)
            return TensorHandle(data, dst_type.scalar)

        return convert

    scope.set_attr(InterpreterBuilder, "create_fp_trunc", fp_trunc)
    scope.set_attr(InterpreterBuilder, "create_fp_ext", fp_ext)
    scope.set_attr(InterpreterBuilder, "create_fp_to_fp", fp_to_fp)
    scope.set_attr(InterpreterBuilder, "create_si_to_fp", int_to_fp(signed=True))
    scope.set_attr(InterpreterBuilder, "create_ui_to_fp", int_to_fp(signed=False))
    scope.set_attr(InterpreterBuilder, "create_fp_to_si", fp_to_int(signed=True))
    scope.set_attr(InterpreterBuilder, "create_fp_to_ui", fp_to_int(signed=False))
