"""libdevice for the interpreter Triton target.

Triton's interpreter has no libdevice: the device-neutral stubs in
triton.language.extra.libdevice (which Inductor's kernels call, e.g.
`libdevice.exp`) return None there, and extern_elementwise raises. During an
interpreted launch devbridge points each stub at the CUDA libdevice function of
the same name (triton.language.extra.cuda.libdevice), which picks the symbol
and return type per argument type (`__nv_expf` -> fp32 for fp32, `__nv_exp`
-> fp64 for fp64, `__nv_ilogbf` -> int32), and gives the interpreter's
builder an extern_elementwise that evaluates that symbol with numpy.

Every symbol of that module (Triton 3.6.0, 3.7.1 and 3.8.0 declare the same
313) has an implementation, in modules by kind:
  libdevice_math      floating-point functions in float64 (numpy, i.e. libm),
                      with libdevice's documented values at zeros, infinities
                      and NaN; a float32 symbol computes in float64 and is
                      rounded to float32 once, here
  libdevice_special   its special functions: torch's CPU kernels in float64
                      (erfcx, ndtri, i0, ...), accurate J0/J1/Y0/Y1 where
                      torch's are not, jn / yn, tgamma, erfcinv, normcdf
  libdevice_rounding  the _rn/_rz/_rd/_ru arithmetic (add, sub, mul, div,
                      rcp, sqrt, fma) and conversions to float: exact, IEEE
                      754's result for the named rounding
  libdevice_bits      integer and bit functions, bit casts, conversions to
                      integers: exact
Their docstrings say where a result can differ from a GPU's (subnormals are
kept, not flushed; `fast_` functions are accurate; out-of-range conversions
to integers saturate, as PTX's cvt does). Each result takes the
return type the CUDA wrapper states; integer results keep the low bits of
that type, as the GPU's register does (__nv_float2uint_rn returns the
uint32's bits as int32). UNSUPPORTED names a symbol that has no
implementation, with the reason; it is empty, and
tests/python/test_interpreter_libdevice.py fails for a symbol a newer Triton
adds until it is implemented or listed there. A symbol outside both (a
future Triton's) is an error naming it.

The Triton names it uses are listed, with the versions checked, in
_triton_api (create_extern_elementwise takes TensorHandle arguments and a tl
type).
"""

from __future__ import annotations

import inspect

try:
    import numpy as np
except ImportError as error:
    raise ImportError("devbridge: the interpreter Triton target runs kernels in Triton's interpreter, "
                      "which computes with numpy, and numpy is not installed: pip install numpy (torch-simdev and "
                      "devbridge[triton] declare it)") from error

from . import _triton_api  # noqa: E402 (after numpy's check, which names the fix)
from . import libdevice_bits, libdevice_math, libdevice_rounding  # noqa: E402

#: {libdevice symbol: numpy implementation (numpy arrays in, an array out)}
SYMBOLS = {**libdevice_math.symbols(), **libdevice_bits.symbols(), **libdevice_rounding.symbols()}
#: {libdevice symbol: why the interpreter target cannot evaluate it}
UNSUPPORTED: dict[str, str] = {}


def _extern_elementwise(builder, libName, libPath, symbol, argList, retType, isPure):  # noqa: N803 (Triton's names)
    interpreter = _triton_api.interpreter()
    fn = SYMBOLS.get(symbol)
    if fn is None:
        reason = UNSUPPORTED.get(symbol, "a libdevice symbol this version of devbridge does not know")
        raise NotImplementedError(f"devbridge: the interpreter Triton target cannot evaluate the libdevice function "
                                  f"{symbol} ({reason}); compute it from triton.language operations instead")
    scalar = retType.scalar if hasattr(retType, "scalar") else retType
    arguments = [np.asarray(handle.data) for handle in argList]
    shape = np.broadcast_shapes(*[a.shape for a in arguments])
    with np.errstate(all="ignore"):  # inf / nan results are the function's, as on a GPU
        data = np.asarray(fn(*[np.atleast_1d(a) for a in arguments]))
    # The implementations give exact integers (int64 / uint64, bool) or floats:
    # casting keeps an integer's low bits and rounds a float64 to float32 once.
    data = data.astype(interpreter._get_np_dtype(scalar)).reshape(shape)
    return interpreter.TensorHandle(data, scalar)


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

    # The replacement is visible to every thread while a launch runs. A
    # kernel compiled on another thread meanwhile (torch.compile compiles a
    # graph while simdev's stream worker interprets the previous one) has its
    # cache key computed from the functions it references, and Triton's
    # dependency finder skips builtins (the libdevice functions it replaces
    # are builtins) but refuses other functions ("Unsupported function
    # referenced"). Marked as the builtin it stands for: the same key, no error.
    call.__triton_builtin__ = True
    return call
