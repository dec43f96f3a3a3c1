"""bfloat16 (and fp8) arithmetic on simdev's Triton target (the interpreter target) against
what a GPU computes (devbridge/triton/interpreter/narrow_floats.py).

Triton's interpreter keeps bfloat16 values as uint16 bits and computed on the bits;
these handwritten kernels compute on bfloat16 simdev tensors and are held to torch's
own bfloat16 CPU arithmetic, which computes in float32 and rounds once to nearest
even: what sm_90's add.rn.bf16 / sub.rn.bf16 / mul.rn.bf16 give (float32 is wide enough
that rounding twice is innocuous for one operation of 8-bit significands). Where torch
differs from the GPU it is said: the NaN a GPU produces is 0x7fff (torch's 0x7fc0),
tl.fma rounds once (held to an exact rational answer), Triton 3.6/3.7 negate as 0 - x,
tl.sum adds in bfloat16 at every step (held to torch's bfloat16 adds in the same tree),
constants pass through "%f" as python/src/ir.cc's get_bf16 does, and tl.minimum /
tl.maximum / tl.clamp (promoted to float32 by the front end) follow LLVM's minnum/maxnum,
numpy's fmin/fmax (torch's give NaN for a signalling NaN; PTX has none).
Inputs cover ties, negative values, signed zeros, subnormals, overflow, inf and NaN.
"""

from __future__ import annotations

import fractions

import numpy as np
import pytest
import torch

triton = pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")
import triton.language as tl  # noqa: E402

import devbridge  # noqa: E402
import devbridge.triton  # noqa: E402

from launch_support import skip_without_simdev  # noqa: E402

pytestmark = skip_without_simdev
BLOCK = 256
NEGATE_IS_SUBTRACT = tuple(int(p) for p in triton.__version__.split(".")[:2]) < (3, 8)  # 3.8 emits a neg


@pytest.fixture(autouse=True)
def devbridge_driver():
    with devbridge.triton.activate():
        yield


def bf16(bits) -> torch.Tensor:
    return torch.tensor(np.asarray(bits, dtype=np.uint16).view(np.int16)).view(torch.bfloat16)


def bits_of(t: torch.Tensor) -> np.ndarray:
    return t.contiguous().view(torch.int16).numpy().view(np.uint16)


_SPECIALS = [0.0, -0.0, 1.0, -1.0, 1.5, -2.25, 256.0, 258.0, 3.0, -3.0, 2.0**-126, -(2.0**-130), 2.0**-133,
             3.3895313892515355e38, -3.3895313892515355e38, float("inf"), float("-inf"), float("nan")]


def _operands():
    """(x, y, z): every pair of the special values, then random bit patterns (NaN, inf and
    subnormals among them) and random values of close magnitudes (where ties are common)."""
    g = torch.Generator().manual_seed(5)
    s = torch.tensor(_SPECIALS, dtype=torch.bfloat16)
    pairs = torch.cartesian_prod(torch.arange(len(s)), torch.arange(len(s)))
    x, y = s[pairs[:, 0]], s[pairs[:, 1]]
    n = 4 * BLOCK - x.numel()
    random_bits = bf16(torch.randint(0, 1 << 16, (2, n // 2), generator=g).numpy())
    close = (torch.randn(2, n - n // 2, generator=g) * 8).bfloat16()
    x = torch.cat([x, random_bits[0], close[0]])
    y = torch.cat([y, random_bits[1], close[1]])
    z = (torch.randn(x.numel(), generator=g) * 8).bfloat16()
    return x, y, z


@triton.jit
def _elementwise(x, y, z, out, flags, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    n = tl.num_programs(0) * BLOCK
    a = tl.load(x + offs)
    b = tl.load(y + offs)
    c = tl.load(z + offs)
    tl.store(out + 0 * n + offs, a + b)
    tl.store(out + 1 * n + offs, a - b)
    tl.store(out + 2 * n + offs, a * b)
    tl.store(out + 3 * n + offs, tl.minimum(a, b))
    tl.store(out + 4 * n + offs, tl.maximum(a, b))
    tl.store(out + 5 * n + offs, tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL))
    tl.store(out + 6 * n + offs, tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL))
    tl.store(out + 7 * n + offs, -a)
    tl.store(out + 8 * n + offs, tl.abs(a))
    tl.store(out + 9 * n + offs, tl.fma(a, b, c))
    tl.store(out + 10 * n + offs, tl.where(a < b, a, b))
    tl.store(out + 11 * n + offs, tl.clamp(c, -tl.abs(a), tl.abs(a) + 1.0))
    tl.store(flags + 0 * n + offs, a < b)
    tl.store(flags + 1 * n + offs, a <= b)
    tl.store(flags + 2 * n + offs, a == b)
    tl.store(flags + 3 * n + offs, a != b)
    tl.store(flags + 4 * n + offs, a > b)
    tl.store(flags + 5 * n + offs, a >= b)


_OUTPUTS = ["add", "sub", "mul", "minimum", "maximum", "minimum_nan", "maximum_nan", "neg", "abs", "fma", "where",
            "clamp"]
_FLAGS = ["lt", "le", "eq", "ne", "gt", "ge"]


@pytest.fixture(scope="module")
def elementwise():
    with devbridge.triton.activate():
        x, y, z = _operands()
        n = x.numel()
        out = torch.empty(len(_OUTPUTS) * n, dtype=torch.bfloat16, device="simdev")
        flags = torch.empty(len(_FLAGS) * n, dtype=torch.bool, device="simdev")
        _elementwise[(n // BLOCK,)](x.to("simdev"), y.to("simdev"), z.to("simdev"), out, flags, BLOCK=BLOCK)
        results = dict(zip(_OUTPUTS, out.cpu().view(len(_OUTPUTS), n)))
        results.update(zip(_FLAGS, flags.cpu().view(len(_FLAGS), n)))
    return x, y, z, results


def _fraction(t: torch.Tensor) -> list:
    return [fractions.Fraction(v) if np.isfinite(v) else v for v in t.double().tolist()]


def _round_exactly(q) -> float:
    """The rational q rounded to nearest even bfloat16 (as a float)."""
    if not isinstance(q, fractions.Fraction):
        return q
    if q == 0:
        return 0.0
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if fractions.Fraction(2) ** e > a:
        e -= 1
    step = fractions.Fraction(2) ** (max(e, -126) - 7)  # bfloat16's spacing there (subnormals below 2**-126)
    value = round(a / step) * step  # round() of a Fraction: to nearest, ties to even
    value = float(value) if value < 2**128 else float("inf")
    return value if q > 0 else -value


def _fma_exactly(a, b, c) -> torch.Tensor:
    out = []
    for x, y, z in zip(_fraction(a), _fraction(b), _fraction(c)):
        if all(isinstance(v, fractions.Fraction) for v in (x, y, z)):
            exact = x * y + z
            out.append(_round_exactly(exact) if exact != 0 else float(np.float32(x) * np.float32(y) + np.float32(z)))
        else:  # inf / NaN: float32 computes the special result
            with np.errstate(invalid="ignore"):  # inf * 0
                out.append(float(np.float32(x) * np.float32(y) + np.float32(z)))
    return torch.tensor(out, dtype=torch.float64).bfloat16()


def _assert_bf16(name, ours: torch.Tensor, expected: torch.Tensor, zeros_signed=True):
    nan = expected.isnan()
    assert torch.equal(ours.isnan(), nan), f"{name}: NaN lanes differ"
    # a GPU's bfloat16 arithmetic gives the canonical NaN 0x7fff (torch's is 0x7fc0)
    assert (bits_of(ours[nan]) == 0x7FFF).all(), f"{name}: NaN bits {np.unique(bits_of(ours[nan]))}"
    if zeros_signed:
        wrong = torch.from_numpy(bits_of(ours[~nan]) != bits_of(expected[~nan]))
    else:  # (which zero min/max return for -0 and +0 is not modelled)
        wrong = ours[~nan] != expected[~nan]
    assert not wrong.any(), f"{name}: {wrong.sum()} lanes differ, e.g. {ours[~nan][wrong][:4]} vs " \
                            f"{expected[~nan][wrong][:4]}"


def test_add_sub_mul_round_once_to_nearest_even(elementwise):
    x, y, _, ours = elementwise
    for name, expected in (("add", x + y), ("sub", x - y), ("mul", x * y)):
        _assert_bf16(name, ours[name], expected)
    # ties to even: 256 + 3 = 259 -> 260, 258 + 3 = 261 -> 260, and overflow to inf
    index = {v: i for i, v in enumerate(_SPECIALS) if v == v}
    k = len(_SPECIALS)
    assert ours["add"][index[256.0] * k + index[3.0]].item() == 260.0
    assert ours["add"][index[258.0] * k + index[3.0]].item() == 260.0
    big = index[3.3895313892515355e38]
    assert ours["add"][big * k + big].item() == float("inf")


def test_min_max_and_clamp(elementwise):
    x, y, z, ours = elementwise
    # language/core.py promotes bfloat16 to float32 for tl.minimum / tl.maximum / tl.clamp (exact), whose
    # default is minnum/maxnum: the number where one operand is NaN (PTX min/max), which Triton 3.6/3.7's
    # interpreter got wrong for every float type. PTX has no signalling NaNs; torch's fmin/fmax follow IEEE
    # 754-2008 there (a signalling NaN such as 0x7f8f, among the inputs, gives NaN): numpy's are the GPU's.
    f = {"x": x.float().numpy(), "y": y.float().numpy()}

    def expect(op):
        return torch.from_numpy(op(f["x"], f["y"])).bfloat16()

    _assert_bf16("minimum", ours["minimum"], expect(np.fmin), zeros_signed=False)
    _assert_bf16("maximum", ours["maximum"], expect(np.fmax), zeros_signed=False)
    _assert_bf16("minimum_nan", ours["minimum_nan"], torch.minimum(x, y), zeros_signed=False)
    _assert_bf16("maximum_nan", ours["maximum_nan"], torch.maximum(x, y), zeros_signed=False)
    low, high = -x.abs(), x.abs() + 1.0  # computed in bfloat16, as the kernel does
    ok = ~low.isnan()  # (a NaN bound: undefined on a GPU)
    expected = torch.from_numpy(np.fmin(np.fmax(z.float().numpy(), low.float().numpy()), high.float().numpy()))
    expected = expected.bfloat16()
    _assert_bf16("clamp", ours["clamp"][ok], expected[ok], zeros_signed=False)


def test_comparisons_and_where_compare_values(elementwise):
    x, y, _, ours = elementwise
    for name, expected in (("lt", x < y), ("le", x <= y), ("eq", x == y), ("ne", x != y), ("gt", x > y),
                           ("ge", x >= y)):
        assert torch.equal(ours[name], expected), name
    assert (bits_of(ours["where"]) == bits_of(torch.where(x < y, x, y))).all()  # a select: the bits, NaNs' too


def test_negation_and_abs(elementwise):
    x, _, _, ours = elementwise
    # Triton 3.6/3.7's front end negates as 0 - x (so -(+0) is +0, as on a GPU); 3.8 flips the sign
    expected = torch.zeros_like(x) - x if NEGATE_IS_SUBTRACT else -x
    if NEGATE_IS_SUBTRACT:
        _assert_bf16("neg", ours["neg"], expected)
    else:  # the sign bit flipped, NaN payloads included
        assert (bits_of(ours["neg"]) == bits_of(x) ^ 0x8000).all()
    assert (bits_of(ours["abs"]) == bits_of(x) & 0x7FFF).all()  # abs clears the sign bit


def test_fma_rounds_once(elementwise):
    x, y, z, ours = elementwise
    _assert_bf16("fma", ours["fma"], _fma_exactly(x, y, z))


def test_fma_where_rounding_twice_would_differ():
    # 1.0078125 * 1.5 = 1.51171875 and 1.015625 * 1.25 = 1.26953125 are bfloat16 midpoints: a tiny
    # addend decides the rounding (x*y+z in float32, then rounded to bfloat16, ties instead)
    x = torch.tensor([1.0078125, 1.015625, 1.0078125, 1.015625], dtype=torch.bfloat16)
    y = torch.tensor([1.5, 1.25, 1.5, 1.25], dtype=torch.bfloat16)
    z = torch.tensor([-(2.0**-30), 2.0**-30, 0.0, 0.0], dtype=torch.bfloat16)
    out = torch.empty(4, dtype=torch.bfloat16, device="simdev")
    _fma_only[(1,)](x.to("simdev"), y.to("simdev"), z.to("simdev"), out, BLOCK=4)
    assert out.cpu().tolist() == [1.5078125, 1.2734375, 1.515625, 1.265625]


@triton.jit
def _fma_only(x, y, z, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.fma(tl.load(x + offs), tl.load(y + offs), tl.load(z + offs)))


def test_constants_are_bfloat16_of_six_decimals():
    x = _operands()[0][:64]
    values = (2.5, 0.1, 1e-7, 4.9768e-05, -3.75, 1e39)
    out = torch.empty(len(values), 2, 64, dtype=torch.bfloat16, device="simdev")
    for i, value in enumerate(values):
        _constants[(1,)](x.to("simdev"), out[i], VALUE=value, BLOCK=64)
    out = out.cpu()
    # python/src/ir.cc's get_bf16: a C float printed with "%f", parsed as bfloat16
    with np.errstate(over="ignore"):  # 1e39 is inf as a C float
        expected = torch.tensor([float("%f" % np.float32(v)) for v in values]).bfloat16()
    assert torch.equal(out[:, 0], expected[:, None].expand(-1, 64))
    assert out[2, 0, 0].item() == 0.0  # 1e-7 is 0 on a GPU
    _assert_bf16("a * 2.0 + 0.5", out[0, 1], x * 2.0 + 0.5)  # torch: each op rounded to bfloat16


@triton.jit
def _constants(x, out, VALUE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.full((BLOCK,), VALUE, tl.bfloat16))
    tl.store(out + BLOCK + offs, tl.load(x + offs) * 2.0 + 0.5)  # bfloat16 * and + with bfloat16 constants


# ---------------------------------------------------------------- reductions and scans


@triton.jit
def _reductions(x, sums, cums, maxes, M: tl.constexpr, N: tl.constexpr):
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)[None, :]
    a = tl.load(x + rows * N + cols)
    tl.store(sums + tl.arange(0, N), tl.sum(a, axis=0))
    tl.store(sums + N + tl.arange(0, M), tl.sum(a, axis=1))
    tl.store(sums + N + M, tl.sum(a))
    tl.store(sums + N + M + 1 + tl.arange(0, M)[:, None], tl.sum(a, axis=1, keep_dims=True))
    tl.store(cums + rows * N + cols, tl.associative_scan(a, 1, tl.standard._sum_combine))
    tl.store(maxes + tl.arange(0, N), tl.max(a, axis=0))
    tl.store(maxes + N + tl.arange(0, M), tl.reduce(a, 1, _add_combine))


@triton.jit
def _add_combine(a, b):
    return a + b


def _tree_sum(t: torch.Tensor, dim: int) -> torch.Tensor:
    """torch's bfloat16 adds, halving `dim` (narrow_floats' order: a warp's butterfly shuffles)."""
    while t.shape[dim] > 1:
        half = t.shape[dim] // 2
        t = t.narrow(dim, 0, half) + t.narrow(dim, half, half)
    return t.squeeze(dim)


def _sequential(t: torch.Tensor, dim: int, keep=True) -> torch.Tensor:
    parts = [t.select(dim, 0)]
    for i in range(1, t.shape[dim]):
        parts.append(parts[-1] + t.select(dim, i))  # each add rounded to bfloat16
    return torch.stack(parts, dim) if keep else parts[-1]


def test_reductions_add_in_bfloat16_at_every_step():
    M, N = 8, 16
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(M, N, generator=g) * 64).bfloat16()
    x[0] = torch.tensor([256.0] + [1.0] * (N - 1))  # 1s lost one by one: the tree rounds at each add
    x[1, 3] = float("nan")
    sums = torch.empty(N + M + 1 + M, dtype=torch.bfloat16, device="simdev")
    cums = torch.empty(M * N, dtype=torch.bfloat16, device="simdev")
    maxes = torch.empty(N + M, dtype=torch.bfloat16, device="simdev")
    _reductions[(1,)](x.reshape(-1).to("simdev"), sums, cums, maxes, M=M, N=N)
    sums, cums, maxes = sums.cpu(), cums.cpu().view(M, N), maxes.cpu()
    expected = torch.cat([_tree_sum(x, 0), _tree_sum(x, 1), _tree_sum(x.reshape(-1), 0)[None], _tree_sum(x, 1)])
    _assert_bf16("tl.sum", sums, expected)
    # the GPU's sum of row 0 is 270, where float32 accumulation rounded once gives 272
    assert sums[N].item() == 270.0 and x[0].float().sum().bfloat16().item() == 272.0
    _assert_bf16("associative_scan", cums, _sequential(x, 1))
    # tl.max promotes bfloat16 to float32 (language/standard.py) and skips NaN (maxnum)
    assert torch.equal(maxes[:N], x.float().nan_to_num(-float("inf")).amax(0).bfloat16())
    # a combine of its own: the interpreter's sequential reduce, each add rounded
    _assert_bf16("tl.reduce(a + b)", maxes[N:], _sequential(x, 1, keep=False))


def test_sums_of_exact_values_match_torch_in_any_order():
    # integers whose partial sums bfloat16 holds exactly: the order of the adds cannot matter
    x = torch.randint(-8, 9, (8, 16), generator=torch.Generator().manual_seed(4)).bfloat16()
    sums = torch.empty(16 + 8 + 1 + 8, dtype=torch.bfloat16, device="simdev")
    scratch = torch.empty(8 * 16 + 16 + 8, dtype=torch.bfloat16, device="simdev")
    _reductions[(1,)](x.reshape(-1).to("simdev"), sums, scratch[:128], scratch[128:], M=8, N=16)
    expected = torch.cat([x.sum(0), x.sum(1), x.sum()[None], x.sum(1)])
    assert torch.equal(sums.cpu(), expected)


# ---------------------------------------------------------------- atomics


@triton.jit
def _atomic_add(target, values, old, n, SLOTS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    slot = tl.where(mask, offs % SLOTS, offs * 1_000_003)  # masked-out lanes at wild addresses
    previous = tl.atomic_add(target + slot, tl.load(values + offs, mask=mask), mask=mask)
    tl.store(old + offs, previous, mask=mask)


def test_atomic_add_rounds_each_add():
    n, slots = 200, 3
    g = torch.Generator().manual_seed(6)
    values = (torch.randn(n, generator=g) * 4).bfloat16()
    values[:slots * 4] = 1.0  # added to 256 one at a time: each lost to rounding
    start = torch.tensor([256.0, -0.5, 1e30], dtype=torch.bfloat16)
    target = start.to("simdev")
    old = torch.empty(n, dtype=torch.bfloat16, device="simdev")
    _atomic_add[(4,)](target, values.to("simdev"), old, n, SLOTS=slots, BLOCK=64)
    # programs run in order and a program's lanes on one address in lane order, each add rounded
    expected_old = torch.empty(n, dtype=torch.bfloat16)
    total = start.clone()
    for i in range(n):
        expected_old[i] = total[i % slots]
        total[i % slots] = total[i % slots] + values[i]
    assert torch.equal(old.cpu(), expected_old)
    assert torch.equal(target.cpu(), total)
    assert target.cpu()[0].item() != 256.0 + values[0::slots].float().sum().item()


# ---------------------------------------------------------------- what a GPU cannot compile


@triton.jit
def _fp8_binary(x, y, out, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(x + offs)
    b = tl.load(y + offs)
    if OP == "max":
        r = tl.maximum(a, b)
    elif OP == "reduce_max":
        r = tl.broadcast_to(tl.reduce(a, 0, tl.standard._elementwise_max), (BLOCK,))
    elif OP == "add":
        r = a + b
    else:
        r = tl.fdiv(a, b)
    tl.store(out + offs, r)


def test_fp8_maximum_compares_values():
    x = torch.tensor([-1.0, 2.0, -448.0, 0.5] * 4, dtype=torch.float8_e4m3fn)
    y = torch.tensor([-2.0, -3.0, 1.0, 0.25] * 4, dtype=torch.float8_e4m3fn)
    out = torch.empty(16, dtype=torch.float8_e4m3fn, device="simdev")
    _fp8_binary[(1,)](x.to("simdev"), y.to("simdev"), out, OP="max", BLOCK=16)
    assert torch.equal(out.cpu().float(), torch.maximum(x.float(), y.float()))
    _fp8_binary[(1,)](x.to("simdev"), y.to("simdev"), out, OP="reduce_max", BLOCK=16)  # (largest bits: 0xfe, -448)
    assert out.cpu().float().tolist() == [2.0] * 16


def test_what_a_gpu_cannot_compile_is_refused_naming_the_fix():
    x = torch.ones(16, dtype=torch.float8_e4m3fn, device="simdev")
    with pytest.raises(torch.AcceleratorError, match=r"(?s)NotImplementedError: devbridge: Triton's NVIDIA backend "
                                                     r"cannot compile \+ on float8e4nv operands .*#11898.*"
                                                     r"x.to\(tl.float32\)"):
        _fp8_binary[(1,)](x, x, torch.empty_like(x), OP="add", BLOCK=16)
        torch.accelerator.synchronize()
    y = torch.ones(16, dtype=torch.bfloat16, device="simdev")
    with pytest.raises(torch.AcceleratorError, match=r"(?s)cannot compile tl.fdiv on bfloat16 operands .*"
                                                     r"Unsupported bitwidth.*divide with `/`"):
        _fp8_binary[(1,)](y, y, torch.empty_like(y), OP="fdiv", BLOCK=16)
        torch.accelerator.synchronize()
    # math functions take float32/float64 only: the front end refuses bfloat16, as for a GPU
    with pytest.raises(triton.compiler.errors.CompilationError,
                       match=r"Expected dtype \['fp32', 'fp64'\] but got bf16"):
        _exp[(1,)](y, torch.empty_like(y), BLOCK=16)


@triton.jit
def _exp(x, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.exp(tl.load(x + offs)))
