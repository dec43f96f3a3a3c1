"""libdevice's functions with a named rounding: `_rn` (to nearest, ties to
even), `_rz` (toward zero), `_rd` (down), `_ru` (up), for the interpreter
Triton target (libdevice.py).

All of them are exact: the result is the one IEEE 754 prescribes for the
named rounding of the exact value. Where numpy's own arithmetic in the
argument's type is that result (add, sub, mul, div, rcp and sqrt to nearest;
a float32 or float64 from an int32; double2float_rn) it is used, vectorized.
The others round the exact value, a Python Fraction (sqrt: its square, whose
root is bracketed with math.isqrt), to the float format in integer arithmetic,
element by element: exact, and slow (microseconds an element), which only
kernels calling these functions pay. Special operands (inf, NaN, a zero
divisor) give numpy's IEEE result, which no rounding changes; an exact zero
sum follows IEEE 754's sign rule (+0, -0 when rounding down).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

_MODES = ("rn", "rz", "rd", "ru")


class _Format:
    def __init__(self, dtype, precision: int, emin: int, emax: int):
        self.dtype, self.precision, self.emin, self.emax = dtype, precision, emin, emax
        self.max = float(np.finfo(dtype).max)


F32 = _Format(np.float32, 24, -126, 127)
F64 = _Format(np.float64, 53, -1022, 1023)


def round_exact(value: Fraction, mode: str, fmt: _Format, sqrt: bool = False) -> float:
    """`value` (sqrt: its square root; value > 0 then) rounded to `fmt` in
    `mode`, as a Python float (exactly representable in `fmt`, or +-inf).
    A zero value is the caller's: its sign depends on the operation."""
    negative = value < 0
    n, d = abs(value.numerator), value.denominator
    e = n.bit_length() - d.bit_length()  # floor(log2 |value|) is e or e - 1
    if (n << max(0, -e)) < (d << max(0, e)):
        e -= 1
    if sqrt:
        e //= 2
    q = max(e, fmt.emin) - (fmt.precision - 1)  # the exponent of the last bit kept
    shift = 2 * q if sqrt else q
    num, den = (n, d << shift) if shift >= 0 else (n << -shift, d)
    if sqrt:  # m = floor(sqrt(num / den)); half compares sqrt(num / den) with m + 1/2
        m = math.isqrt(num // den)
        inexact = m * m * den != num
        half = (4 * num > (2 * m + 1) ** 2 * den) - (4 * num < (2 * m + 1) ** 2 * den)
    else:
        m, rest = divmod(num, den)
        inexact = rest != 0
        half = (2 * rest > den) - (2 * rest < den)
    if inexact:
        up = {"rn": half > 0 or (half == 0 and m & 1), "rz": False, "ru": not negative, "rd": negative}[mode]
        m += bool(up)
    if m.bit_length() + q > fmt.emax + 1:  # m * 2**q >= 2**(emax + 1): overflow
        to_infinity = mode == "rn" or (mode == "ru" and not negative) or (mode == "rd" and negative)
        magnitude = math.inf if to_infinity else fmt.max
    else:
        magnitude = math.ldexp(m, q)
    return -magnitude if negative else magnitude


def _elementwise(fn, *arrays):
    """fn over the elements (Python scalars) of the broadcast arrays."""
    arrays = np.broadcast_arrays(*[np.asarray(a) for a in arrays])
    out = np.frompyfunc(fn, len(arrays), 1)(*[a.astype(object) for a in arrays])
    return np.asarray(out, dtype=np.float64).reshape(arrays[0].shape)


# (exact value of the operands as Fractions, numpy's IEEE result, additive,
#  whether finite operands can still be special: a zero divisor, sqrt of x <= 0)
def _rcp(a):
    return 1 / a


_OPERATIONS = {
    "add": (lambda a, b: a + b, np.add, True, None),
    "sub": (lambda a, b: a - b, np.subtract, True, None),
    "mul": (lambda a, b: a * b, np.multiply, False, None),
    "div": (lambda a, b: a / b, np.divide, False, lambda a, b: b == 0),
    "rcp": (_rcp, lambda a: np.divide(a.dtype.type(1), a), False, lambda a: a == 0),
    "fma": (lambda a, b, c: a * b + c, None, True, None),
    "sqrt": (None, np.sqrt, False, lambda a: a <= 0),
    "rsqrt": (None, lambda a: 1 / np.sqrt(a), False, lambda a: a <= 0),
}


def _fma_ieee(a, b, c):
    # Only for special operands and exact zeros, where a * b + c in float64 is
    # IEEE's answer (a zero product has its sign; inf and NaN propagate).
    return (a.astype(np.float64) * b + c).astype(a.dtype)


def _rounded(operation: str, mode: str, fmt: _Format):
    exact, ieee, additive, special = _OPERATIONS[operation]
    ieee = ieee or _fma_ieee
    fast = mode == "rn" and operation in ("add", "sub", "mul", "div", "rcp", "sqrt")

    def scalar(*operands):
        if operation in ("sqrt", "rsqrt"):
            a = Fraction(operands[0])
            return round_exact(a if operation == "sqrt" else 1 / a, mode, fmt, sqrt=True)
        value = exact(*map(Fraction, operands))
        if value == 0:
            return math.nan  # marks an exact zero: its sign is decided below
        return round_exact(value, mode, fmt)

    def fn(*args):
        args = np.broadcast_arrays(*[np.asarray(a, dtype=fmt.dtype) for a in args])
        result = np.asarray(ieee(*args), dtype=fmt.dtype)
        if fast:  # IEEE arithmetic in the argument's type rounds to nearest even
            return result
        regular = np.logical_and.reduce([np.isfinite(a) for a in args])
        if special is not None:
            regular &= ~special(*args)
        if not regular.any():
            return result
        rounded = _elementwise(scalar, *[a[regular] for a in args])
        zero = np.isnan(rounded)
        if additive and mode == "rd":
            # An exact zero sum is -0 when rounding down, unless both addends are +0.
            addends = (args[0] * args[1], args[2]) if operation == "fma" else (
                args[0], -args[1] if operation == "sub" else args[1])
            plus_zero = [(x[regular] == 0) & ~np.signbit(x[regular]) for x in addends]
            rounded[zero] = np.where((plus_zero[0] & plus_zero[1])[zero], 0.0, -0.0)
        else:
            rounded[zero] = result[regular][zero]
        result = result.copy()
        result[regular] = rounded.astype(fmt.dtype)
        return result

    return fn


def _to_float(mode: str, fmt: _Format, source):
    """An integer (source: its numpy type) or a float64 converted to `fmt` in `mode`."""

    def scalar(x):
        return round_exact(Fraction(int(x) if np.issubdtype(source, np.integer) else x), mode, fmt) if x else 0.0

    def fn(x):
        x = np.asarray(x, dtype=source)
        direct = x.astype(fmt.dtype)
        if mode == "rn" and (np.dtype(source).itemsize <= 4 or np.issubdtype(source, np.floating)):
            # numpy's conversion (C's cast) rounds to nearest even; from 64-bit
            # integers it takes the exact path below, not trusting a compiler's
            # uint64 -> float sequence
            return direct
        if np.issubdtype(source, np.floating):
            regular = np.isfinite(x) & (x != 0)  # inf, NaN and signed zeros convert as they are
        else:
            regular = np.ones(x.shape, dtype=bool)
        out = direct.copy()
        if regular.any():
            out[regular] = _elementwise(scalar, x[regular]).astype(fmt.dtype)
        return out

    return fn


def symbols() -> dict:
    """{libdevice symbol: numpy implementation} of the rounding-mode functions."""
    table = {}
    for mode in _MODES:
        for prefix, fmt in (("f", F32), ("d", F64)):
            for operation in ("add", "sub", "mul", "div", "rcp", "sqrt"):
                table[f"__nv_{prefix}{operation}_{mode}"] = _rounded(operation, mode, fmt)
        table[f"__nv_fmaf_{mode}"] = _rounded("fma", mode, F32)
        table[f"__nv_fma_{mode}"] = _rounded("fma", mode, F64)
        table[f"__nv_double2float_{mode}"] = _to_float(mode, F32, np.float64)
        for name, source in (("int", np.int32), ("uint", np.uint32), ("ll", np.int64), ("ull", np.uint64)):
            table[f"__nv_{name}2float_{mode}"] = _to_float(mode, F32, source)
        for name, source in (("ll", np.int64), ("ull", np.uint64)):
            table[f"__nv_{name}2double_{mode}"] = _to_float(mode, F64, source)
    # a 32-bit integer is exact in a double: libdevice has only the _rn name
    table["__nv_int2double_rn"] = _to_float("rn", F64, np.int32)
    table["__nv_uint2double_rn"] = _to_float("rn", F64, np.uint32)
    table["__nv_frsqrt_rn"] = _rounded("rsqrt", "rn", F32)
    # the plain fma is fma_rn (IEEE 754's fusedMultiplyAdd)
    table["__nv_fmaf"], table["__nv_fma"] = table["__nv_fmaf_rn"], table["__nv_fma_rn"]
    return table
