"""Numeric conversions on simdev's Triton target (the interpreter target) against
what a GPU computes (devbridge/triton/interpreter/casts.py).

Handwritten kernels convert simdev tensors; the answers are torch's own CPU
conversions (round to nearest even) where a GPU's Triton computes the same,
and stated rules or values measured with Triton 3.6.0 on an H200 (sm_90)
where it does not: fp8 saturation, NaN bits, float64 and integer sources
rounded once where torch rounds twice through float32, float -> integer out
of range. Inputs cover ties, subnormals, overflow, inf, NaN and -0.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

triton = pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")
import triton.language as tl  # noqa: E402

import devbridge  # noqa: E402
import devbridge.triton  # noqa: E402

from launch_support import skip_without_simdev  # noqa: E402

pytestmark = skip_without_simdev
BLOCK = 512

TL = {torch.float64: tl.float64, torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16,
      torch.float8_e4m3fn: tl.float8e4nv, torch.float8_e5m2: tl.float8e5, torch.int8: tl.int8, torch.int16: tl.int16,
      torch.int32: tl.int32, torch.int64: tl.int64, torch.uint8: tl.uint8, torch.uint16: tl.uint16,
      torch.uint32: tl.uint32, torch.uint64: tl.uint64}  # fmt: skip
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@pytest.fixture(autouse=True)
def devbridge_driver():
    with devbridge.triton.activate():
        yield


@triton.jit
def _convert(x, out, n, DST: tl.constexpr, RTZ: tl.constexpr, FORM: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x + offs, mask=mask)
    if RTZ:
        r = v.to(DST, fp_downcast_rounding="rtz")
    elif FORM == 1:
        r = tl.cast(v, DST)
    elif FORM == 2:
        r = tl.cast(v, DST, bitcast=False)
    else:
        r = v.to(DST)
    tl.store(out + offs, r, mask=mask)


@triton.jit
def _fp8e4b15(x, out, n, DOWN: tl.constexpr, BLOCK: tl.constexpr):
    # fp8e4b15 has no torch dtype: its bits travel as uint8
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x + offs, mask=mask)
    if DOWN:
        tl.store(out + offs, v.to(tl.float8e4b15).to(tl.uint8, bitcast=True), mask=mask)
    else:
        tl.store(out + offs, v.to(tl.float8e4b15, bitcast=True).to(tl.float32), mask=mask)


def on_simdev(x: torch.Tensor, dtype: torch.dtype, rtz: bool = False, form: int = 0) -> torch.Tensor:
    """x converted to `dtype` by a Triton kernel on simdev, back on the CPU."""
    n = x.numel()
    out = torch.empty(n, dtype=dtype, device="simdev")
    _convert[(triton.cdiv(n, BLOCK),)](x.to("simdev"), out, n, DST=TL[dtype], RTZ=rtz, FORM=form, BLOCK=BLOCK)
    return out.cpu()


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(_BITS[t.element_size()]).to(torch.int64) & ((1 << 8 * t.element_size()) - 1)


def assert_bits(ours: torch.Tensor, expected: torch.Tensor, nan: int | None = None, what: str = ""):
    """Bit for bit; where `expected` is NaN, `ours` is the NaN `nan` (a GPU's)."""
    assert ours.dtype == expected.dtype, what
    mismatch = bits(ours) != bits(expected)
    if nan is not None:
        is_nan = expected.float().isnan()
        assert (bits(ours)[is_nan] == nan).all(), f"{what}: NaN bits {bits(ours)[is_nan].unique().tolist()}"
        mismatch &= ~is_nan
    where = mismatch.nonzero().flatten()[:8].tolist()
    assert not where, f"{what}: {[(i, bits(ours)[i].item(), bits(expected)[i].item()) for i in where]}"


def f32(bit_patterns) -> torch.Tensor:
    return torch.from_numpy(np.array(bit_patterns, dtype=np.uint32).view(np.float32).copy())


def float32_inputs() -> torch.Tensor:
    """Ties and their neighbours for bfloat16 and float16 (normal and subnormal), overflow, specials."""
    g = torch.Generator().manual_seed(0)
    high = torch.randint(0, 1 << 15, (300,), generator=g, dtype=torch.int64) << 16
    low = torch.tensor([0x8000, 0x7FFF, 0x8001, 0x0000, 0x1234])
    around_bf16 = (high[:, None] | low[None, :]).flatten()  # even and odd high halves, ties and neighbours
    halves = torch.arange(0, 0x7C00, 7, dtype=torch.int16).view(torch.float16).float()
    mids = (halves[:-1] + halves[1:]) / 2  # float16 ties (exact in float32), subnormal ones too
    specials = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), 65504.0, 65519.99, 65520.0, 3.4e38, 1e-45,
                             -1e-40, 2.0**-25, 3 * 2.0**-26, 2.0**-24, 2.0**-133, 1.5 * 2.0**-133])
    values = torch.cat([f32(around_bf16.tolist()), halves, mids, specials, torch.linspace(-9, 9, 1001),
                        torch.randn(500, generator=g) * 100, f32([0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF])])
    return torch.cat([values, -values])


def toward_zero(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x rounded toward zero: torch's nearest-even result, a step back where it rounded away
    (overflow included: inf - 1 step is the largest finite value)."""
    nearest = x.to(dtype)
    away = (nearest.double().abs() > x.double().abs()) & ~x.isnan()
    stepped = bits(nearest) - away.to(torch.int64)
    return stepped.to(_BITS[nearest.element_size()]).view(dtype)


def rounded_once(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x (float64, or integers below 2**53) rounded once to a 16-bit float: to float32 with
    round-to-odd (toward zero, lowest bit set if inexact; float32 keeps at least 13 more bits
    than float16 and bfloat16, so their nearest-even rounding of it is the single rounding)."""
    x = x.double()
    z = toward_zero(x, torch.float32)
    inexact = (z.double() != x) & ~x.isnan()
    odd = (z.view(torch.int32) | inexact.to(torch.int32)).view(torch.float32)
    return odd.to(dtype)


# ---------------------------------------------------------------- float <-> float


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_float32_rounds_to_nearest_even_as_torch_does(dtype):
    x = float32_inputs()
    # torch.compile's t.bfloat16() on simdev truncated: -8.4375 where torch and a GPU give -8.5
    assert on_simdev(torch.tensor([-8.45]), dtype).item() == torch.tensor([-8.45]).to(dtype).item()
    assert_bits(on_simdev(x, dtype), x.to(dtype), nan=0x7FFF, what=f"float32 -> {dtype}")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_float32_rtz_rounds_toward_zero_and_saturates(dtype):
    x = float32_inputs()
    ours = on_simdev(x, dtype, rtz=True)
    assert_bits(ours, toward_zero(x, dtype), nan=0x7FFF, what=f"float32 -> {dtype} rtz")
    past = torch.tensor(65520.0 if dtype == torch.float16 else 3.4e38)  # nearest even: inf
    assert ours[x == past].float().tolist() == [torch.finfo(dtype).max]
    assert ours[x == float("inf")].float().isinf().all()  # inf itself is exact


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_float64_rounds_once(dtype):
    g = torch.Generator().manual_seed(1)
    near = float32_inputs().double()
    # a hair off a tie: rounding through float32 first lands on the tie, then on the even side
    x = torch.cat([near, near * (1 + 2.0**-30), near * (1 - 2.0**-30),
                   torch.randn(500, generator=g, dtype=torch.float64), torch.tensor([1e300, -1e300, 2.0**-1070])])
    expected = x.to(dtype) if dtype == torch.float32 else rounded_once(x, dtype)
    # a NaN keeps its sign and its payload's top bits, quietened (cvt.rn.*.f64)
    ours = on_simdev(x, dtype)
    assert_bits(ours[~x.isnan()], expected[~x.isnan()], what=f"float64 -> {dtype}")
    assert ours[x.isnan()].float().isnan().all()
    if dtype == torch.bfloat16:
        assert (bits(ours[x.isnan()]) & 0x7FC0 == 0x7FC0).all()


def test_widening_is_exact_and_nan_bits_are_the_gpus():
    every = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16)
    bf16, f16 = every.view(torch.bfloat16), every.view(torch.float16)
    assert_bits(on_simdev(bf16, torch.float32), bf16.float(), what="bfloat16 -> float32")  # NaN bits: shifted
    ours = on_simdev(bf16, torch.float64)
    assert_bits(ours[~bf16.isnan()], bf16.double()[~bf16.isnan()], what="bfloat16 -> float64")
    assert_bits(on_simdev(f16, torch.float32), f16.float(), nan=0x7FFFFFFF, what="float16 -> float32")
    assert_bits(on_simdev(f16, torch.float64), f16.double(), nan=0x7FFFFFFFE0000000, what="float16 -> float64")
    # 16-bit floats to each other go through float32, as Triton's semantic.cast builds them
    assert_bits(on_simdev(f16, torch.bfloat16), f16.to(torch.bfloat16), nan=0x7FFF, what="float16 -> bfloat16")
    assert_bits(on_simdev(bf16, torch.float16), bf16.to(torch.float16), nan=0x7FFF, what="bfloat16 -> float16")
    x = float32_inputs()
    assert_bits(on_simdev(x, torch.float64)[~x.isnan()], x.double()[~x.isnan()], what="float32 -> float64")


# ---------------------------------------------------------------- fp8

FP8 = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}  # the largest finite values


@pytest.mark.parametrize("source", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("fp8", list(FP8), ids=str)
def test_to_fp8_rounds_to_nearest_even_and_saturates(fp8, source):
    x = torch.cat([float32_inputs().to(source).float(), torch.arange(-500, 500, 0.125)]).to(source)
    largest = FP8[fp8]
    # beyond the last tie (464 / 61440) and inf: cvt.rn.satfinite gives the largest finite value,
    # where torch gives NaN (e4m3fn, some versions) or inf (e5m2)
    tie = largest + (16.0 if fp8 == torch.float8_e4m3fn else 4096.0)
    beyond = x.float().abs() >= tie
    expected = torch.where(beyond, torch.copysign(torch.tensor(largest), x.float()), x.float()).to(fp8)
    ours = on_simdev(x, fp8)
    assert_bits(ours, expected, nan=0x7F, what=f"{source} -> {fp8}")
    assert ours[x.float() == float("inf")].float().unique().tolist() == [largest]


def test_float32_to_fp8e5_rtz():
    # cvt.rz.f16.f32, then the float16's high byte: toward zero, 57344 past it, inf stays inf
    x = torch.cat([float32_inputs(), torch.arange(-70000, 70000, 7.3)])
    expected = torch.where(x.isinf(), x, toward_zero(x, torch.float8_e5m2).float()).to(torch.float8_e5m2)
    assert_bits(on_simdev(x, torch.float8_e5m2, rtz=True), expected, nan=0x7F, what="float32 -> fp8e5 rtz")


@pytest.mark.parametrize("fp8", list(FP8), ids=str)
def test_from_fp8_is_exact(fp8):
    every = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(fp8)
    for dtype, nan in ((torch.float16, 0x7FFF), (torch.float32, 0x7FFFFFFF)):
        assert_bits(on_simdev(every, dtype), every.to(dtype), nan=nan, what=f"{fp8} -> {dtype}")
    ours = on_simdev(every, torch.bfloat16)
    if fp8 == torch.float8_e4m3fn:
        assert_bits(ours, every.to(torch.bfloat16), nan=0x7FFF, what="fp8e4nv -> bfloat16")
    else:
        # Hopper's fp8e5 -> bfloat16 multiplies the shifted bits by 2**112: the all-ones
        # exponent is a number there, inf becomes 65536 and NaN 81920, 98304, 114688
        finite = every.float().isfinite()
        assert_bits(ours[finite], every[finite].to(torch.bfloat16), what="fp8e5 -> bfloat16")
        special = every.view(torch.uint8)[~finite]
        mantissa, sign = (special & 3).float(), torch.where(special >= 128, -1.0, 1.0)
        assert torch.equal(ours[~finite].float(), sign * (1 + mantissa / 4) * 65536)


def fp8e4b15_nearest(x: torch.Tensor) -> torch.Tensor:
    """The fp8e4b15 bits a GPU's convert_float16_to_fp8e4b15 gives for float16 `x`: magnitudes
    clamped to 1.75, ties away from zero, NaN and inf as 1.75, the sign kept."""
    codes = torch.arange(128)
    exponent, mantissa = codes >> 3, (codes & 7).double()
    values = torch.where(exponent == 0, mantissa / 8 * 2.0**-14, (1 + mantissa / 8) * 2.0 ** (exponent - 15))
    magnitude = x.double().abs().nan_to_num(nan=1.75).clamp(max=1.75)
    code = torch.searchsorted((values[1:] + values[:-1]) / 2, magnitude, right=True)  # at a tie: the larger
    return code | (x.view(torch.int16) < 0).to(torch.int64) << 7


def test_fp8e4b15_clamps_and_rounds_half_away_from_zero():
    every = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).view(torch.float16)
    down = torch.empty(every.numel(), dtype=torch.uint8, device="simdev")
    _fp8e4b15[(triton.cdiv(every.numel(), BLOCK),)](every.to("simdev"), down, every.numel(), DOWN=True, BLOCK=BLOCK)
    assert torch.equal(down.cpu().to(torch.int64), fp8e4b15_nearest(every))
    # from float32: cvt.rz.f16.f32 first (and a float32 NaN becomes the positive float16 NaN)
    x = float32_inputs()
    _fp8e4b15[(triton.cdiv(x.numel(), BLOCK),)](x.to("simdev"), down[:x.numel()], x.numel(), DOWN=True, BLOCK=BLOCK)
    expected = fp8e4b15_nearest(torch.where(x.isnan(), float("nan"), toward_zero(x, torch.float16).float()).half())
    assert torch.equal(down[:x.numel()].cpu().to(torch.int64), expected)
    # back: the 7 low bits shifted into a float16 (0x7f is 1.875)
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    up = torch.empty(256, device="simdev")
    _fp8e4b15[(1,)](codes.to("simdev"), up, 256, DOWN=False, BLOCK=BLOCK)
    magnitude = ((codes.to(torch.int32) & 0x7F) << 7).to(torch.int16).view(torch.float16).float()
    assert torch.equal(up.cpu(), torch.where(codes >= 128, -magnitude, magnitude))


# ---------------------------------------------------------------- integers


INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32, torch.uint64]


def integer_inputs(dtype: torch.dtype) -> torch.Tensor:
    info = torch.iinfo(dtype)
    if info.bits <= 16:
        return torch.arange(info.min, info.max + 1).to(dtype)
    top = min(info.bits - (0 if info.min == 0 else 1), 52)  # exact in float64 (the reference's way in)
    powers = torch.tensor([1 << k for k in range(top)], dtype=torch.int64)
    near = torch.cat([powers + d for d in (-1, 0, 1)] + [powers + (powers >> s) + d for s in (8, 9, 11, 12)
                                                         for d in (-1, 0, 1)])
    near = near[near < (1 << top)]
    signed = near if info.min == 0 else torch.cat([near, -near])
    return signed.to(dtype)


@pytest.mark.parametrize("source", INTS + [torch.bool], ids=str)
def test_integers_to_floats_round_once(source):
    x = torch.tensor([False, True]) if source == torch.bool else integer_inputs(source)
    for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.float64):
        # torch rounds 32- and 64-bit integers to 16-bit floats through float32 (twice); a GPU's cvt once
        expected = x.to(dtype) if dtype in (torch.float32, torch.float64) else rounded_once(x.to(torch.int64), dtype)
        assert_bits(on_simdev(x, dtype), expected, what=f"{source} -> {dtype}")


@pytest.mark.parametrize("form", [0, 1, 2], ids=["to", "tl.cast", "bitcast=False"])
def test_int8_to_bfloat16_in_every_spelling(form):
    # Triton's upstream test_cast[1-int8-bfloat16-False-1024]: the interpreter gave NaN (the int8 -1
    # stored as the bits 0xffff)
    x = torch.arange(-128, 128).to(torch.int8)
    assert_bits(on_simdev(x, torch.bfloat16, form=form), x.to(torch.bfloat16), what="int8 -> bfloat16")


def test_big_integers_round_once_to_bfloat16():
    # measured: 2**24 + 2**16 + 1 and 2**62 + 2**54 + 1 are just above a bfloat16 tie; through
    # float32 (torch) they land on it and round to even
    x = torch.tensor([2**24 + 2**16 + 1, 2**62 + 2**54 + 1, -(2**62) - 2**54 - 1], dtype=torch.int64)
    assert bits(on_simdev(x, torch.bfloat16)).tolist() == [0x4B81, 0x5E81, 0xDE81]
    assert bits(on_simdev(x[:2].to(torch.uint64), torch.bfloat16)).tolist() == [0x4B81, 0x5E81]


FLOAT_TO_INT = [384.0, 49152.0, -49152.0, -1.5, 98304.0, 3221225472.0, -3221225472.0, 1.5 * 2.0**63,
                -1.5 * 2.0**63, 1.5 * 2.0**64, float("nan"), float("inf"), -float("inf"), 255.5, -128.5, 127.5]
# measured (float32 sources): cvt.rzi saturates at its type's range, 8 bits keep the low byte of a
# 16-bit cvt, NaN is 0 but 0x80...0 into 64 bits (and from float64 into any width)
MEASURED = {
    torch.int8: [-128, -1, 0, -1, -1, -1, 0, -1, 0, -1, 0, -1, 0, -1, -128, 127],
    torch.uint8: [128, 0, 0, 0, 255, 255, 0, 255, 0, 255, 0, 255, 0, 255, 0, 127],
    torch.int16: [384, 32767, -32768, -1, 32767, 32767, -32768, 32767, -32768, 32767, 0, 32767, -32768, 255, -128,
                  127],
    torch.int32: [384, 49152, -49152, -1, 98304, 2**31 - 1, -(2**31), 2**31 - 1, -(2**31), 2**31 - 1, 0, 2**31 - 1,
                  -(2**31), 255, -128, 127],
    torch.int64: [384, 49152, -49152, -1, 98304, 3221225472, -3221225472, 2**63 - 1, -(2**63), 2**63 - 1, -(2**63),
                  2**63 - 1, -(2**63), 255, -128, 127],
    torch.uint32: [384, 49152, 0, 0, 98304, 3221225472, 0, 2**32 - 1, 0, 2**32 - 1, 0, 2**32 - 1, 0, 255, 0, 127],
    torch.uint64: [384, 49152, 0, 0, 98304, 3221225472, 0, 3 * 2**62, 0, 2**64 - 1, 2**63, 2**64 - 1, 0, 255, 0, 127],
}  # fmt: skip


@pytest.mark.parametrize("dtype", list(MEASURED), ids=str)
def test_floats_to_integers_truncate_and_saturate_as_measured(dtype):
    x = torch.tensor(FLOAT_TO_INT)
    expected = torch.from_numpy(np.array(MEASURED[dtype], dtype=str(dtype).removeprefix("torch.")))
    assert torch.equal(bits(on_simdev(x, dtype)), bits(expected))
    if dtype == torch.int32:  # from float64, NaN is 0x80000000
        assert on_simdev(torch.tensor([float("nan")], dtype=torch.float64), dtype).item() == -(2**31)


@pytest.mark.parametrize("source", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_floats_in_range_truncate_as_torch(source):
    every = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16)
    x = every.view(source) if source != torch.float32 else float32_inputs()
    for dtype in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16):
        info = torch.iinfo(dtype)
        inside = (x.double() > float(info.min) - 1) & (x.double() < float(info.max) + 1)  # NaN: not inside
        assert torch.equal(on_simdev(x[inside], dtype), x[inside].to(dtype)), f"{source} -> {dtype}"


# ---------------------------------------------------------------- what a GPU cannot compile


@pytest.mark.parametrize("source, dtype, rtz", [
    pytest.param(torch.float64, torch.float8_e4m3fn, False, id="float64->fp8e4nv"),
    pytest.param(torch.float16, torch.float8_e5m2, True, id="float16->fp8e5-rtz"),
    pytest.param(torch.float64, torch.float16, True, id="float64->float16-rtz"),
])
def test_conversions_a_gpu_cannot_compile_are_refused_naming_the_detour(source, dtype, rtz):
    # Triton's NVIDIA backend fails to lower these ("PassManager::run failed")
    with pytest.raises(torch.AcceleratorError, match=r"(?s)NotImplementedError: devbridge: Triton's NVIDIA backend "
                                                     r"cannot compile the conversion .*(convert|drop)"):
        on_simdev(torch.ones(4, dtype=source), dtype, rtz=rtz)
        torch.accelerator.synchronize()


# ---------------------------------------------------------------- torch.compile


@pytest.fixture(scope="module")
def inductor(tmp_path_factory):
    from inductor_support import private_inductor

    with private_inductor(tmp_path_factory.mktemp("inductor-cache")):
        yield


@pytest.mark.parametrize("name, fn, x", [
    pytest.param("bfloat16", lambda t: t.bfloat16(), torch.linspace(-9, 9, 1001), id="t.bfloat16()"),
    pytest.param("half", lambda t: t.half(), torch.linspace(-9, 9, 1001) * 7919, id="t.half()"),
    pytest.param("int8", lambda t: t.to(torch.bfloat16), torch.arange(-128, 128).to(torch.int8), id="int8->bf16"),
    pytest.param("subnormals", lambda t: t.float() * 2, torch.arange(1, 300).to(torch.int16).view(torch.bfloat16),
                 id="bf16-subnormals->float"),
])  # fmt: skip
def test_compiled_conversions_match_eager(inductor, name, fn, x):
    torch._dynamo.reset()
    ours = torch.compile(fn, fullgraph=True)(x.to("simdev")).cpu()
    assert torch.equal(bits(ours), bits(fn(x))), name
