"""libdevice's integer, bit and conversion-to-integer functions for the
interpreter Triton target (libdevice.py): all exact, vectorized numpy.

Each computes the exact integer result (in int64 / uint64, or Python ints for
the 64-bit high products' parts); libdevice.py then keeps the low bits of the
return type libdevice's wrapper states, as the GPU's register does (e.g.
__nv_float2uint_rn is declared to return int32: the uint32's bits).

Semantics are those of NVIDIA's libdevice user's guide
(https://docs.nvidia.com/cuda/libdevice-users-guide/) and PTX for what it
leaves open: float-to-integer conversions of values outside the integer's
range (undefined there) saturate and NaN gives 0, as PTX's cvt does; mul24
takes the low 24 bits of each operand, sign-extended for the signed variant
(PTX mul24.lo.s32).
"""

from __future__ import annotations

import numpy as np

_U32, _U64 = np.uint64(0xFFFFFFFF), np.uint64(0xFFFFFFFFFFFFFFFF)


def _u64(x):
    """x's bits (32 or 64 of them) as uint64, zero-extended."""
    x = np.asarray(x)
    return x.view(np.uint32 if x.dtype.itemsize == 4 else np.uint64).astype(np.uint64)


def _popcount(v):
    # SWAR popcount of 64-bit words (numpy < 2 has no bitwise_count)
    v = v - ((v >> np.uint64(1)) & np.uint64(0x5555555555555555))
    v = (v & np.uint64(0x3333333333333333)) + ((v >> np.uint64(2)) & np.uint64(0x3333333333333333))
    v = (v + (v >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return ((v * np.uint64(0x0101010101010101)) >> np.uint64(56)).astype(np.int64)


def _bit_length(v):
    """Number of significant bits of each uint64 (0 for 0)."""
    v = v.copy()
    for shift in (1, 2, 4, 8, 16, 32):  # smear the highest set bit downwards
        v |= v >> np.uint64(shift)
    return _popcount(v)


def _clz(bits):
    return lambda x: bits - _bit_length(_u64(x))


def _ffs(x):
    v = _u64(x)
    lowest = v & (~v + np.uint64(1))  # the lowest set bit alone
    return _bit_length(lowest)


def _brev(bits):
    def fn(x):
        v, out = _u64(x), np.zeros(np.shape(x), dtype=np.uint64)
        for i in range(bits):
            out |= ((v >> np.uint64(i)) & np.uint64(1)) << np.uint64(bits - 1 - i)
        return out

    return fn


def _byte_perm(x, y, s):
    source = _u64(x) | (_u64(y) << np.uint64(32))  # bytes 0-3 from x, 4-7 from y
    s, out = _u64(s), np.zeros(np.shape(x), dtype=np.uint64)
    for n in range(4):  # result byte n = source byte s<4n+2 : 4n> (bit 3 of each nibble unused)
        index = (s >> np.uint64(4 * n)) & np.uint64(7)
        out |= ((source >> (index * np.uint64(8))) & np.uint64(0xFF)) << np.uint64(8 * n)
    return out


def _umul64hi(a, b):
    """High 64 bits of the 128-bit product of two uint64 arrays (32-bit limbs)."""
    a0, a1, b0, b1 = a & _U32, a >> np.uint64(32), b & _U32, b >> np.uint64(32)
    low = a0 * b0
    middle = a1 * b0 + (low >> np.uint64(32))
    middle2 = a0 * b1 + (middle & _U32)
    return a1 * b1 + (middle >> np.uint64(32)) + (middle2 >> np.uint64(32))


def _mul64hi(a, b):
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    high = _umul64hi(a.view(np.uint64), b.view(np.uint64))
    # the signed product's high word: subtract b (a) where a (b) is negative, mod 2**64
    high = high - np.where(a < 0, b.view(np.uint64), np.uint64(0)) - np.where(b < 0, a.view(np.uint64), np.uint64(0))
    return high.view(np.int64)


def _mul24(signed):
    def fn(a, b):
        def low24(v):
            v = np.asarray(v).astype(np.int64) & 0xFFFFFF
            return np.where(v & 0x800000, v - 0x1000000, v) if signed else v

        return low24(a) * low24(b)  # |product| < 2**47: exact in int64; its low 32 bits are kept

    return fn


def _halving_add(rounding):
    # floor((x + y + rounding) / 2), the sum in int64 so it cannot overflow
    return lambda x, y: (np.asarray(x).astype(np.int64) + np.asarray(y).astype(np.int64) + rounding) >> 1


def _sad(x, y, z):
    return np.abs(np.asarray(x).astype(np.int64) - np.asarray(y).astype(np.int64)) + np.asarray(z).astype(np.int64)


_ROUNDINGS = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}


def float_to_int(rounding, signed: bool, bits: int):
    """A float rounded to an integer: saturated to the integer's range, NaN 0 (PTX cvt)."""
    low, high = (-(1 << bits - 1), (1 << bits - 1) - 1) if signed else (0, (1 << bits) - 1)
    dtype = np.int64 if signed else np.uint64

    def fn(x):
        r = rounding(np.asarray(x, dtype=np.float64))
        over, under = r >= float(high + 1), r < float(low)  # both bounds are powers of two: exact
        safe = np.where(np.isnan(r) | over | under, 0.0, r)
        out = safe.astype(dtype)
        out = np.where(over, dtype(high), out)
        return np.where(under, dtype(low), out)

    return fn


def _bitcast(dtype):
    return lambda x: np.asarray(x).view(dtype)


def symbols() -> dict:
    """{libdevice symbol: numpy implementation} of the integer and bit functions."""
    table = {
        "__nv_clz": _clz(32), "__nv_clzll": _clz(64),
        "__nv_popc": lambda x: _popcount(_u64(x)), "__nv_popcll": lambda x: _popcount(_u64(x)),
        "__nv_ffs": _ffs, "__nv_ffsll": _ffs,
        "__nv_brev": _brev(32), "__nv_brevll": _brev(64),
        "__nv_byte_perm": _byte_perm,
        "__nv_mulhi": lambda a, b: (np.asarray(a).astype(np.int64) * np.asarray(b).astype(np.int64)) >> 32,
        "__nv_umulhi": lambda a, b: (_u64(a) * _u64(b)) >> np.uint64(32),
        "__nv_mul64hi": _mul64hi,
        "__nv_umul64hi": lambda a, b: _umul64hi(_u64(a), _u64(b)),
        "__nv_mul24": _mul24(True), "__nv_umul24": _mul24(False),
        "__nv_sad": _sad, "__nv_usad": _sad,
        "__nv_hadd": _halving_add(0), "__nv_uhadd": _halving_add(0),
        "__nv_rhadd": _halving_add(1), "__nv_urhadd": _halving_add(1),
        "__nv_abs": np.abs, "__nv_llabs": np.abs,  # |INT_MIN| wraps to INT_MIN, as on the GPU
        # bit reinterpretations
        "__nv_int_as_float": _bitcast(np.float32), "__nv_uint_as_float": _bitcast(np.float32),
        "__nv_float_as_int": _bitcast(np.int32), "__nv_float_as_uint": _bitcast(np.int32),
        "__nv_longlong_as_double": _bitcast(np.float64), "__nv_double_as_longlong": _bitcast(np.int64),
        "__nv_double2loint": lambda x: np.asarray(x, dtype=np.float64).view(np.uint64) & _U32,
        "__nv_double2hiint": lambda x: np.asarray(x, dtype=np.float64).view(np.uint64) >> np.uint64(32),
        "__nv_hiloint2double": lambda hi, lo: ((_u64(hi) << np.uint64(32)) | _u64(lo)).view(np.float64),
    }  # fmt: skip
    for mode, rounding in _ROUNDINGS.items():
        for source in ("float", "double"):
            table[f"__nv_{source}2int_{mode}"] = float_to_int(rounding, True, 32)
            table[f"__nv_{source}2uint_{mode}"] = float_to_int(rounding, False, 32)
            table[f"__nv_{source}2ll_{mode}"] = float_to_int(rounding, True, 64)
            table[f"__nv_{source}2ull_{mode}"] = float_to_int(rounding, False, 64)
    return table
