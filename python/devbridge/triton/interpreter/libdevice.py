"""libdevice for the interpreter Triton target.

Triton's interpreter has no libdevice: the device-neutral stubs in
triton.language.extra.libdevice (which Inductor's kernels call, e.g.
`libdevice.exp`) return None there, and extern_elementwise raises. During an
interpreted launch devbridge points each stub at the CUDA libdevice function of
the same name, which states the symbol per dtype (`__nv_expf`, `__nv_exp`),
and gives the interpreter's builder an extern_elementwise that evaluates the
symbol with numpy. A symbol without a numpy equivalent is an error naming it.

The Triton names it uses are listed, with the versions checked, in
_triton_api (create_extern_elementwise takes TensorHandle arguments and a tl
type).
"""

from __future__ import annotations

import inspect
import math

try:
    import numpy as np
except ImportError as error:
    raise ImportError("devbridge: the interpreter Triton target runs kernels in Triton's interpreter, "
                      "which computes with numpy, and numpy is not installed: pip install numpy (torch-simdev and "
                      "devbridge[triton] declare it)") from error

from . import _triton_api  # noqa: E402 (after numpy's check, which names the fix)


def _rsqrt(x):
    return 1.0 / np.sqrt(x)


def _vectorized(fn):
    return np.vectorize(fn, otypes=[np.float64])


def _erfinv(y):
    # Newton's method on erf from a closed-form start (Giles' approximation is
    # not needed at this precision): |error| < 1e-12 after 4 steps for |y| < 1.
    y = np.asarray(y, dtype=np.float64)
    a = 0.147
    ln = np.log1p(-y * y)
    term = 2.0 / (math.pi * a) + ln / 2.0
    x = np.sign(y) * np.sqrt(np.sqrt(term * term - ln / a) - term)
    erf = _vectorized(math.erf)
    for _ in range(4):
        x = x - (erf(x) - y) / (2.0 / math.sqrt(math.pi) * np.exp(-x * x))
    return np.where(np.abs(y) >= 1.0, np.sign(y) * np.inf, x)


_UNARY = {
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(10.0, x), "expm1": np.expm1,
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "sqrt": np.sqrt, "rsqrt": _rsqrt, "cbrt": np.cbrt,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh,
    "atanh": np.arctanh,
    "erf": _vectorized(math.erf), "erfc": _vectorized(math.erfc), "erfinv": _erfinv,
    "lgamma": _vectorized(math.lgamma), "tgamma": _vectorized(math.gamma),
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": lambda x: np.trunc(x + np.copysign(0.5, x)),
    "rint": np.rint, "nearbyint": np.rint, "fabs": np.abs, "abs": np.abs,
    "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "signbit": np.signbit,
    "llrint": np.rint, "lrint": np.rint,
}  # fmt: skip
_BINARY = {
    "pow": np.power, "powi": np.power, "atan2": np.arctan2, "fmod": np.fmod, "remainder": np.remainder,
    "fmin": np.fmin, "fmax": np.fmax, "copysign": np.copysign, "hypot": np.hypot, "nextafter": np.nextafter,
    "ldexp": lambda x, e: np.ldexp(x, np.asarray(e, dtype=np.int32)),
    "div_rn": np.divide, "fdiv_rn": np.divide,
}  # fmt: skip
_TERNARY = {"fma": lambda a, b, c: a * b + c}


def _numpy_function(symbol: str):
    """The numpy function of a libdevice symbol (`__nv_expf` -> np.exp)."""
    name = symbol[len("__nv_"):] if symbol.startswith("__nv_") else symbol
    for table in (_UNARY, _BINARY, _TERNARY):
        if table.get(name) is not None:
            return table[name]
    # the float variant: the double's name with an `f` suffix (`expf`, `erff`)
    if name.endswith("f"):
        for table in (_UNARY, _BINARY, _TERNARY):
            if table.get(name[:-1]) is not None:
                return table[name[:-1]]
    # isnan / isinf / signbit / isfinite variants: `isnand`, `signbitd`, `isinfd`, `finitef`
    if name in ("isnand", "isinfd", "signbitd", "finitef", "isfinited"):
        return {"isnand": np.isnan, "isinfd": np.isinf, "signbitd": np.signbit}.get(name, np.isfinite)
    return None


def _extern_elementwise(builder, libName, libPath, symbol, argList, retType, isPure):  # noqa: N803 (Triton's names)
    interpreter = _triton_api.interpreter()
    fn = _numpy_function(symbol)
    if fn is None:
        raise NotImplementedError(f"devbridge: the interpreter Triton target has no numpy equivalent of the libdevice "
                                  f"function {symbol}; compute it from triton.language operations instead")
    scalar = retType.scalar if hasattr(retType, "scalar") else retType
    with np.errstate(all="ignore"):  # inf / nan results are the function's, as on a GPU
        data = np.asarray(fn(*[handle.data for handle in argList]))
    return interpreter.TensorHandle(data.astype(interpreter._get_np_dtype(scalar)), scalar)


_replacements = None  # [(module, name, replacement)], built at the first launch


def _build_replacements():
    interpreter = _triton_api.interpreter()
    interpreter_semantic = interpreter.interpreter_semantic
    stubs, cuda = _triton_api.libdevice_modules()
    if cuda is None:  # a Triton without the NVIDIA backend: the stubs stay
        return []
    replacements = [(interpreter.InterpreterBuilder, "create_extern_elementwise", _extern_elementwise)]
    for name, stub in inspect.getmembers(stubs, inspect.isfunction):
        implementation = getattr(cuda, name, None)
        if implementation is not None and stub.__module__ == stubs.__name__:
            replacements.append((stubs, name, _bound(implementation, interpreter_semantic)))
    # Kernels written against the CUDA module directly take the same route.
    for name, implementation in inspect.getmembers(cuda, inspect.isfunction):
        if implementation.__module__ == cuda.__name__:
            replacements.append((cuda, name, _bound(implementation, interpreter_semantic)))
    return replacements


def patch(scope) -> None:
    """Make libdevice work for the launch (undone by scope.restore())."""
    global _replacements
    if _replacements is None:
        _replacements = _build_replacements()
    for owner, name, replacement in _replacements:
        scope.set_attr(owner, name, replacement)


def _bound(implementation, semantic):
    def call(*args, **kwargs):
        kwargs.pop("_semantic", None)
        return implementation(*args, _semantic=semantic, **kwargs)

    return call
