"""Real Triton kernels compiled ahead of time (no GPU needed) for the launcher
tests: tests/python/test_launch_triton_metadata.py checks the launchers built
from them against their PTX, tests/fuzz/fuzz_launcher.py fuzzes those
launchers. Needs Triton."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

SM90 = GPUTarget("cuda", 90, 32)
SM80 = GPUTarget("cuda", 80, 32)  # no TMA: host tensor descriptors are decomposed


@triton.jit
def add_kernel(x, y, out, n, alpha, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    value = tl.load(x + offsets, mask=mask) * alpha + tl.load(y + offsets, mask=mask)
    tl.store(out + offsets, value, mask=mask)


@triton.jit
def every_scalar_kernel(out, a_i1, a_i8, a_i16, a_i32, a_i64, a_u1, a_u8, a_u16, a_u32, a_u64,
                        KIND: tl.constexpr, a_fp16, a_bf16, a_fp32, a_fp64):
    # Every scalar is stored, so none is optimized out of the parameter list.
    tl.store(out + 0, a_i1.to(tl.float64))
    tl.store(out + 1, a_i8.to(tl.float64))
    tl.store(out + 2, a_i16.to(tl.float64))
    tl.store(out + 3, a_i32.to(tl.float64))
    tl.store(out + 4, a_i64.to(tl.float64))
    tl.store(out + 5, a_u1.to(tl.float64))
    tl.store(out + 6, a_u8.to(tl.float64))
    tl.store(out + 7, a_u16.to(tl.float64))
    tl.store(out + 8, a_u32.to(tl.float64))
    tl.store(out + 9, a_u64.to(tl.float64))
    tl.store(out + 10, a_fp16.to(tl.float64) + KIND)
    tl.store(out + 11, a_bf16.to(tl.float64))
    tl.store(out + 12, a_fp32.to(tl.float64))
    tl.store(out + 13, a_fp64)


@triton.jit
def tuple_kernel(out, t, k):
    ptr = t[0]
    n = t[1]
    scale = t[2][0]
    C: tl.constexpr = t[2][1]
    offsets = tl.arange(0, 16)
    tl.store(out + offsets, tl.load(ptr + offsets, mask=offsets < n) * scale + k + C, mask=offsets < n)


@triton.jit
def host_descriptor_kernel(desc, out, BM: tl.constexpr):
    block = desc.load([0, 0])
    tl.store(out + tl.arange(0, BM)[:, None] * BM + tl.arange(0, BM)[None, :], block)


SCALAR_TYPES = ["i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16", "u32", "u64",
                "fp16", "bf16", "fp32", "fp64"]
SCALAR_NAMES = ["a_" + t for t in SCALAR_TYPES]
KIND = 0  # the constexpr in the middle of every_scalar_kernel

ADD_SIGNATURE = {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32", "alpha": "fp32",
                 "BLOCK": "constexpr"}
SCALAR_SIGNATURE = {"out": "*fp64", **dict(zip(SCALAR_NAMES[:10], SCALAR_TYPES[:10])), "KIND": "constexpr",
                    **dict(zip(SCALAR_NAMES[10:], SCALAR_TYPES[10:]))}
TUPLE_SIGNATURE = {"out": "*fp32", "t": ("*fp32", "i32", ("fp32", "constexpr")), "k": "i64"}
TUPLE_CONSTANTS = {(1, 2, 1): 3}
HOST_DESC_SIGNATURE = {"desc": "tensordesc<fp32[16, 16]>", "out": "*fp32", "BM": "constexpr"}


def divisible(*positions):
    """The JIT's 16-byte divisibility attribute for these argument positions."""
    return {(p,): [["tt.divisibility", 16]] for p in positions}


def compile_kernel(fn, signature, constexprs=None, attrs=None, target=SM90, **options):
    return triton.compile(ASTSource(fn, signature=signature, constexprs=constexprs, attrs=attrs),
                          target=target, options={"num_warps": 4, **options})
