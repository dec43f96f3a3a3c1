"""The differential table: Triton kernels run once by Triton's interpreter on
CPU tensors in a fresh process with TRITON_INTERPRET=1 (what a kernel author
gets there) and once on simdev tensors through devbridge
(test_triton_simdev_differential.py), compared bit for bit.

    TRITON_INTERPRET=1 python triton_differential_kernels.py OUT.pt

writes {case name: [output tensors] or "error: ..."} for every case.

What the table covers: every tl operation family (arithmetic, comparison,
bitwise, unary and math, casts and bitcasts, reductions, scans, atomics,
masked and 2-D-masked memory, dot, shape operations, control flow) over every
dtype Triton's interpreter computes with (int8..int64, uint8..uint64, fp16,
bf16, fp32, fp64, bool, and the four fp8 types torch has), 1-D, 2-D and 3-D
grids, host TensorDescriptor arguments, runtime-updated sources (most kernels here are templates whose
placeholder is replaced after decoration), constexpr variants, helper
@triton.jit functions, and autotuned kernels.

A template is specialized as each side's kernel authors do it:
JITFunction._unsafe_update_src on the JITFunction (code generators, Triton's
own test helpers on a GPU); under TRITON_INTERPRET=1, where @triton.jit gives
an InterpretedFunction without a source to update, the replaced text is
executed as a new function (Triton's test helpers do the same there), with
its text in linecache so the interpreter's rewriter reads it.

Inputs come from a fixed seed per case, so both sides start from the same bits.
"""

from __future__ import annotations

import inspect
import itertools
import linecache
import os
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import triton
import triton.language as tl
from triton.runtime.autotuner import Autotuner
from triton.tools.tensor_descriptor import TensorDescriptor

INTERPRET = bool(triton.knobs.runtime.interpret)
_TRITON = tuple(int(part) for part in triton.__version__.split(".")[:2])

# ---------------------------------------------------------------- dtypes

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "bfloat16", "float32", "float64"]
# fp8e4b8 and fp8e5b16 are not here: Triton's interpreter cannot type them
# (its dtype.to_ir has no case for them: "fail to convert fp8e4b8 to ir type").
# fp8e4b15, which torch has no dtype for, is cast to and from inside kernels.
FP8 = ["float8e4nv", "float8e5"]
NUMERIC = INTS + FLOATS
ALL = NUMERIC + ["int1"]

TORCH = {
    "int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64,
    "uint8": torch.uint8, "uint16": torch.uint16, "uint32": torch.uint32, "uint64": torch.uint64,
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64,
    "int1": torch.bool, "float8e4nv": torch.float8_e4m3fn, "float8e5": torch.float8_e5m2,
    "float8e4b8": torch.float8_e4m3fnuz, "float8e5b16": torch.float8_e5m2fnuz,
}  # fmt: skip
BITS = {name: torch.empty(0, dtype=dtype).element_size() * 8 for name, dtype in TORCH.items()}


def tl_dtype(name: str):
    return getattr(tl, name)


def _values(name: str, n: int, g: torch.Generator, kind: str = "any") -> torch.Tensor:
    """n seeded values of dtype `name`; kind: any, nonzero (divisors), shift (0..bits-1), positive."""
    dtype = TORCH[name]
    if name == "int1":
        return torch.randint(0, 2, (n,), generator=g).bool()
    if name in INTS:
        if kind == "shift":
            return torch.randint(0, BITS[name], (n,), generator=g).to(dtype)
        low = 0 if name.startswith("u") else -60
        if kind == "positive":
            low = 1
        v = torch.randint(low, 61, (n,), generator=g)
        if kind == "nonzero":
            v = torch.where(v == 0, torch.ones_like(v) * 7, v)
        return v.to(dtype)
    v = torch.randn(n, generator=g, dtype=torch.float64) * 4
    if kind == "positive":
        v = v.abs() + 0.25
    if kind == "nonzero":
        v = torch.where(v.abs() < 0.25, torch.full_like(v, 0.5), v)
    if kind == "unit":
        v = torch.rand(n, generator=g, dtype=torch.float64) * 1.8 - 0.9
    return v.to(dtype)


# ---------------------------------------------------------------- specializing templates

_generated = 0
_specialized: dict[tuple, Any] = {}


def specialize(template, **replacements):
    """`template` with each placeholder NAME replaced by its text (see the module docstring)."""
    global _generated
    key = (id(template), tuple(sorted(replacements.items())))
    kernel = _specialized.get(key)
    if kernel is not None:
        return kernel
    if INTERPRET:
        source = textwrap.dedent(inspect.getsource(template.fn))
        source = source[source.index("def "):]
        for name, text in replacements.items():
            source = source.replace(name, text)
        _generated += 1
        filename = f"<devbridge-differential-{_generated}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        namespace = dict(template.fn.__globals__)
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our own template text
        kernel = triton.jit(namespace[template.fn.__name__])
    else:
        kernel = triton.JITFunction(template.fn)
        source = kernel.src
        for name, text in replacements.items():
            source = source.replace(name, text)
        kernel._unsafe_update_src(source)
    _specialized[key] = kernel
    return kernel


# ---------------------------------------------------------------- templates and kernels

N = 64  # elements per 1-D case: two programs of BLOCK=32, the second partly masked where n < 64
N_USED = 57


@triton.jit
def unary_template(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(x + offs, mask=mask)
    tl.store(out + offs, EXPR, mask=mask)


@triton.jit
def binary_template(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(x + offs, mask=mask)
    b = tl.load(y + offs, mask=mask)
    tl.store(out + offs, EXPR, mask=mask)


@triton.jit
def ternary_template(x, y, z, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(x + offs, mask=mask)
    b = tl.load(y + offs, mask=mask)
    c = tl.load(z + offs, mask=mask)
    tl.store(out + offs, EXPR, mask=mask)


@triton.jit
def unmasked_binary_template(x, y, out, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(x + offs)
    b = tl.load(y + offs)
    tl.store(out + offs, EXPR)


@triton.jit
def scalar_template(x, out, s, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(x + offs, mask=mask)
    tl.store(out + offs, EXPR, mask=mask)


@triton.jit
def reduce_template(x, out, M: tl.constexpr, N: tl.constexpr):
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)[None, :]
    a = tl.load(x + rows * N + cols)
    r = EXPR
    OUT_STORE


@triton.jit
def masked_2d_template(x, out, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    a = tl.load(x + rm[:, None] * N + rn[None, :], mask=mask, other=OTHER)
    tl.store(out + rm[:, None] * N + rn[None, :], EXPR, mask=mask)


@triton.jit
def atomic_template(ptr, vals, old, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(vals + offs, mask=mask)
    target = offs % 5
    previous = EXPR
    tl.store(old + offs, tl.where(mask, previous, 0), mask=mask)


@triton.jit
def dot_template(a, b, c, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, OUT_DTYPE: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    x = tl.load(a + rm[:, None] * K + rk[None, :])
    y = tl.load(b + rk[:, None] * N + rn[None, :])
    acc = tl.zeros((M, N), dtype=OUT_DTYPE)
    acc = EXPR
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def shape_template(x, out, M: tl.constexpr, N: tl.constexpr):
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)[None, :]
    a = tl.load(x + rows * N + cols)
    r = EXPR
    flat = tl.reshape(r, (M * N,))
    tl.store(out + tl.arange(0, M * N), flat)


# Hand-written kernels (not templates): helpers, control flow, grids, constexpr variants, autotune.


@triton.jit
def _square(v):
    return v * v


@triton.jit
def _axpy(a, x, y):
    return a * _square(x) + y  # a helper calling a helper


@triton.jit
def _pair(v):
    return v + 1, v - 1


@triton.jit
def _max_combine(a, b):
    return tl.maximum(a, b)


@triton.jit
def _mul_combine(a, b):
    return a * b


@triton.jit
def helpers_kernel(x, out, out2, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x + offs, mask=mask)
    hi, lo = _pair(v)
    tl.store(out + offs, _axpy(2.0, v, hi), mask=mask)
    tl.store(out2 + offs, lo, mask=mask)


@triton.jit
def custom_reduce_scan_kernel(x, out, out2, N: tl.constexpr):
    offs = tl.arange(0, N)
    v = tl.load(x + offs)
    tl.store(out, tl.reduce(v, 0, _max_combine))
    tl.store(out2 + offs, tl.associative_scan(v, 0, _mul_combine))


@triton.jit
def control_flow_kernel(x, out, n, steps, threshold, BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x + offs, mask=mask)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(steps):  # a runtime bound
        acc += v * i
    for j in tl.static_range(UNROLL):
        acc += j
    k = 0
    while k < 3:
        acc = acc * 0.5
        k += 1
    if threshold > 0:
        acc = tl.where(acc > threshold, threshold, acc)
    else:
        acc = -acc
    tl.store(out + offs, acc, mask=mask)


@triton.jit
def control_flow_const_kernel(x, out, n, threshold, BLOCK: tl.constexpr, UNROLL: tl.constexpr, STEPS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x + offs, mask=mask)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(STEPS):
        acc += v * i
    for j in tl.static_range(UNROLL):
        acc += j
    k = 0
    while k < 3:
        acc = acc * 0.5
        k += 1
    if threshold > 0:
        acc = tl.where(acc > threshold, threshold, acc)
    else:
        acc = -acc
    tl.store(out + offs, acc, mask=mask)


@triton.jit
def grid_3d_kernel(out, X: tl.constexpr, Y: tl.constexpr):
    px, py, pz = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    nx, ny, nz = tl.num_programs(0), tl.num_programs(1), tl.num_programs(2)
    index = (pz * ny + py) * nx + px
    tl.store(out + index * 4 + tl.arange(0, 4), tl.join(tl.join(px, py), tl.join(pz, nx * ny * nz)).reshape(4))


@triton.jit
def constexpr_variants_kernel(x, out, n, BLOCK: tl.constexpr, SCALE: tl.constexpr, NEGATE: tl.constexpr,
                              DTYPE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x + offs, mask=mask) * SCALE
    if NEGATE:
        v = -v
    tl.store(out + offs, v.to(DTYPE), mask=mask)


@triton.jit
def matmul_loop_kernel(a, b, c, M, N, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :], mask=rm[:, None] < M, other=0.0)
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :], mask=rn[None, :] < N, other=0.0)
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def block_pointer_kernel(x, out, M, N, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_block_ptr(x, (M, N), (N, 1), (tl.program_id(0) * BM, 0), (BM, BN), (1, 0))
    dst = tl.make_block_ptr(out, (M, N), (N, 1), (tl.program_id(0) * BM, 0), (BM, BN), (1, 0))
    tl.store(dst, tl.load(src, boundary_check=(0, 1), padding_option="zero") * 2, boundary_check=(0, 1))


@triton.jit
def tensor_descriptor_kernel(x, out, M, N, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_tensor_descriptor(x, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(out, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    v = src.load([tl.program_id(0) * BM, 0])  # the last tile reads past M: zero padding
    dst.store([tl.program_id(0) * BM, 0], v * 2 + 1)


@triton.jit
def host_descriptor_kernel(src, dst, sums, BM: tl.constexpr, BN: tl.constexpr):
    # src and dst: host TensorDescriptors (kernel arguments, not made in the kernel)
    v = src.load([tl.program_id(0) * BM, 0])  # the last tile reads past the rows: src's padding
    dst.store([tl.program_id(0) * BM, 0], v * 2 + 1)
    tl.store(sums + tl.program_id(0) * BM + tl.arange(0, BM), tl.sum(v, 1))  # padded rows: 0 or nan


@triton.jit
def masked_atomic_out_of_range_kernel(ptr, n, BLOCK: tl.constexpr):
    # Masked-out lanes hold offsets far outside the tensor (legal on a GPU).
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    offsets = tl.where(mask, offs, offs * 1_000_000_007)
    tl.atomic_add(ptr + offsets, 1, mask)
    tl.atomic_max(ptr + offsets, 3, mask)
    v = tl.load(ptr + offsets, mask=mask, other=0)
    tl.store(ptr + offsets, v + 1, mask=mask)


@triton.jit
def scalar_args_kernel(out, i32, i64, u64, f32, flag, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    r = tl.where(flag != 0, f32, -f32) + i32.to(tl.float32) + (i64 % 1000).to(tl.float32) + (u64 % 7).to(tl.float32)
    tl.store(out + offs, r + offs)


@triton.jit
def tuple_args_kernel(pair, scales, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(pair[0] + offs)
    b = tl.load(pair[1] + offs)
    tl.store(out + offs, a * scales[0] + b * scales[1])


@triton.jit
def histogram_gather_kernel(x, idx, hist, gathered, N: tl.constexpr, BINS: tl.constexpr):
    offs = tl.arange(0, N)
    v = tl.load(x + offs)
    tl.store(hist + tl.arange(0, BINS), tl.histogram(v, BINS))
    i = tl.load(idx + offs)
    tl.store(gathered + offs, tl.gather(v, i, 0))


@triton.jit
def sort_flip_kernel(x, sorted_out, flipped, N: tl.constexpr):
    offs = tl.arange(0, N)
    v = tl.load(x + offs)
    tl.store(sorted_out + offs, tl.sort(v))
    tl.store(flipped + offs, tl.flip(v, 0))


@triton.jit
def philox_kernel(out, out2, seed, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out + offs, tl.rand(seed, offs))
    tl.store(out2 + offs, tl.randint(seed, offs))


def _autotuned():
    return triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})],
                           key=["n"])(unary_template_scale)


@triton.jit
def unary_template_scale(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) * 3 + 1, mask=mask)


# ---------------------------------------------------------------- the table


@dataclass
class Case:
    name: str
    kernel: Callable[[], Any]  # built lazily, in the process that runs it
    args: Callable[[torch.Generator], list]  # tensors on the CPU, scalars
    outputs: list  # positions of the outputs in args
    grid: Any = (2,)
    kwargs: dict = field(default_factory=dict)
    family: str = ""
    # Absolute tolerance; None: bit for bit. Only for results that depend on
    # the order of a hardware reduction (none of this table's cases so far).
    atol: float | None = None


CASES: dict[str, Case] = {}


def case(c: Case) -> None:
    assert c.name not in CASES, c.name
    CASES[c.name] = c


def _empty(name, n=N):
    return torch.zeros(n, dtype=TORCH[name])


def _binary_case(family, op, text, lhs, rhs, out, kinds=("any", "any"), masked=True):
    def args(g):
        x = _values(lhs, N, g, kinds[0])
        y = _values(rhs, N, g, kinds[1])
        if masked:
            return [x, y, _empty(out), N_USED]
        return [x, y, _empty(out)]

    template = binary_template if masked else unmasked_binary_template
    suffix = "" if masked else "/unmasked"
    case(Case(f"{family}/{op}/{lhs}-{rhs}{suffix}", lambda: specialize(template, EXPR=text), args,
              [2], kwargs={"BLOCK": 32}, family=family))


def _build_table() -> None:
    # -- arithmetic: + - * / // % over every numeric dtype, and mixed pairs (promotion)
    for name in NUMERIC:
        for op, text in (("add", "a + b"), ("sub", "a - b"), ("mul", "a * b")):
            _binary_case("arith", op, text, name, name, name)
        _binary_case("arith", "truediv", "a / b", name, name, "float32" if name in INTS else name,
                     kinds=("any", "nonzero"))
        if name in INTS:
            _binary_case("arith", "floordiv", "a // b", name, name, name, kinds=("any", "nonzero"))
            _binary_case("arith", "mod", "a % b", name, name, name, kinds=("any", "nonzero"))
        else:
            _binary_case("arith", "mod", "a % b", name, name, name, kinds=("any", "nonzero"))
    for lhs, rhs, out in (("int8", "int32", "int32"), ("int32", "float32", "float32"),
                          ("float16", "float32", "float32"), ("uint8", "int16", "int16"),
                          ("int64", "float64", "float64"), ("bfloat16", "float32", "float32"),
                          ("uint32", "int32", "uint32"), ("int1", "int32", "int32")):
        _binary_case("arith", "add", "a + b", lhs, rhs, out)
    for name in ("int32", "float32", "float16"):
        _binary_case("arith", "add", "a + b", name, name, name, masked=False)
    # -- comparison: < <= == != > >= over every dtype (bool results into *i1)
    for name in ALL:
        for op, sym in (("lt", "<"), ("le", "<="), ("eq", "=="), ("ne", "!="), ("gt", ">"), ("ge", ">=")):
            _binary_case("compare", op, f"a {sym} b", name, name, "int1")
    # -- bitwise: & | ^ << >> over ints, & | ^ over bool
    for name in INTS:
        for op, sym in (("and", "&"), ("or", "|"), ("xor", "^")):
            _binary_case("bitwise", op, f"a {sym} b", name, name, name)
        _binary_case("bitwise", "shl", "a << b", name, name, name, kinds=("any", "shift"))
        _binary_case("bitwise", "shr", "a >> b", name, name, name, kinds=("any", "shift"))
    for op, sym in (("and", "&"), ("or", "|"), ("xor", "^")):
        _binary_case("bitwise", op, f"a {sym} b", "int1", "int1", "int1")
    # -- min/max and where over every numeric dtype
    for name in NUMERIC:
        _binary_case("minmax", "maximum", "tl.maximum(a, b)", name, name, name)
        _binary_case("minmax", "minimum", "tl.minimum(a, b)", name, name, name)
        _ternary_case("where", "where", "tl.where(c > 0, a, b)", name, name)
    for name in FLOATS:
        _ternary_case("math", "fma", "tl.fma(a, b, c)", name, name)
        _ternary_case("math", "clamp", "tl.clamp(a, -tl.abs(b), tl.abs(b))", name, name)
    _binary_case("math", "div_rn", "tl.div_rn(a, b)", "float32", "float32", "float32", kinds=("any", "nonzero"))
    for name in ("int32", "uint32"):
        _binary_case("math", "umulhi", "tl.umulhi(a, b)", name, name, name)
    for name in ("int32", "uint32", "int64", "uint64"):
        _binary_case("math", "cdiv", "tl.cdiv(a, b)", name, name, name, kinds=("positive", "positive"))
    # -- unary
    for name in NUMERIC:
        if not name.startswith("u"):
            _unary_case("unary", "neg", "-a", name, name)
        _unary_case("unary", "abs", "tl.abs(a)", name, name)
    for name in INTS + ["int1"]:
        # ~ of an unsigned value: Triton's interpreter xors with the Python int
        # -1 there ("Python integer -1 out of bounds for uint8")
        if not name.startswith("u"):
            _unary_case("unary", "invert", "~a", name, name)
    _unary_case("unary", "not", "a == 0", "int32", "int1")
    for name in FLOATS:
        _unary_case("math", "softmax", "tl.softmax(a)", name, name)
        _unary_case("math", "isnan", "a != a", name, "int1")
    for name in ("float32", "float64"):  # Triton's math functions take fp32 and fp64 only
        for fn in ("exp", "exp2", "sin", "cos", "floor", "ceil", "erf", "sigmoid"):
            _unary_case("math", fn, f"tl.{fn}(a)", name, name)
        for fn in ("log", "log2", "sqrt", "rsqrt", "sqrt_rn"):
            if fn != "sqrt_rn" or name == "float32":
                _unary_case("math", fn, f"tl.{fn}(a)", name, name, kind="positive")
    # libdevice is not in the table: under TRITON_INTERPRET=1 its functions
    # return None ("cannot convert None of type NoneType to tensor"); simdev
    # runs them with numpy (test_triton_simdev_differential.py checks those against torch).
    # -- casts: every pair of the 13 dtypes, fp8 to and from fp16/fp32, bitcasts of equal widths
    for src, dst in itertools.product(ALL, ALL):
        _unary_case("cast", "to", f"a.to(tl.{dst})", src, dst)
    for f8 in FP8:
        for wide in ("float16", "float32"):
            _unary_case("cast", "to", f"a.to(tl.{wide})", f8, wide)
            _unary_case("cast", "to", f"a.to(tl.{f8})", wide, f8)
    for wide in ("float16", "float32"):  # fp8e4b15 has no torch dtype: a round trip inside the kernel
        _unary_case("cast", "roundtrip-fp8e4b15", "a.to(tl.float8e4b15).to(a.dtype)", wide, wide)
    for src, dst in itertools.product(NUMERIC, NUMERIC):
        if src != dst and BITS[src] == BITS[dst]:
            _unary_case("cast", "bitcast", f"a.to(tl.{dst}, bitcast=True)", src, dst)
    _unary_case("cast", "rtz", 'a.to(tl.float16, fp_downcast_rounding="rtz")', "float32", "float16")
    _unary_case("cast", "rtne", 'a.to(tl.bfloat16, fp_downcast_rounding="rtne")', "float32", "bfloat16")
    # -- scalars against tensors (runtime ints and floats)
    for name in NUMERIC:
        _scalar_case(name, "a * s + s", 3)
    _scalar_case("float32", "a * s", 2.5)
    _scalar_case("int64", "a + s", 2**40)
    # -- reductions and scans over 2-D blocks, each axis
    for name in NUMERIC:
        for op in ("sum", "max", "min"):
            for axis in (0, 1):
                _reduce_case(op, f"tl.{op}(a, axis={axis})", name, axis)
        _reduce_case("argmax", "tl.argmax(a, axis=1)", name, 1, out="int32")
        _reduce_case("argmin", "tl.argmin(a, axis=0)", name, 0, out="int32")
        _reduce_case("cumsum", "tl.cumsum(a, axis=1)", name, None)
    for name in INTS:
        _reduce_case("xor_sum", "tl.xor_sum(a, axis=1)", name, 1)
    for name in ("int32", "float32", "float64"):
        _reduce_case("cumprod", "tl.cumprod(a, axis=0)", name, None)
        _reduce_case("cumsum_reverse", "tl.cumsum(a, axis=0, reverse=True)", name, None)
        _reduce_case("sum_keep_dims", "tl.sum(a, axis=1, keep_dims=True)", name, "keep")
        _reduce_case("sum_all", "tl.sum(a)", name, "all")
    _reduce_case("sum", "tl.sum(a, axis=1)", "int1", 1, out="int32")
    # -- masked 2-D memory with `other`, partial tiles on a 2-D grid
    for name in ("int8", "int32", "uint16", "float16", "bfloat16", "float32", "float64", "int1"):
        _masked_2d_case(name)
    # -- atomics (masked), with the old values each returns
    for name in ("int32", "uint32", "int64", "uint64", "float32", "float64", "float16"):
        _atomic_case("add", "tl.atomic_add(ptr + target, v, mask=mask)", name)
    for name in ("int32", "uint32", "int64", "uint64"):  # float xchg: "Unsupported data type" in 3.7.1's interpreter
        _atomic_case("xchg", "tl.atomic_xchg(ptr + target, v, mask=mask)", name)
    for name in ("int32", "uint32", "int64", "uint64", "float32"):
        _atomic_case("max", "tl.atomic_max(ptr + target, v, mask=mask)", name)
        _atomic_case("min", "tl.atomic_min(ptr + target, v, mask=mask)", name)
    for name in ("int32", "uint32", "int64", "uint64"):
        for op in ("and", "or", "xor"):
            _atomic_case(op, f"tl.atomic_{op}(ptr + target, v, mask=mask)", name)
    for name in ("int32", "int64"):
        _atomic_case("cas", "tl.atomic_cas(ptr + target, tl.zeros_like(v), v)", name)
    # -- dot
    # (fp16 into an fp16 accumulator, int8, fp64: an AssertionError in Triton's interpreter)
    for name, out in (("float32", "float32"), ("float16", "float32"), ("bfloat16", "float32"),
                      ("float8e5", "float32"), ("float8e4nv", "float32")):
        _dot_case(name, out, "tl.dot(x, y, acc)")
    _dot_case("float32", "float32", 'tl.dot(x, y, acc, input_precision="ieee")')
    _dot_case("float32", "float32", "acc + tl.dot(x, y, out_dtype=tl.float32)")
    # -- shape operations on a 2-D block
    for name in ("int16", "float32", "bfloat16", "int1"):
        for op, text in (("trans", "tl.trans(a)"), ("permute", "tl.permute(a, (1, 0))"),
                         ("reshape", "tl.reshape(a, (N, M))"), ("view_T", "a.T"),
                         ("broadcast", "tl.broadcast_to(tl.max(a, axis=1, keep_dims=True), (M, N))"),
                         ("expand", "tl.sum(tl.expand_dims(a, 2), axis=2)"),
                         ("join_split", "tl.join(a, a + a).split()[1]"),
                         ("full", "tl.full((M, N), 3, a.dtype)")):
            if not (op == "full" and name == "bfloat16"):  # the interpreter's builder has no get_bf16
                _shape_case(op, text, name)
    _hand_written()


def _unary_case(family, op, text, src, dst, kind="any"):
    def args(g):
        return [_values(src, N, g, kind), _empty(dst), N_USED]

    replacements = {"EXPR": text}
    template = unary_template
    if text.startswith("libdevice"):
        template = unary_libdevice_template
    case(Case(f"{family}/{op}/{src}->{dst}" if src != dst or family == "cast" else f"{family}/{op}/{src}",
              lambda: specialize(template, **replacements), args, [1], kwargs={"BLOCK": 32}, family=family))


@triton.jit
def unary_libdevice_template(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(x + offs, mask=mask)
    tl.store(out + offs, EXPR, mask=mask)


def _ternary_case(family, op, text, name, out):
    def args(g):
        return [_values(name, N, g), _values(name, N, g), _values(name, N, g), _empty(out), N_USED]

    case(Case(f"{family}/{op}/{name}", lambda: specialize(ternary_template, EXPR=text), args, [3],
              kwargs={"BLOCK": 32}, family=family))


def _scalar_case(name, text, scalar):
    def args(g):
        return [_values(name, N, g), _empty(name), scalar, N_USED]

    case(Case(f"scalar/{text}/{name}/{type(scalar).__name__}{'-large' if scalar == 2**40 else ''}",
              lambda: specialize(scalar_template, EXPR=text), args, [1], kwargs={"BLOCK": 32}, family="scalar"))


M2, N2 = 4, 8


def _reduce_case(op, text, name, axis, out=None):
    out = out or ("int32" if name == "int1" else name)
    if axis is None:  # a scan: same shape
        store, count = "tl.store(out + rows * N + cols, r)", M2 * N2
    elif axis == "keep":
        store, count = "tl.store(out + rows, r)", M2
    elif axis == "all":
        store, count = "tl.store(out, r)", 1
    elif axis == 0:
        store, count = "tl.store(out + tl.arange(0, N), r)", N2
    else:
        store, count = "tl.store(out + tl.arange(0, M), r)", M2

    def args(g):
        return [_values(name, M2 * N2, g), _empty(out, count)]

    case(Case(f"reduce/{op}/{name}/axis{axis}", lambda: specialize(reduce_template, EXPR=text, OUT_STORE=store), args,
              [1], grid=(1,), kwargs={"M": M2, "N": N2}, family="reduce"))


def _masked_2d_case(name):
    other = "0" if name != "int1" else "False"
    text = "a" if name == "int1" else "a + a"

    def args(g):
        return [_values(name, 13 * 11, g), _empty(name, 13 * 11), 13, 11]

    case(Case(f"masked2d/{name}", lambda: specialize(masked_2d_template, OTHER=other, EXPR=text), args, [1],
              grid=(triton.cdiv(13, 8), triton.cdiv(11, 4)), kwargs={"BM": 8, "BN": 4}, family="masked"))


def _atomic_case(op, text, name):
    def args(g):
        kind = "positive" if op in ("add",) else "any"
        return [_values(name, 5, g, kind), _values(name, N, g, kind), _empty(name), N_USED]

    case(Case(f"atomic/{op}/{name}", lambda: specialize(atomic_template, EXPR=text), args, [0, 2],
              kwargs={"BLOCK": 32}, grid=(2,), family="atomic"))


def _dot_case(name, out, text):
    M, N_, K = 16, 16, 16

    def args(g):
        a = _values("float32" if name in FP8 else name, M * K, g).to(TORCH[name])
        b = _values("float32" if name in FP8 else name, K * N_, g).to(TORCH[name])
        if name in INTS:
            a, b = (torch.remainder(t.to(torch.int16), 5).to(TORCH[name]) for t in (a, b))
        return [a, b, _empty(out, M * N_)]

    case(Case(f"dot/{name}->{out}/{text.replace(' ', '')}", lambda: specialize(dot_template, EXPR=text), args, [2],
              grid=(1,), kwargs={"M": M, "N": N_, "K": K, "OUT_DTYPE": tl_dtype(out)}, family="dot"))


def _shape_case(op, text, name):
    def args(g):
        return [_values(name, M2 * N2, g), _empty(name, M2 * N2)]

    case(Case(f"shape/{op}/{name}", lambda: specialize(shape_template, EXPR=text), args, [1], grid=(1,),
              kwargs={"M": M2, "N": N2}, family="shape"))


def _hand_written() -> None:
    f32 = "float32"
    case(Case("helpers/nested-and-tuple-return", lambda: helpers_kernel,
              lambda g: [_values(f32, N, g), _empty(f32), _empty(f32), N_USED], [1, 2], kwargs={"BLOCK": 32},
              family="helpers"))
    for name in ("int32", "float32"):
        case(Case(f"helpers/custom-reduce-and-scan/{name}", lambda: custom_reduce_scan_kernel,
                  lambda g, name=name: [_values(name, 16, g, "positive"), _empty(name, 1), _empty(name, 16)],
                  [1, 2], grid=(1,), kwargs={"N": 16}, family="helpers"))
    for steps, threshold in ((0, 1.5), (3, 2.0), (5, -1.0)):
        case(Case(f"control/loops-and-branches/STEPS{steps}/threshold{threshold}", lambda: control_flow_const_kernel,
                  lambda g, t=threshold: [_values(f32, N, g), _empty(f32), N_USED, t], [1],
                  kwargs={"BLOCK": 32, "UNROLL": 3, "STEPS": steps}, family="control"))
        # A loop bound from a runtime int: Triton 3.6's own interpreter, the
        # reference, cannot take one under NumPy 2 (range() gets a 1-element
        # array: "only 0-dimensional arrays can be converted to Python
        # scalars"; simdev can), so these run from Triton 3.7.
        if _TRITON >= (3, 7):
            case(Case(f"control/loops-and-branches/steps{steps}/threshold{threshold}", lambda: control_flow_kernel,
                      lambda g, s=steps, t=threshold: [_values(f32, N, g), _empty(f32), N_USED, s, t], [1],
                      kwargs={"BLOCK": 32, "UNROLL": 3}, family="control"))
    case(Case("grid/3d", lambda: grid_3d_kernel, lambda g: [_empty("int32", 4 * 3 * 2 * 2)], [0], grid=(3, 2, 2),
              kwargs={"X": 3, "Y": 2}, family="grid"))
    case(Case("grid/2d-matmul-loop", lambda: matmul_loop_kernel,
              lambda g: [_values(f32, 24 * 32, g), _values(f32, 32 * 20, g), _empty(f32, 24 * 20), 24, 20], [2],
              grid=(2, 2), kwargs={"K": 32, "BM": 16, "BN": 16, "BK": 16}, family="grid"))
    case(Case("memory/block-pointer", lambda: block_pointer_kernel,
              lambda g: [_values(f32, 10 * 6, g), _empty(f32, 10 * 6), 10, 6], [1], grid=(3,),
              kwargs={"BM": 4, "BN": 8}, family="masked"))
    case(Case("memory/device-tensor-descriptor", lambda: tensor_descriptor_kernel,
              lambda g: [_values(f32, 10 * 8, g), _empty(f32, 10 * 8), 10, 8], [1], grid=(3,),
              kwargs={"BM": 4, "BN": 8}, family="masked"))
    for padding in ("zero", "nan"):
        case(Case(f"memory/host-tensor-descriptor-padding-{padding}", lambda: host_descriptor_kernel,
                  lambda g, p=padding: [TensorDescriptor(_values(f32, 10 * 8, g).view(10, 8), [10, 8], [8, 1], [4, 8],
                                                         padding=p),
                                        TensorDescriptor(_empty(f32, 10 * 8).view(10, 8), [10, 8], [8, 1], [4, 8]),
                                        _empty(f32, 12)],
                  [1, 2], grid=(3,), kwargs={"BM": 4, "BN": 8}, family="masked"))
    case(Case("memory/masked-atomics-out-of-range-lanes", lambda: masked_atomic_out_of_range_kernel,
              lambda g: [torch.zeros(16, dtype=torch.int32), 10], [0], grid=(1,), kwargs={"BLOCK": 16},
              family="masked"))
    for block, scale, negate, dtype in ((16, 2, False, "float32"), (32, 3, True, "float16"),
                                        (64, 1, True, "int32"), (32, 0.5, False, "bfloat16"),
                                        (32, 2, True, "int16"), (16, 3, False, "uint8"), (32, 1, False, "uint64"),
                                        (32, 4, False, "int8"), (64, 2, False, "uint16"), (32, 1, True, "float64")):
        case(Case(f"constexpr/BLOCK{block}-SCALE{scale}-NEGATE{negate}-{dtype}", lambda: constexpr_variants_kernel,
                  lambda g, d=dtype: [_values(f32, N, g), _empty(d), N_USED], [1], grid=(triton.cdiv(N, block),),
                  kwargs={"BLOCK": block, "SCALE": scale, "NEGATE": negate, "DTYPE": tl_dtype(dtype)},
                  family="constexpr"))
    case(Case("scalar/args-of-every-width", lambda: scalar_args_kernel,
              lambda g: [_empty(f32, 16), -7, 2**40 + 5, 2**63 + 9, 1.25, 1], [0], grid=(1,),
              kwargs={"BLOCK": 16}, family="scalar"))
    case(Case("scalar/args-flag-false", lambda: scalar_args_kernel,
              lambda g: [_empty(f32, 16), 123456, -(2**35), 2**64 - 1, -0.5, 0], [0], grid=(1,),
              kwargs={"BLOCK": 16}, family="scalar"))
    case(Case("tuple/pointer-and-scalar-tuples", lambda: tuple_args_kernel,
              lambda g: [(_values(f32, 16, g), _values(f32, 16, g)), (2.0, -3.0), _empty(f32, 16)], [2], grid=(1,),
              kwargs={"BLOCK": 16}, family="tuple"))
    case(Case("shape/histogram-gather", lambda: histogram_gather_kernel,
              lambda g: [torch.randint(0, 8, (32,), generator=g, dtype=torch.int32),
                         torch.randint(0, 32, (32,), generator=g, dtype=torch.int32),
                         _empty("int32", 8), _empty("int32", 32)], [2, 3], grid=(1,), kwargs={"N": 32, "BINS": 8},
              family="shape"))
    for name in ("int32", "float32", "float16"):
        case(Case(f"shape/sort-flip/{name}", lambda: sort_flip_kernel,
                  lambda g, name=name: [_values(name, 32, g), _empty(name, 32), _empty(name, 32)], [1, 2], grid=(1,),
                  kwargs={"N": 32}, family="shape"))
    case(Case("random/philox", lambda: philox_kernel,
              lambda g: [_empty(f32, 32), _empty("int32", 32), 1234], [0, 1], grid=(1,), kwargs={"N": 32},
              family="random"))
    case(Case("autotune/two-configs", _autotuned_kernel,
              lambda g: [_values(f32, 100, g), _empty(f32, 100), 100], [1],
              grid=lambda meta: (triton.cdiv(100, meta["BLOCK"]),), family="autotune"))


_autotuned_cache = []


def _autotuned_kernel():
    if not _autotuned_cache:
        _autotuned_cache.append(_autotuned())
    return _autotuned_cache[0]


_build_table()


# ---------------------------------------------------------------- running


def run_case(c: Case, device: str | None = None) -> list:
    """Runs case `c` with its tensors on `device` (None: the CPU); returns its outputs on the CPU."""
    g = torch.Generator().manual_seed(sum(map(ord, c.name)))
    args = c.args(g)

    def place(a):
        if isinstance(a, torch.Tensor) and device is not None:
            return a.to(device)
        if isinstance(a, tuple):
            return tuple(place(x) for x in a)
        if isinstance(a, TensorDescriptor):
            return TensorDescriptor(place(a.base), a.shape, a.strides, a.block_shape, padding=a.padding)
        return a

    args = [place(a) for a in args]
    kernel = c.kernel()
    if INTERPRET and isinstance(kernel, Autotuner):
        # TRITON_INTERPRET=1 cannot autotune on a machine without a GPU driver
        # (the autotuner asks the active driver for a benchmarker): the
        # reference runs every config and the comparison takes the one simdev picked.
        results = {}
        for config in kernel.configs:
            fresh = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            grid = c.grid(config.kwargs) if callable(c.grid) else c.grid
            kernel.fn[grid](*fresh, **c.kwargs, **config.kwargs)
            results[str(config.kwargs)] = [_tensor(fresh[i]).cpu() for i in c.outputs]
        return results
    kernel[c.grid](*args, **c.kwargs)
    if isinstance(kernel, Autotuner):
        return {str(kernel.best_config.kwargs): [_tensor(args[i]).cpu() for i in c.outputs]}
    return [_tensor(args[i]).cpu() for i in c.outputs]


def _tensor(output):
    """An output argument's tensor (a TensorDescriptor's base)."""
    return output.base if isinstance(output, TensorDescriptor) else output


def reference(path: str) -> None:
    assert INTERPRET, "run with TRITON_INTERPRET=1"
    results = {}
    trace = os.environ.get("DEVBRIDGE_DIFFERENTIAL_TRACE")
    only = os.environ.get("DEVBRIDGE_DIFFERENTIAL_ONLY", "")
    for name, c in CASES.items():
        if only not in name:
            continue
        if trace:
            print(name, file=sys.stderr, flush=True)
        try:
            results[name] = run_case(c)
        except Exception as error:  # noqa: BLE001 - reported per case by the test
            results[name] = f"error: {type(error).__name__}: {error}"[:2000]
    torch.save(results, path)


if __name__ == "__main__":
    reference(sys.argv[1])
