"""The Triton kernel `devbridge check` runs (imported only when Triton is)."""

import triton
import triton.language as tl


@triton.jit
def add_one_kernel(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + 1.0, mask=mask)
