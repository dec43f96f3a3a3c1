"""libdevice's special functions for the interpreter Triton target
(libdevice_math.py builds the symbol table), on float64 numpy arrays.

torch's CPU kernels in float64 compute most of them (what torch's CUDA
kernels compute too): erf, erfc, erfinv, erfcx, ndtri, lgamma, i0, i1, and the
Bessel functions J0, J1, Y0, Y1 for |x| > 25. Below that torch's Bessel
kernels (aten/src/ATen/native/Math.h) are good to about 1e-6 only (4e-7
absolute near x = 5, measured against mpmath), so J0 and J1 come from
Miller's backward recurrence and Y0, Y1 from the Neumann series over the same
J_2k (Abramowitz & Stegun 9.1.88, and its derivative for Y1), accurate to
about 1e-15 absolute. Written here as well: normcdf (from erfcx in the
lower tail, where torch's ndtr loses everything below 1e-20), erfcinv (from
ndtri, and Newton's method on log erfc below ndtri's range), tgamma (Python's
math.gamma), jn / yn (recurrences: forward for Y and for J above the order,
Miller's backward one for J below it).

Values at zeros and infinities are those NVIDIA's libdevice user's guide
documents (https://docs.nvidia.com/cuda/libdevice-users-guide/), e.g.
__nv_j0(inf) = +0 where torch.special.bessel_j0 gives NaN.
"""

from __future__ import annotations

import math

import numpy as np

_EULER = 0.57721566490153286061
_MILLER_LIMIT = 25.0  # torch's Bessel kernels are accurate to 1e-15 above this
_MILLER_START = 108  # even, above 25 + sqrt(160 * 25) + 20: J_108(25) is far below double precision


def torch_special(name):
    """torch.special.<name> (torch.<name> where special has none) on a float64 array."""

    def fn(x):
        import torch

        op = getattr(torch.special, name, None) or getattr(torch, name)
        return op(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64))).numpy()

    return fn


def elementwise(fn, *arrays):
    """fn over the elements (Python scalars) of the broadcast arrays, as float64."""
    arrays = np.broadcast_arrays(*arrays)
    out = np.frompyfunc(fn, len(arrays), 1)(*[a.astype(object) for a in arrays])
    return np.asarray(out, dtype=np.float64).reshape(arrays[0].shape)


def _bessel_small(x):
    """(J0, J1, Y0, Y1) for 1e-5 <= x <= 25 (float64 array), by Miller's algorithm."""
    above, current = np.zeros_like(x), np.ones_like(x)  # J_{m+1} = 0, J_m = 1, unnormalized
    norm, y0_sum, y1_sum = np.zeros_like(x), np.zeros_like(x), np.zeros_like(x)
    j1, two_over_x = np.zeros_like(x), 2 / x
    for k in range(_MILLER_START, 0, -1):  # current is J_k; sums over the J_k, then a step down
        if k % 2 == 0:
            norm += 2 * current  # J_0 + 2 (J_2 + J_4 + ...) = 1
            y0_sum += ((-1) ** (k // 2) / (k // 2)) * current  # sum (-1)^j J_2j / j
        else:  # Y1's sum over j of (-1)^j (J_{2j-1} - J_{2j+1}) / (2j), regrouped per odd k
            weight = (-1) ** ((k + 1) // 2) / (k + 1) - ((-1) ** ((k - 1) // 2) / (k - 1) if k >= 3 else 0)
            y1_sum += weight * current
        if k == 1:
            j1 = current
        above, current = current, (k * two_over_x) * current - above
        # Each step grows |current| by at most 2k/x < 1e8 (x >= 1e-5): rescaling
        # every 8 steps past 1e200 keeps it finite; only the ratios matter.
        if k % 8 == 0:
            big = np.abs(current) > 1e200
            if big.any():
                scale = np.where(big, 1e-200, 1.0)
                state = (above, current, norm, y0_sum, y1_sum, j1)
                above, current, norm, y0_sum, y1_sum, j1 = (v * scale for v in state)
    norm = norm + current
    j0, j1, y0_sum, y1_sum = current / norm, j1 / norm, y0_sum / norm, y1_sum / norm
    log_term = np.log(x / 2) + _EULER
    y0 = (2 / np.pi) * log_term * j0 - (4 / np.pi) * y0_sum
    y1 = -(2 / np.pi) * (j0 / x - log_term * j1) + (4 / np.pi) * y1_sum
    return j0, j1, y0, y1


def _bessel_tiny(x):
    """(J0, J1, Y0, Y1) for 0 < x < 1e-5: two terms of each series (A&S 9.1.10, 9.1.11)."""
    log_term = np.log(x / 2) + _EULER
    j0, j1 = 1 - x * x / 4, x / 2 - x**3 / 16
    y0 = (2 / np.pi) * (log_term * j0 + x * x / 4)
    y1 = -2 / (np.pi * x) + (2 / np.pi) * np.log(x / 2) * j1 - x / (2 * np.pi) * (1 - 2 * _EULER)
    return j0, j1, y0, y1


def _bessel(x, which: int):
    """J0 (0), J1 (1), Y0 (2) or Y1 (3) of a float64 array, with libdevice's edge values."""
    ax = np.abs(x)
    names = ("bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1")
    out = torch_special(names[which])(ax)  # accurate for |x| > 25; the rest is replaced below
    small = (ax >= 1e-5) & (ax <= _MILLER_LIMIT)
    if small.any():
        out[small] = _bessel_small(ax[small])[which]
    tiny = (ax > 0) & (ax < 1e-5)
    if tiny.any():
        out[tiny] = _bessel_tiny(ax[tiny])[which]
    if which == 0:
        return np.where(ax == 0, 1.0, np.where(np.isinf(x), 0.0, out))  # J0(+-inf) = +0
    if which == 1:  # odd: J1(-x) = -J1(x), J1(+-0) = +-0, J1(+-inf) = +-0
        return np.where((ax == 0) | np.isinf(x), np.copysign(0.0, x), np.where(x < 0, -out, out))
    # Y0, Y1: NaN below 0, -inf at 0, +0 at +inf
    return np.where(np.isnan(x) | (x < 0), np.nan, np.where(ax == 0, -np.inf, np.where(np.isinf(x), 0.0, out)))


def j0(x):
    return _bessel(x, 0)


def j1(x):
    return _bessel(x, 1)


def y0(x):
    return _bessel(x, 2)


def y1(x):
    return _bessel(x, 3)


def _jn_scalar(n, x, j0_, j1_):
    if n < 0 or math.isnan(x):
        return math.nan
    sign = -1.0 if x < 0 and n % 2 else 1.0  # J_n(-x) = (-1)^n J_n(x)
    x = abs(x)
    if n == 0:
        return j0_
    if x == math.inf or x == 0:
        return sign * 0.0
    if n == 1:
        return sign * j1_
    if x > n:  # forward recurrence J_{k+1} = (2k / x) J_k - J_{k-1}: stable while k < x
        previous, current = j0_, j1_
        for k in range(1, n):
            previous, current = current, (2 * k / x) * current - previous
        return sign * current
    if n * math.log(x / 2) - math.lgamma(n + 1) < -750:  # J_n(x) < (x/2)^n / n! underflows
        return sign * 0.0
    # Miller's backward recurrence from far enough above n that the neglected
    # J_{m+1} is below double precision, normalized by J_0 + 2 (J_2 + J_4 + ...) = 1.
    m = 2 * ((n + int(math.sqrt(160 * n)) + 20) // 2)
    above, current, total, result = 0.0, 1.0, 0.0, 0.0
    for k in range(m, 0, -1):  # current is J_k (unnormalized); step to J_{k-1}
        if k % 2 == 0:
            total += 2 * current
        if k == n:
            result = current
        above, current = current, (2 * k / x) * current - above
        if abs(current) > 1e250:  # rescale: the ratios are what matter
            above, current, total, result = above * 1e-250, current * 1e-250, total * 1e-250, result * 1e-250
    return sign * result / (total + current)


def _yn_scalar(n, x, y0_, y1_):
    if n < 0 or math.isnan(x) or x < 0:
        return math.nan
    if x == 0:
        return -math.inf
    if x == math.inf:
        return 0.0
    if n == 0:
        return y0_
    previous, current = y0_, y1_
    for k in range(1, n):  # forward recurrence, stable for Y; stops once it overflows
        if math.isinf(current):
            break
        previous, current = current, (2 * k / x) * current - previous
    return current


def jn(n, x):
    ax = np.abs(x)
    return elementwise(_jn_scalar, np.asarray(n, dtype=np.int64), x, j0(ax), j1(ax))


def yn(n, x):
    return elementwise(_yn_scalar, np.asarray(n, dtype=np.int64), x, y0(x), y1(x))


def _two_product(a, b):
    """a * b = p + e exactly (Dekker's product, by Veltkamp's splitting; |a|, |b| < 1e150)."""
    def split(v):
        c = 134217729.0 * v
        high = c - (c - v)
        return high, v - high

    p = a * b
    (ah, al), (bh, bl) = split(a), split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def normcdf(x):
    # Lower tail: erfcx(-x/sqrt2) * exp(-x^2/2) / 2, with x^2 exact (a double-double):
    # 0.5 * erfc(-x / sqrt2) would carry the rounding of -x/sqrt2, amplified by x^2.
    erfcx, erfc = torch_special("erfcx"), torch_special("erfc")
    clipped = np.clip(x, -60.0, 0.0)
    square, error = _two_product(clipped, clipped)
    lower = 0.5 * erfcx(-clipped / math.sqrt(2.0)) * np.exp(-square / 2) * (1 - error / 2)
    return np.where(x < 0, np.where(x < -60.0, 0.0, lower), 0.5 * erfc(-x / math.sqrt(2.0)))


def erfcinv(y):
    # erfcinv(y) = -ndtri(y / 2) / sqrt(2), accurate for y near 0 where erfinv(1 - y) is not;
    # below 2**-1000, y / 2 loses bits (or underflows): Newton's method on
    # log erfc(z) = log erfcx(z) - z^2 = log y, whose derivative is -2 / (sqrt(pi) erfcx(z)).
    result = 0.0 - torch_special("ndtri")(y / 2.0) / math.sqrt(2.0)
    tiny = (y > 0) & (y < 2.0**-1000)
    if tiny.any():
        target, erfcx = np.log(y[tiny]), torch_special("erfcx")
        z = np.sqrt(-target)
        for _ in range(6):
            e = erfcx(z)
            z = z + (np.log(e) - z * z - target) * (math.sqrt(math.pi) * e / 2)
        result[tiny] = z
    return result


def _gamma_scalar(x):
    if math.isnan(x) or x == -math.inf or (x < 0 and x == math.floor(x)):
        return math.nan
    if x == 0 or x == math.inf:
        return math.copysign(math.inf, x)
    try:
        return math.gamma(x)
    except OverflowError:  # x > 171.6, or 1 / x overflowing for a tiny x
        return math.copysign(math.inf, x) if abs(x) < 1 else math.inf


def tgamma(x):
    return elementwise(_gamma_scalar, x)


def _with_limit(name, at_infinity, odd=False):
    """torch's i0 / i1 with libdevice's value at +-inf (torch's is NaN)."""

    def fn(x):
        r = torch_special(name)(x)
        r = np.where(np.isinf(x), np.copysign(at_infinity, x) if odd else at_infinity, r)
        return np.where(x == 0, x, r) if odd else r  # an odd function keeps the zero's sign

    return fn


cyl_bessel_i0 = _with_limit("i0", np.inf)
cyl_bessel_i1 = _with_limit("i1", np.inf, odd=True)
