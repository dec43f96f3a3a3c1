"""Triton kernels shared by the simdev Triton tests and the reference they are
compared with: the same kernels run by Triton's interpreter on CPU tensors in
a fresh interpreter with TRITON_INTERPRET=1 (python triton_test_kernels.py
OUT.pt), which is what TRITON_INTERPRET=1 users get.

Each case builds its arguments from a fixed seed, so both sides start from the
same inputs: CASES[name]() -> (kernel, grid, args, kwargs, output positions).
"""

from __future__ import annotations

import sys

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


@triton.jit
def softmax_kernel(x, out, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    values = tl.load(x + row * stride + cols, mask=mask, other=-float("inf"))
    values = values - tl.max(values, axis=0)
    e = tl.exp(values)
    tl.store(out + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


@triton.jit
def matmul_kernel(a, b, c, M, N, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # K is a constexpr: Triton 3.6's own interpreter (the reference) cannot take range() bounds from a runtime int.
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])
@triton.jit
def tuned_scale_kernel(x, out, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) * scale, mask=mask)


@triton.jit
def histogram_kernel(values, counts, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.atomic_add(counts + tl.load(values + offs, mask=mask, other=0), 1, mask=mask)


@triton.jit
def masked_shift_kernel(x, out, n, shift, BLOCK: tl.constexpr):
    # out[i] = x[i - shift] where that exists, else -1: loads with masks and `other`
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    source = offs - shift
    tl.store(out + offs, tl.load(x + source, mask=(source >= 0) & (source < n), other=-1.0), mask=offs < n)


@triton.jit
def transpose_kernel(x, out, M, N, BM: tl.constexpr, BN: tl.constexpr):
    # A 2-D grid: program (i, j) moves one BM x BN tile.
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tile = tl.load(x + rm[:, None] * N + rn[None, :], mask=mask)
    tl.store(out + rn[None, :] * M + rm[:, None], tile, mask=mask)


@triton.jit
def _square(v):
    return v * v


@triton.jit
def helper_kernel(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, _square(tl.load(x + offs, mask=mask)), mask=mask)


@triton.jit
def copy_kernel(x, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)


@triton.jit
def asserting_kernel(x, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.device_assert(tl.load(x + offs, mask=offs < n) < 0, "devbridge test assertion")


def _generator(seed):
    return torch.Generator().manual_seed(seed)


def case_vector_add():
    n, g = 1000, _generator(1)
    return add_kernel, (triton.cdiv(n, 128),), [torch.randn(n, generator=g), torch.randn(n, generator=g),
                                                 torch.empty(n), n], {"BLOCK": 128}, [2]


def case_softmax():
    rows, cols = 16, 100
    return softmax_kernel, (rows,), [torch.randn(rows, cols, generator=_generator(2)), torch.empty(rows, cols),
                                     cols, cols], {"BLOCK": 128}, [1]


def case_matmul():
    g = _generator(3)
    return matmul_kernel, (2, 2), [torch.randn(32, 32, generator=g), torch.randn(32, 32, generator=g),
                                   torch.empty(32, 32), 32, 32, 32], {"BM": 16, "BN": 16, "BK": 16}, [2]


def case_autotuned():
    n = 500
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    return tuned_scale_kernel, grid, [torch.randn(n, generator=_generator(4)), torch.empty(n), n, 3.0], {}, [1]


def case_atomics():
    n = 2000
    return histogram_kernel, (triton.cdiv(n, 256),), [torch.randint(0, 16, (n,), dtype=torch.int32,
                                                                    generator=_generator(5)),
                                                      torch.zeros(16, dtype=torch.int32), n], {"BLOCK": 256}, [1]


def case_masked_loads():
    n = 300
    return masked_shift_kernel, (triton.cdiv(n, 128),), [torch.randn(n, generator=_generator(6)), torch.empty(n),
                                                         n, 7], {"BLOCK": 128}, [1]


def case_grid_2d():
    M, N = 40, 24
    return transpose_kernel, (triton.cdiv(M, 16), triton.cdiv(N, 16)), [
        torch.randn(M, N, generator=_generator(7)), torch.empty(N, M), M, N], {"BM": 16, "BN": 16}, [1]


def case_helper():
    n = 100
    return helper_kernel, (1,), [torch.randn(n, generator=_generator(8)), torch.empty(n), n], {"BLOCK": 128}, [1]


CASES = {
    "vector_add": case_vector_add,
    "softmax": case_softmax,
    "matmul": case_matmul,
    "autotuned": case_autotuned,
    "atomics": case_atomics,
    "masked_loads": case_masked_loads,
    "grid_2d": case_grid_2d,
    "helper": case_helper,
}


def run_case(name, device=None):
    """Runs case `name` with its tensors on `device` (None: CPU); returns the outputs on the CPU."""
    kernel, grid, args, kwargs, outputs = CASES[name]()
    if device is not None:
        args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]
    kernel[grid](*args, **kwargs)
    return [args[i].cpu() for i in outputs]


# TRITON_INTERPRET=1 cannot autotune without a GPU: the autotuner asks the
# active driver for its benchmarker, and a CPU machine has no driver.
NOT_INTERPRETABLE_ON_CPU = {"autotuned"}

if __name__ == "__main__":
    # The reference: TRITON_INTERPRET=1 must be set before this module was imported.
    assert triton.knobs.runtime.interpret, "run with TRITON_INTERPRET=1"
    torch.save({name: run_case(name) for name in CASES if name not in NOT_INTERPRETABLE_ON_CPU}, sys.argv[1])
