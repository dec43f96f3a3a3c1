"""libdevice's floating-point functions for the interpreter Triton target
(libdevice.py), float32 (`__nv_expf`) and float64 (`__nv_exp`) alike.

A float32 function computes in float64 and libdevice.py rounds the result to
float32 once; a float64 one computes in float64. The elementary functions are
numpy's (C's libm: correctly rounded or within an ulp or two), the special
ones libdevice_special's (mostly torch's CPU kernels in float64); sinpi /
cospi reduce their argument exactly first; remainder is Python's
math.remainder (exact). Values at zeros, infinities and NaN are those NVIDIA's
libdevice user's guide documents (https://docs.nvidia.com/cuda/libdevice-users-guide/).

Where the results differ from a GPU's: libdevice's float32 functions as
Triton links them flush subnormals to zero (nvvm-reflect __CUDA_FTZ); these
keep them, as torch's eager CPU kernels do. The `fast_` approximations
(__nv_fast_expf, ...) compute the accurate value, which lies within their
documented error bounds; __nv_fast_fdividef keeps its documented quirk (0, or
NaN for an infinite x, when 2**126 < |y| < 2**128). __nv_rcp64h, NVIDIA's
reciprocal of a double's high word (PTX rcp.approx.ftz.f64), keeps the 32
high bits of the reciprocal of x's 32 high bits.
"""

from __future__ import annotations

import math

import numpy as np

from . import libdevice_special as special
from .libdevice_bits import float_to_int

_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1


def _sinpi(x):
    # sin(pi x) after exact reductions: |x| mod 2 (fmod is exact), then t - 1
    # and 1 - t (Sterbenz), so pi * t is never a large product's rounding.
    t = np.fmod(np.abs(x), 2.0)
    sign = np.where(t >= 1.0, -1.0, 1.0)
    t = np.where(t >= 1.0, t - 1.0, t)
    t = np.where(t > 0.5, 1.0 - t, t)
    r = sign * np.sin(np.pi * t)
    return np.where(r == 0, np.copysign(0.0, x), np.copysign(1.0, x) * r)  # sinpi(n) = +0 for n > 0, -0 for n < 0


def _cospi(x):
    t = np.fmod(np.abs(x), 2.0)
    t = np.where(t > 1.0, 2.0 - t, t)  # cos(pi t) = cos(pi (2 - t)), exact
    return np.where(t < 0.25, np.cos(np.pi * t), _sinpi(0.5 - t) + 0.0)  # + 0.0: cospi(n + 1/2) = +0


def _remainder(x, y):
    def scalar(a, b):
        if math.isnan(a) or math.isnan(b) or math.isinf(a) or b == 0:
            return math.nan
        return math.remainder(a, b)  # IEEE remainder: exact; remainder(x, inf) = x

    return special.elementwise(scalar, x, y)


def _round(x):
    # half away from zero (C's round); x - trunc(x) is exact
    r = np.trunc(x)
    return r + np.where(np.abs(x - r) >= 0.5, np.copysign(1.0, x), np.copysign(0.0, x)).astype(r.dtype)


def _ilogb(x):
    e = np.frexp(x)[1].astype(np.int64) - 1
    return np.where(np.isinf(x), _INT_MAX, np.where((x == 0) | np.isnan(x), _INT_MIN, e))


def _logb(x):
    e = (np.frexp(x)[1] - 1).astype(np.float64)
    return np.where(np.isinf(x), np.inf, np.where(x == 0, -np.inf, np.where(np.isnan(x), np.nan, e)))


def _hypot(*args):
    r = np.abs(args[0])
    for a in args[1:]:
        r = np.hypot(r, a)  # inf wins over NaN, as in C (and libdevice's norm functions)
    return r


def _saturate(x):
    return np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0)) + 0.0  # NaN -> +0; -0 -> +0


def _fdim(x, y):
    return np.where(np.isnan(x) | np.isnan(y), np.nan, np.where(x > y, x - y, 0.0)).astype(x.dtype)


def _fast_fdivide(x, y):
    # __fdividef: x * (1/y) with 1/y flushed to zero for 2**126 < |y| < 2**128
    flushed = (np.abs(y) > 2.0**126) & np.isfinite(y)
    return np.where(flushed, x * np.copysign(np.float32(0), y), x / y)


def _rcp64h(x):
    high = np.uint64(0xFFFFFFFF00000000)
    top = (np.asarray(x, dtype=np.float64).view(np.uint64) & high).view(np.float64)
    top = np.where(np.abs(top) < np.finfo(np.float64).tiny, np.copysign(0.0, top), top)  # .ftz
    return ((1.0 / top).view(np.uint64) & high).view(np.float64)


# Computed in float64 (float32 arguments widened exactly); libdevice.py rounds to the return type.
_FLOAT64 = {
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(10.0, x), "expm1": np.expm1,
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "cbrt": np.cbrt, "rcbrt": lambda x: 1.0 / np.cbrt(x),
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "sinpi": _sinpi, "cospi": _cospi,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "atan2": np.arctan2,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "hypot": _hypot, "rhypot": lambda x, y: 1.0 / _hypot(x, y), "norm3d": _hypot,
    "rnorm3d": lambda *a: 1.0 / _hypot(*a), "norm4d": _hypot, "rnorm4d": lambda *a: 1.0 / _hypot(*a),
    "pow": np.power, "powi": lambda x, n: np.power(x, np.asarray(n, dtype=np.float64)),
    "fmod": np.fmod, "remainder": _remainder,
    "ldexp": lambda x, n: np.ldexp(x, np.asarray(n, dtype=np.int32)),
    "scalbn": lambda x, n: np.ldexp(x, np.asarray(n, dtype=np.int32)),
    "erf": special.torch_special("erf"), "erfc": special.torch_special("erfc"),
    "erfinv": special.torch_special("erfinv"), "erfcinv": special.erfcinv, "erfcx": special.torch_special("erfcx"),
    "normcdf": special.normcdf, "normcdfinv": special.torch_special("ndtri"),
    "lgamma": special.torch_special("lgamma"), "tgamma": special.tgamma,
    "j0": special.j0, "j1": special.j1, "y0": special.y0, "y1": special.y1, "jn": special.jn, "yn": special.yn,
    "cyl_bessel_i0": special.cyl_bessel_i0, "cyl_bessel_i1": special.cyl_bessel_i1,
    "logb": _logb, "ilogb": _ilogb,
}  # fmt: skip

# Exact in the argument's own type (no rounding happens, or it must happen there).
_NATIVE = {
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint, "nearbyint": np.rint,
    "round": _round, "fabs": np.abs, "copysign": np.copysign, "nextafter": np.nextafter, "fdim": _fdim,
    "llrint": float_to_int(np.rint, True, 64), "llround": float_to_int(_round, True, 64),
}  # fmt: skip

# __nv_fast_<name>f: the accurate value lies within the approximation's documented error
_FAST = ("sin", "cos", "tan", "exp", "exp10", "log", "log2", "log10", "pow")


def _widened(fn):
    def call(*args):
        return fn(*[a.astype(np.float64) if a.dtype.kind == "f" else a for a in map(np.asarray, args)])

    return call


def symbols() -> dict:
    """{libdevice symbol: numpy implementation} of the floating-point functions."""
    table = {}
    for name, fn in _FLOAT64.items():
        table[f"__nv_{name}f"] = table[f"__nv_{name}"] = _widened(fn)
    for name, fn in _NATIVE.items():
        table[f"__nv_{name}f"] = table[f"__nv_{name}"] = fn
    for name in _FAST:
        table[f"__nv_fast_{name}f"] = _widened(_FLOAT64[name])
    # names outside the float/double pattern
    table["__nv_isnanf"] = table["__nv_isnand"] = np.isnan
    table["__nv_isinff"] = table["__nv_isinfd"] = np.isinf
    table["__nv_signbitf"] = table["__nv_signbitd"] = np.signbit
    table["__nv_finitef"] = table["__nv_isfinited"] = np.isfinite
    table["__nv_fast_fdividef"] = _fast_fdivide
    table["__nv_saturatef"] = _saturate
    table["__nv_rcp64h"] = _rcp64h
    return table
