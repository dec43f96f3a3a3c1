"""libdevice on the interpreter Triton target (python/devbridge/triton/interpreter/libdevice*.py).

(a) Every symbol of Triton's CUDA libdevice module (triton.language.extra.cuda.libdevice,
    read from its source, so a newer Triton's additions fail here) is implemented or
    listed in libdevice.UNSUPPORTED with a reason; no implementation names a symbol
    the module lacks.
(b) Every symbol runs in ONE real @triton.jit kernel on simdev tensors (a kernel
    generated with one call per symbol: one compile for all 313), each against a
    reference computed here: mpmath at 40 digits for the special functions, torch's
    float64 CPU ops for the elementary ones, Python integers for the bit functions,
    Fractions for the rounding-mode arithmetic and conversions (which must be exact).
(c) torch.compile on simdev of the torch ops whose Inductor kernels call libdevice
    functions the interpreter target lacked before, against eager on the CPU.

Tolerances (rtol, atol) are stated per function below; float32 results computed
from a correctly rounded reference may be off by two float32 ulps (2.4e-7).
Run time: about 17 s on two cores with cold caches (the kernel of (b) compiles in about
1.5 s, each of (c) in about 1 s).
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import math
import sys
from fractions import Fraction

import numpy as np
import pytest
import torch

triton = pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")
mpmath = pytest.importorskip("mpmath", reason="mpmath (sympy's dependency, so torch's) computes the references")
import triton.language as tl  # noqa: E402
from triton.language.extra.cuda import libdevice as cuda_libdevice  # noqa: E402

import devbridge.triton  # noqa: E402
from devbridge.triton.interpreter import _triton_api  # noqa: E402
from devbridge.triton.interpreter import libdevice as target  # noqa: E402

from inductor_support import private_inductor, reset_dynamo_around_test  # noqa: E402
from launch_support import skip_without_simdev  # noqa: E402

pytestmark = [skip_without_simdev, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

BLOCK = 64  # values per symbol
DTYPES = {"fp32": np.float32, "fp64": np.float64, "int32": np.int32, "uint32": np.uint32, "int64": np.int64,
          "uint64": np.uint64}
TORCH_DTYPES = {"fp32": torch.float32, "fp64": torch.float64, "int32": torch.int32, "uint32": torch.uint32,
                "int64": torch.int64, "uint64": torch.uint64}


# ---------------------------------------------------------------- (a) the CUDA module's symbols

def cuda_signatures():
    """[(function, symbol, argument types, return type)] of the CUDA libdevice
    module, read from its source: each function's {(arg dtypes): (symbol, ret dtype)}."""
    tree = ast.parse(inspect.getsource(cuda_libdevice))
    found = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        dicts = [d for d in ast.walk(node) if isinstance(d, ast.Dict)]
        assert dicts, f"{node.name}: no dtype -> symbol table in its source; read how this Triton declares it"
        for d in dicts:
            for key, value in zip(d.keys, d.values):
                found.append((node.name, value.elts[0].value, tuple(e.args[0].value for e in key.elts),
                              value.elts[1].args[0].value))
    return found


SIGNATURES = cuda_signatures()


def test_every_cuda_libdevice_symbol_is_implemented_or_listed_with_a_reason():
    functions = {name for name, fn in inspect.getmembers(cuda_libdevice, inspect.isfunction)
                 if fn.__module__ == cuda_libdevice.__name__}
    assert functions == {name for name, *_ in SIGNATURES}, "a function whose symbols this test cannot read"
    symbols = {symbol for _, symbol, *_ in SIGNATURES}
    missing = symbols - set(target.SYMBOLS) - set(target.UNSUPPORTED)
    assert not missing, f"libdevice symbols without an implementation or a reason in UNSUPPORTED: {sorted(missing)}"
    assert not set(target.SYMBOLS) - symbols, "implementations of symbols this Triton's libdevice lacks (a typo?)"
    assert not set(target.SYMBOLS) & set(target.UNSUPPORTED)
    assert all(isinstance(reason, str) and reason for reason in target.UNSUPPORTED.values())
    assert target.UNSUPPORTED == {}, "every symbol is implemented: a new entry needs a reason and a second look"


# ---------------------------------------------------------------- (b) inputs

F = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 1.5, 2.5, -2.5, 3.0, 0.1, -0.1,
     0.25, 0.75, -0.75, 0.999, -0.999, 1.999, 1e-3, -1e-3, 1e-30, -1e-30, 1e-40, 5e-324, 10.0, -10.0, 30.5, 100.25,
     -100.25, 1e5, 1e10, -1e10, 1e30, -1e30, 3e38, -3e38, 1e300, 7.0, 12.5, 0.3, -0.3, 1 / 3, 2 / 3, 1.2, 1.7, 3.7,
     -3.7, 4.5, -5.5, 6.25, 8.0, 20.0, -20.0, 50.0, 0.05, 1.25, -1.25, 0.9, 1e-8]
# Bessel functions of large arguments are phase-sensitive (an absolute error of
# about x * 1e-16 in any double implementation): the arguments stay below 100.
BESSEL = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e-300, 1e-30, 1e-8, 1e-3] + [
    float(v) for v in np.linspace(-60.0, 90.0, 55)]
ORDERS = [0, 1, 2, 3, 5, 10, 20, -1]
EXPONENTS = [-1100, -200, -30, -1, 0, 1, 2, 30, 200, 1100, -(2**31), 2**31 - 1]
POWERS = [-3, -2, -1, 0, 1, 2, 3, 5, 10, -10, 31]
INT_EDGES = [0, 1, -1, 2, 3, -2**31, 2**31 - 1, -2**31 + 1, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x8000, 0x7FFFFF,
             0x800000, 0xFFFFFF, 0x1000000, 12345678, -12345678]


def _fill(values, dtype, seed):
    """BLOCK values of `dtype`: `values` first (integers wrapped to its width), random ones after
    (uniform in [-6, 6], or whole bit patterns for integers)."""
    rng = np.random.default_rng(seed)
    values = list(values)[:BLOCK]
    if np.issubdtype(dtype, np.floating):
        extra = rng.uniform(-6.0, 6.0, BLOCK - len(values))
        return np.array(values + list(extra), dtype=np.float64).astype(dtype)  # 1e300 -> inf in float32
    extra = rng.integers(0, 2**64, BLOCK - len(values), dtype=np.uint64)
    return np.array([_wrap(int(v), dtype) for v in values + list(extra)], dtype=dtype)


def inputs(function, index, ty, seed):
    dtype = DTYPES[ty]
    if function in ("jn", "yn") and index == 0:
        return _fill(ORDERS * 8, dtype, seed)
    if function in ("j0", "j1", "y0", "y1", "jn", "yn"):
        return _fill(BESSEL, dtype, seed)
    if function in ("ldexp", "scalbn") and index == 1:
        return _fill(EXPONENTS * 6, dtype, seed)
    if function == "pow" and ty == "int32":
        return _fill(POWERS * 6, dtype, seed)
    if ty in ("fp32", "fp64"):
        values = np.roll(np.array(F), 17 * index)  # another pairing for each argument
        return _fill(values, dtype, seed)
    if ty in ("int64", "uint64"):
        # and where conversions to float32 / float64 must round
        return _fill(INT_EDGES + [2**24 + 1, 2**53 + 1, 2**62 + 3, 2**63 - 1, -(2**63), 2**63 + 2**11 + 1,
                                  2**64 - 1, -(2**53) - 1], dtype, seed)
    return _fill(INT_EDGES, dtype, seed)


# ---------------------------------------------------------------- (b) one kernel for every symbol

def _kernel_source():
    lines = []
    slots = {ty: 0 for ty in DTYPES}
    for number, (function, symbol, args, ret) in enumerate(SIGNATURES):
        loads = []
        for ty in args:
            loads.append(f"tl.load(in_{ty} + {slots[ty]} * BLOCK + offs)")
            slots[ty] += 1
        lines.append(f"    tl.store(out_{ret} + {number} * BLOCK + offs, libdevice.{function}({', '.join(loads)}))")
    inputs_ = ", ".join(f"in_{ty}" for ty in DTYPES)
    outputs = ", ".join(f"out_{ty}" for ty in DTYPES)
    return ("import triton\nimport triton.language as tl\nfrom triton.language.extra import libdevice\n\n\n"
            f"@triton.jit\ndef every_libdevice_symbol({inputs_}, {outputs}, BLOCK: tl.constexpr):\n"
            "    offs = tl.arange(0, BLOCK)\n" + "\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """{symbol: (argument arrays, result array)} from one launch of the generated kernel."""
    path = tmp_path_factory.mktemp("libdevice-kernel") / "every_libdevice_symbol.py"
    path.write_text(_kernel_source())
    spec = importlib.util.spec_from_file_location("devbridge_test_every_libdevice_symbol", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # the interpreter target finds the kernel's module again by name
    spec.loader.exec_module(module)
    arguments, per_type = [], {ty: [] for ty in DTYPES}
    for number, (function, symbol, args, ret) in enumerate(SIGNATURES):
        arrays = [inputs(function, i, ty, seed=number * 4 + i) for i, ty in enumerate(args)]
        for ty, array in zip(args, arrays):
            per_type[ty].append(array)
        arguments.append(arrays)
    device_in = {ty: torch.from_numpy(np.concatenate(a or [np.zeros(1, DTYPES[ty])])).to("simdev")
                 for ty, a in per_type.items()}
    device_out = {ty: torch.empty(len(SIGNATURES) * BLOCK, dtype=TORCH_DTYPES[ty], device="simdev")
                  for ty in DTYPES}
    with devbridge.triton.activate():
        module.every_libdevice_symbol[(1,)](*device_in.values(), *device_out.values(), BLOCK=BLOCK)
    host_out = {ty: t.cpu().numpy() for ty, t in device_out.items()}
    return {symbol: (arguments[n], host_out[ret][n * BLOCK:(n + 1) * BLOCK])
            for n, (_, symbol, _, ret) in enumerate(SIGNATURES)}


# ---------------------------------------------------------------- (b) references

def _wrap(value: int, dtype) -> int:
    bits = np.dtype(dtype).itemsize * 8
    value &= (1 << bits) - 1
    return value - (1 << bits) if np.issubdtype(dtype, np.signedinteger) and value >> (bits - 1) else value


def _exact_round(v: Fraction, mode: str, dtype) -> float:
    """v rounded to `dtype` in `mode`, found by bracketing v between neighbours (nextafter)."""
    dtype = np.dtype(dtype).type
    info = np.finfo(dtype)
    largest = Fraction(float(info.max))
    if abs(v) > largest:
        half_ulp = Fraction(2) ** (info.maxexp - info.nmant - 2)
        up = {"rn": abs(v) >= largest + half_ulp, "ru": v > 0, "rd": v < 0, "rz": False}[mode]
        return (math.inf if up else float(info.max)) * (-1 if v < 0 else 1)
    c = dtype(float(v))
    while Fraction(float(c)) > v:
        c = np.nextafter(c, dtype(-np.inf))
    while np.isfinite(np.nextafter(c, dtype(np.inf))) and Fraction(float(np.nextafter(c, dtype(np.inf)))) <= v:
        c = np.nextafter(c, dtype(np.inf))
    low = c
    if Fraction(float(low)) == v:
        return float(low)
    high = np.nextafter(low, dtype(np.inf))
    if v < 0 and high == 0:
        high = dtype(-0.0)
    if mode == "rd" or (mode == "rz" and v > 0):
        return float(low)
    if mode == "ru" or mode == "rz":
        return float(high)
    below, above = v - Fraction(float(low)), Fraction(float(high)) - v
    if below != above:
        return float(low if below < above else high)
    even = np.array(low).view(np.uint32 if dtype == np.float32 else np.uint64) % 2 == 0
    return float(low if even else high)


def _ieee(operation, dtype, *xs):
    with np.errstate(all="ignore"):
        xs = [dtype(x) for x in xs]
        return {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
                "div": lambda a, b: a / b, "rcp": lambda a: dtype(1) / a, "sqrt": np.sqrt,
                "rsqrt": lambda a: dtype(1) / np.sqrt(a),
                "fma": lambda a, b, c: dtype(np.float64(a) * np.float64(b) + np.float64(c))}[operation](*xs)


def _rounded_arithmetic(operation, mode, dtype, *xs):
    if not all(math.isfinite(x) for x in xs) or (operation in ("div",) and xs[1] == 0) or (
            operation == "rcp" and xs[0] == 0) or (operation in ("sqrt", "rsqrt") and xs[0] <= 0):
        return float(_ieee(operation, dtype, *xs))  # special operands: IEEE's result in any rounding
    q = [Fraction(x) for x in xs]
    if operation in ("sqrt", "rsqrt"):  # bracket the root between neighbours by squaring them
        target_ = q[0] if operation == "sqrt" else 1 / q[0]
        c = dtype(math.sqrt(target_))
        while Fraction(float(c)) ** 2 > target_:
            c = np.nextafter(c, dtype(0))
        while Fraction(float(np.nextafter(c, dtype(np.inf)))) ** 2 <= target_:
            c = np.nextafter(c, dtype(np.inf))
        low, high = c, np.nextafter(c, dtype(np.inf))
        if Fraction(float(low)) ** 2 == target_ or mode in ("rd", "rz"):
            return float(low)
        if mode == "ru":
            return float(high)
        middle = (Fraction(float(low)) + Fraction(float(high))) / 2
        return float(low if middle ** 2 > target_ else high)
    value = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
             "div": lambda a, b: a / b, "rcp": lambda a: 1 / a, "fma": lambda a, b, c: a * b + c}[operation](*q)
    if value == 0:
        if operation in ("add", "sub", "fma"):  # IEEE 754: an exact zero sum is +0, -0 rounding down...
            addends = {"add": (xs[0], xs[1]), "sub": (xs[0], -xs[1]), "fma": (xs[0] * xs[1], xs[2])}[operation]
            both_negative = all(a == 0 and math.copysign(1, a) < 0 for a in addends)
            plus = all(a == 0 and math.copysign(1, a) > 0 for a in addends)
            return 0.0 if plus else -0.0 if (mode == "rd" or both_negative) else 0.0
        return float(_ieee(operation, dtype, *xs))  # a zero product or quotient: its sign
    return _exact_round(value, mode, dtype)


def _float_to_int(x, mode, signed, bits):
    if math.isnan(x):
        return 0
    low, high = (-(1 << bits - 1), (1 << bits - 1) - 1) if signed else (0, (1 << bits) - 1)
    if math.isinf(x):
        return high if x > 0 else low
    q = Fraction(x)
    r = {"rn": round(q), "rz": math.trunc(q), "rd": math.floor(q), "ru": math.ceil(q)}[mode]  # round(): half-even
    return min(max(r, low), high)


def _round_half_away(x):
    if not math.isfinite(x):
        return x
    magnitude = math.floor(abs(Fraction(x)) + Fraction(1, 2))
    return math.copysign(float(magnitude), x)


def _mp(fn, specials=(), dps=40):
    """A reference evaluated with mpmath; `specials`: (x, expected) pairs from libdevice's documentation."""

    def ref(*xs):
        for x, expected in specials:
            if xs[-1] == x and (x != 0 or math.copysign(1, x) == math.copysign(1, xs[-1])):
                return expected
        if any(isinstance(x, float) and math.isnan(x) for x in xs):
            return math.nan
        try:
            with mpmath.workdps(dps):
                value = fn(*[mpmath.mpf(x) if isinstance(x, float) else x for x in xs])
        except (ValueError, ZeroDivisionError):
            return math.nan
        if isinstance(value, mpmath.mpc):
            return math.nan if value.imag != 0 else float(value.real)
        return float(value)

    return ref


def _norm(*xs):
    if any(math.isinf(x) for x in xs):
        return math.inf
    if any(math.isnan(x) for x in xs):
        return math.nan
    with mpmath.workdps(40):
        return float(mpmath.sqrt(sum(mpmath.mpf(x) ** 2 for x in xs)))


def _orders(ref):
    """jn / yn: NaN for a negative order n, whatever x (libdevice's guide)."""
    return lambda n, x: math.nan if n < 0 else ref(n, x)


def _recip(fn):
    def ref(*xs):
        value = fn(*xs)
        return math.copysign(math.inf, value) if value == 0 else 1 / value

    return ref


INF, NAN = math.inf, math.nan
# libdevice's documented values at the edges where mpmath has none (or a complex one)
MPMATH = {
    "cbrt": _mp(lambda x: mpmath.sign(x) * mpmath.cbrt(abs(x)), [(INF, INF), (-INF, -INF), (0.0, 0.0), (-0.0, -0.0)]),
    "rcbrt": _mp(lambda x: 1 / (mpmath.sign(x) * mpmath.cbrt(abs(x))),
                 [(INF, 0.0), (-INF, -0.0), (0.0, INF), (-0.0, -INF)]),
    "sinpi": _mp(mpmath.sinpi, [(INF, NAN), (-INF, NAN)]),
    "cospi": _mp(mpmath.cospi, [(INF, NAN), (-INF, NAN)]),
    # erfcx(x) = 1 / (x sqrt(pi)) (1 - 1 / (2 x^2) + ...) past 1e8, where mpmath's erfc underflows its exponent
    "erfcx": _mp(lambda x: mpmath.erfc(x) * mpmath.exp(x * x) if x < 1e8 else 1 / (x * mpmath.sqrt(mpmath.pi)),
                 [(INF, 0.0), (-INF, INF)]),
    "normcdf": _mp(mpmath.ncdf, [(INF, 1.0), (-INF, 0.0)]),
    "erf": _mp(mpmath.erf, [(INF, 1.0), (-INF, -1.0)]),
    "erfc": _mp(lambda x: mpmath.erfc(x) if x < 1e3 else mpmath.mpf(0), [(INF, 0.0), (-INF, 2.0)]),  # underflows
    "erfinv": _mp(lambda y: mpmath.erfinv(y) if -1 < y < 1 else mpmath.mpf("nan"), [(1.0, INF), (-1.0, -INF)]),
    "lgamma": _mp(lambda x: mpmath.re(mpmath.loggamma(x)) if x > 0 or x != mpmath.floor(x) else mpmath.inf,
                  [(INF, INF), (-INF, INF)]),
    "normcdfinv": _mp(lambda p: mpmath.sqrt(2) * mpmath.erfinv(2 * p - 1) if 0 < p < 1 else mpmath.mpf("nan"),
                      [(0.0, -INF), (-0.0, -INF), (1.0, INF)], dps=800),
    "erfcinv": _mp(lambda y: mpmath.erfinv(1 - y) if 0 < y < 2 else mpmath.mpf("nan"),
                   [(0.0, INF), (-0.0, INF), (2.0, -INF)], dps=800),
    "j0": _mp(lambda x: mpmath.besselj(0, x), [(INF, 0.0), (-INF, 0.0)]),
    "j1": _mp(lambda x: mpmath.besselj(1, x), [(INF, 0.0), (-INF, -0.0)]),
    "y0": _mp(lambda x: mpmath.bessely(0, x) if x > 0 else mpmath.mpf("nan"), [(INF, 0.0), (0.0, -INF), (-0.0, -INF)]),
    "y1": _mp(lambda x: mpmath.bessely(1, x) if x > 0 else mpmath.mpf("nan"), [(INF, 0.0), (0.0, -INF), (-0.0, -INF)]),
    "jn": _orders(_mp(lambda n, x: mpmath.besselj(n, x), [(INF, 0.0), (-INF, 0.0)])),
    "yn": _orders(_mp(lambda n, x: mpmath.bessely(n, x) if x > 0 else mpmath.mpf("nan"),
                      [(INF, 0.0), (0.0, -INF), (-0.0, -INF)])),
    "cyl_bessel_i0": _mp(lambda x: mpmath.besseli(0, x), [(INF, INF), (-INF, INF)]),
    "cyl_bessel_i1": _mp(lambda x: mpmath.besseli(1, x), [(INF, INF), (-INF, -INF)]),
    "tgamma": _mp(mpmath.gamma, [(INF, INF), (-INF, NAN), (0.0, INF), (-0.0, -INF)]),
    "norm3d": _norm, "norm4d": _norm, "hypot": _norm,
    "rnorm3d": _recip(_norm), "rnorm4d": _recip(_norm), "rhypot": _recip(_norm),
}

_T = torch
TORCH_FLOAT64 = {
    "exp": _T.exp, "exp2": _T.exp2, "exp10": lambda x: _T.pow(10.0, x), "expm1": _T.expm1, "log": _T.log,
    "log2": _T.log2, "log10": _T.log10, "log1p": _T.log1p, "sqrt": _T.sqrt, "rsqrt": _T.rsqrt, "sin": _T.sin,
    "cos": _T.cos, "tan": _T.tan, "asin": _T.asin, "acos": _T.acos, "atan": _T.atan, "sinh": _T.sinh,
    "cosh": _T.cosh, "tanh": _T.tanh, "asinh": _T.asinh, "acosh": _T.acosh, "atanh": _T.atanh, "atan2": _T.atan2,
    "pow": lambda x, y: _T.pow(x, y.double()),
    "fast_sinf": _T.sin, "fast_cosf": _T.cos, "fast_tanf": _T.tan, "fast_expf": _T.exp,
    "fast_exp10f": lambda x: _T.pow(10.0, x), "fast_logf": _T.log, "fast_log2f": _T.log2,
    "fast_log10f": _T.log10, "fast_powf": _T.pow,
}
# computed in the argument's own type (exact there)
TORCH_NATIVE = {
    "floor": _T.floor, "ceil": _T.ceil, "trunc": _T.trunc, "rint": _T.round, "nearbyint": _T.round,
    "copysign": _T.copysign, "nextafter": _T.nextafter, "isnan": _T.isnan, "isinf": _T.isinf,
    "finitef": _T.isfinite, "isfinited": _T.isfinite, "signbit": _T.signbit,
}


def _bits(x, dtype):
    return int(np.array(x, dtype=dtype).view({4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]))


def _from_bits(value, dtype):
    return float(np.array(value, dtype={4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]).view(dtype))


def _byte_perm(x, y, s):
    source = (x & 0xFFFFFFFF) | (y & 0xFFFFFFFF) << 32
    return sum(((source >> 8 * ((s >> 4 * n) & 7)) & 0xFF) << 8 * n for n in range(4))


def _low24(v, signed):
    v &= 0xFFFFFF
    return v - (1 << 24) if signed and v >> 23 else v


INTEGER = {  # symbol -> Python reference on Python ints (unsigned arguments arrive unsigned)
    "__nv_clz": lambda x: 32 - (x & 0xFFFFFFFF).bit_length(), "__nv_clzll": lambda x: 64 - (x % 2**64).bit_length(),
    "__nv_popc": lambda x: bin(x & 0xFFFFFFFF).count("1"), "__nv_popcll": lambda x: bin(x % 2**64).count("1"),
    "__nv_ffs": lambda x: (x & -x & 0xFFFFFFFF).bit_length(), "__nv_ffsll": lambda x: (x & -x % 2**64).bit_length(),
    "__nv_brev": lambda x: int(f"{x & 0xFFFFFFFF:032b}"[::-1], 2),
    "__nv_brevll": lambda x: int(f"{x % 2**64:064b}"[::-1], 2),
    "__nv_byte_perm": _byte_perm,
    "__nv_mulhi": lambda a, b: (a * b) >> 32, "__nv_umulhi": lambda a, b: (a * b) >> 32,
    "__nv_mul64hi": lambda a, b: (a * b) >> 64, "__nv_umul64hi": lambda a, b: (a * b) >> 64,
    "__nv_mul24": lambda a, b: _low24(a, True) * _low24(b, True),
    "__nv_umul24": lambda a, b: _low24(a, False) * _low24(b, False),
    "__nv_sad": lambda x, y, z: abs(x - y) + z, "__nv_usad": lambda x, y, z: abs(x - y) + z,
    "__nv_hadd": lambda x, y: (x + y) >> 1, "__nv_uhadd": lambda x, y: (x + y) >> 1,
    "__nv_rhadd": lambda x, y: (x + y + 1) >> 1, "__nv_urhadd": lambda x, y: (x + y + 1) >> 1,
    "__nv_abs": abs, "__nv_llabs": abs,
    "__nv_float_as_int": lambda x: _bits(x, np.float32), "__nv_float_as_uint": lambda x: _bits(x, np.float32),
    "__nv_double_as_longlong": lambda x: _bits(x, np.float64),
    "__nv_double2loint": lambda x: _bits(x, np.float64) & 0xFFFFFFFF,
    "__nv_double2hiint": lambda x: _bits(x, np.float64) >> 32,
    # libdevice's guide: ilogb(0) and ilogb(NaN) are INT_MIN, ilogb(+-inf) INT_MAX
    "__nv_ilogbf": lambda x: (-2**31 if x == 0 or math.isnan(x) else 2**31 - 1 if math.isinf(x)
                              else math.frexp(x)[1] - 1),
    "__nv_llrintf": lambda x: _float_to_int(x, "rn", True, 64),
    "__nv_llroundf": lambda x: _float_to_int(_round_half_away(x), "rz", True, 64),
}
INTEGER["__nv_ilogb"], INTEGER["__nv_llrint"], INTEGER["__nv_llround"] = (
    INTEGER["__nv_ilogbf"], INTEGER["__nv_llrintf"], INTEGER["__nv_llroundf"])
for _mode in ("rn", "rz", "rd", "ru"):
    for _source in ("float", "double"):
        for _name, _signed, _width in (("int", True, 32), ("uint", False, 32), ("ll", True, 64), ("ull", False, 64)):
            INTEGER[f"__nv_{_source}2{_name}_{_mode}"] = (
                lambda m, s, w: lambda x: _float_to_int(x, m, s, w))(_mode, _signed, _width)

BITCASTS_TO_FLOAT = {
    "__nv_int_as_float": lambda x: _from_bits(x & 0xFFFFFFFF, np.float32),
    "__nv_uint_as_float": lambda x: _from_bits(x, np.float32),
    "__nv_longlong_as_double": lambda x: _from_bits(x % 2**64, np.float64),
    "__nv_hiloint2double": lambda hi, lo: _from_bits((hi & 0xFFFFFFFF) << 32 | (lo & 0xFFFFFFFF), np.float64),
}


def _logb(x):
    return math.nan if math.isnan(x) else math.inf if math.isinf(x) else -math.inf if x == 0 else float(
        math.frexp(x)[1] - 1)


def _remainder(x, y):
    return math.nan if math.isnan(x) or math.isnan(y) or math.isinf(x) or y == 0 else math.remainder(x, y)


def _fmod(x, y):
    return math.nan if math.isnan(x) or math.isnan(y) or math.isinf(x) or y == 0 else math.fmod(x, y)


def _fdim(x, y):
    return math.nan if math.isnan(x) or math.isnan(y) else (x - y if x > y else 0.0)


def _ldexp(x, n):
    try:
        return math.ldexp(x, n)
    except OverflowError:
        return math.copysign(math.inf, x)


def _fast_fdivide(x, y):  # CUDA's __fdividef: 0 (NaN for an infinite x) when 2**126 < |y| < 2**128
    if 2.0**126 < abs(y) < 2.0**128:
        return math.nan if math.isinf(x) else 0.0 * x * math.copysign(1, y)
    return float(np.float32(x) / np.float32(y))


SCALAR_FLOAT = {
    "round": _round_half_away, "remainder": _remainder, "fmod": _fmod, "logb": _logb, "fdim": _fdim,
    "abs": abs, "saturatef": lambda x: 0.0 if math.isnan(x) else min(max(x, 0.0), 1.0) + 0.0,
    "fast_dividef": _fast_fdivide, "ldexp": _ldexp, "scalbn": _ldexp,
}


def _tolerance(function, ret):
    """(rtol, atol) against a reference correctly rounded to the result type."""
    if ret == "fp32":
        return 2.5e-7, 3e-45  # two float32 ulps; subnormals: two of the smallest
    # float64: two ulps, and two of the smallest subnormals; where the kernels
    # are torch's or recurrences, what they achieve (measured against mpmath)
    rtol, atol = {
        "j0": (1e-14, 1e-15), "j1": (1e-14, 1e-15), "y0": (1e-14, 1e-15), "y1": (1e-14, 1e-15),
        "jn": (1e-13, 1e-15), "yn": (1e-13, 1e-15), "tgamma": (2e-14, 0.0), "erfcx": (1e-14, 0.0),
        "normcdf": (1e-14, 0.0), "normcdfinv": (1e-14, 0.0), "erfcinv": (1e-14, 0.0), "cyl_bessel_i0": (1e-14, 0.0),
        "cyl_bessel_i1": (1e-14, 0.0), "erfinv": (1e-14, 0.0), "lgamma": (1e-14, 1e-15), "rcp64h": (2.0**-19, 0.0),
    }.get(function, (5e-16, 0.0))
    return rtol, max(atol, 1e-323)


_ROUNDING_OPERATIONS = {"add", "sub", "mul", "div", "rcp", "sqrt"}


def reference(function, symbol, args, ret):
    """(expected values, exact?) for `symbol` on `args` (numpy arrays)."""
    py = [[int(v) if np.issubdtype(a.dtype, np.integer) else float(v) for v in a] for a in args]
    rows = list(zip(*py))
    dtype = DTYPES[ret]
    name = symbol[len("__nv_"):]
    for operation in _ROUNDING_OPERATIONS | {"fma", "rsqrt"}:  # __nv_fadd_rz, __nv_dsqrt_rn, __nv_fmaf_ru, ...
        for prefix in ("f", "d", ""):
            for suffix in ("_rn", "_rz", "_rd", "_ru", "f_rn", "f_rz", "f_rd", "f_ru"):
                if name == prefix + operation + suffix and (operation not in ("fma", "rsqrt") or prefix != "d"):
                    mode = suffix[-2:]
                    return [_rounded_arithmetic(operation, mode, dtype, *row) for row in rows], True
    if name in ("fmaf", "fma"):
        return [_rounded_arithmetic("fma", "rn", dtype, *row) for row in rows], True
    if "2float_" in name or "2double_" in name:  # conversions to float: exact, in the named rounding
        mode = name[-2:]
        return [x if isinstance(x, float) and (not math.isfinite(x) or x == 0) else
                _exact_round(Fraction(x), mode, dtype) for (x,) in rows], True
    if symbol in INTEGER:
        return [_wrap(INTEGER[symbol](*row), dtype) for row in rows], True
    if symbol in BITCASTS_TO_FLOAT:
        return [BITCASTS_TO_FLOAT[symbol](*row) for row in rows], True
    if function in SCALAR_FLOAT:
        return [SCALAR_FLOAT[function](*row) for row in rows], function != "fast_dividef"
    if function == "rcp64h":  # an approximation: 1/x to about 2**-20
        return [1 / x if x else math.copysign(math.inf, x) for (x,) in rows], False
    if function in ("isnan", "isinf", "signbit") or function in TORCH_NATIVE:
        op = TORCH_NATIVE.get(function) or TORCH_NATIVE[name]
        tensors = [torch.from_numpy(a.copy()) for a in args]
        return op(*tensors).to(torch.float64).tolist(), True
    if function == "powi" or (function == "pow" and args[1].dtype == np.int32):
        tensors = [torch.from_numpy(args[0].astype(np.float64)), torch.from_numpy(args[1].astype(np.float64))]
        return torch.pow(*tensors).tolist(), False
    if function in MPMATH:
        return [MPMATH[function](*row) for row in rows], False
    op = TORCH_FLOAT64[function if function in TORCH_FLOAT64 else name]
    tensors = [torch.from_numpy(a.astype(np.float64) if a.dtype.kind == "f" else a.astype(np.int64)) for a in args]
    return op(*tensors).tolist(), False


def _same(actual, expected, exact, rtol, atol):
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    both_nan = np.isnan(a) & np.isnan(e)
    if exact:
        return both_nan | ((a == e) & (np.signbit(a) == np.signbit(e)))
    with np.errstate(all="ignore"):
        close = np.abs(a - e) <= atol + rtol * np.abs(e)
    return both_nan | (a == e) | (np.isfinite(a) & np.isfinite(e) & close)


@pytest.mark.parametrize("function, symbol, args, ret", SIGNATURES, ids=[s for _, s, _, _ in SIGNATURES])
def test_each_symbol_in_a_kernel_on_simdev_matches_its_reference(results, function, symbol, args, ret):
    arguments, actual = results[symbol]
    assert actual.dtype == DTYPES[ret]
    values, exact = reference(function, symbol, arguments, ret)
    dtype = DTYPES[ret]
    if np.issubdtype(dtype, np.integer):
        expected = np.array([_wrap(int(v), dtype) for v in values], dtype=object).astype(dtype)
        ok = actual == expected
    else:
        expected = np.array(values, dtype=np.float64).astype(dtype)  # the reference, rounded to the result type
        ok = _same(actual, expected, exact, *_tolerance(function, ret))
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, f"{symbol}: " + "; ".join(
        f"{tuple(a[i] for a in arguments)} -> {actual[i]!r}, expected {expected[i]!r}" for i in bad[:6])


# ---------------------------------------------------------------- (b') the CUDA module directly, and errors

@triton.jit
def _cuda_module_kernel(x, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + offs)
    tl.store(out + offs, cuda_libdevice.cyl_bessel_i0(v) + cuda_libdevice.erfcx(v))


def test_kernels_calling_the_cuda_module_directly_run_too():
    x = torch.linspace(-3.0, 3.0, 16)
    out = torch.empty(16, device="simdev")
    with devbridge.triton.activate():
        _cuda_module_kernel[(1,)](x.to("simdev"), out, BLOCK=16)
    torch.testing.assert_close(out.cpu(), torch.i0(x) + torch.special.erfcx(x))


def test_a_symbol_without_an_implementation_is_an_error_naming_it():
    # What a launch meets for a symbol a newer Triton adds: the builder's
    # extern_elementwise, called as Triton's interpreter calls it.
    interpreter = _triton_api.interpreter()
    handle = interpreter.TensorHandle(np.ones(4, dtype=np.float32), tl.float32)
    with pytest.raises(NotImplementedError, match="cannot evaluate the libdevice function __nv_devbridge_made_up"):
        target._extern_elementwise(None, "", "", "__nv_devbridge_made_up", [handle], tl.float32, True)


# ---------------------------------------------------------------- (c) torch.compile of the ops that need them

@pytest.fixture(scope="module")
def inductor_for_simdev(tmp_path_factory):
    with private_inductor(tmp_path_factory.mktemp("inductor-cache")):
        yield


fresh_dynamo = pytest.fixture(name="fresh_dynamo")(reset_dynamo_around_test)

_X = torch.randn(64, generator=torch.Generator().manual_seed(0), dtype=torch.float32) * 3
OPS = {
    "i0": (torch.i0, _X), "special.i1": (torch.special.i1, _X),
    "special.bessel_j0": (torch.special.bessel_j0, _X), "special.bessel_j1": (torch.special.bessel_j1, _X),
    "special.bessel_y0": (torch.special.bessel_y0, _X.abs() + 0.1),
    "special.bessel_y1": (torch.special.bessel_y1, _X.abs() + 0.1),
    "special.modified_bessel_i0": (torch.special.modified_bessel_i0, _X),
    "special.modified_bessel_i1": (torch.special.modified_bessel_i1, _X),
    "special.erfcx": (torch.special.erfcx, _X), "special.log_ndtr": (torch.special.log_ndtr, _X * 4),
    "frexp": (torch.frexp, _X * 1000), "mvlgamma": (lambda t: torch.mvlgamma(t, p=3), _X.abs() + 1.5),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_torch_compile_of_ops_calling_libdevice_matches_eager_on_cpu(inductor_for_simdev, fresh_dynamo, name):
    op, x = OPS[name]
    compiled = torch.compile(op)(x.to("simdev"))
    torch.simdev.synchronize()
    expected = op(x)
    for got, want in zip(*(v if isinstance(v, tuple) else (v,) for v in (compiled, expected))):
        assert got.device.type == "simdev"
        torch.testing.assert_close(got.cpu(), want, rtol=2e-5, atol=1e-6, equal_nan=True)


class _RecordingScope:
    """The set_attr/restore of an interpreted launch's patch scope, for target.patch()."""

    def __init__(self):
        self.saved = []

    def set_attr(self, owner, name, value):
        self.saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    def restore(self):
        for owner, name, value in reversed(self.saved):
            setattr(owner, name, value)


def test_a_kernel_compiled_while_a_launch_has_libdevice_patched_gets_its_usual_cache_key():
    # The launch's replacements are process-wide: torch.compile computes a new
    # kernel's cache key on the host thread while simdev's stream worker runs
    # an interpreted kernel, and Triton's dependency finder refused the
    # replacement ("Unsupported function referenced: <function _bound.<locals>.call>").
    from triton.language.extra import libdevice

    def make_kernel():
        @triton.jit
        def uses_libdevice(x_ptr, n, BLOCK: tl.constexpr):
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n
            tl.store(x_ptr + offsets, libdevice.erfcx(tl.load(x_ptr + offsets, mask=mask)), mask=mask)

        return uses_libdevice

    usual = make_kernel().cache_key
    scope = _RecordingScope()
    target.patch(scope)
    try:
        assert cuda_libdevice.erfcx.__qualname__ == "_bound.<locals>.call"  # the launch's replacement is in place
        during_a_launch = make_kernel().cache_key
    finally:
        scope.restore()
    assert during_a_launch == usual
