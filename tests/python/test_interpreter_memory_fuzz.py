"""Fuzz of the interpreter Triton target's memory operations on simdev
(devbridge/triton/interpreter/memory.py and address_space.py): kernels shaped
like Inductor's and hand-written ones (masked loads and stores with masked-out
lanes far out of range, indices loaded under a mask and then used for loads,
stores and atomics, 2-D masks, one-element values and masks broadcast, other=
values, int32 and int64 offsets, several dtypes), over seeded random sizes,
masks, indices, grids and block sizes. Every result is compared with torch on
the CPU computing what a GPU computes. A masked-out lane may hold any address
(huge, negative, near 2**63) and must never be dereferenced; an active lane at
a wild address must fail the launch with a Python error naming the kernel, as
a GPU faults, and leave the process and the stream working.

Sizes: DEVBRIDGE_FUZZ_ITERATIONS=<n> runs n iterations per test instead of
CI's few (a longer, CI-independent fuzz); the seed is fixed either way
(DEVBRIDGE_FUZZ_SEED to change it).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys

import numpy as np
import pytest
import torch

triton = pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")
import triton.language as tl  # noqa: E402

import devbridge  # noqa: E402
import devbridge.triton  # noqa: E402
from devbridge.triton.interpreter import address_space  # noqa: E402

from launch_support import skip_without_simdev  # noqa: E402

pytestmark = skip_without_simdev

LINUX = sys.platform.startswith("linux")
ITERATIONS = int(os.environ.get("DEVBRIDGE_FUZZ_ITERATIONS", "0") or 0)
SEED = int(os.environ.get("DEVBRIDGE_FUZZ_SEED", "20240607"))

# Indices of masked-out lanes: far outside any tensor, both signs, near the ends of int64 and int32.
WILD64 = [2**62, -(2**62), 2**63 - 1, -(2**63), 2**63 - 8, 2**40, -(2**40), 2**31 + 17, -(2**31) - 3]
WILD32 = [2**31 - 1, -(2**31), 2**30, -(2**30), 123_456_789, -987_654_321]


@pytest.fixture(autouse=True)
def devbridge_driver():
    with devbridge.triton.activate():
        yield


def iterations(ci: int) -> int:
    return ITERATIONS or ci


def rng(name: str) -> np.random.Generator:
    return np.random.default_rng([SEED, sum(map(ord, name))])


def simdev(t: torch.Tensor) -> torch.Tensor:
    return t.to("simdev")


def small_values(gen, n, dtype) -> torch.Tensor:
    """Small integers in `dtype`: sums and maxima exact in any order, as a GPU's atomics give them."""
    return torch.from_numpy(gen.integers(-20, 21, size=n)).to(dtype)


# ---------------------------------------------------------------- kernels


@triton.jit(do_not_specialize=["n", "n_out", "wild", "other"])
def _masked_copy(src, dst, n, n_out, wild, other, BLOCK: tl.constexpr):
    # Inductor's tail mask, with the masked-out lanes' offsets moved far away
    # (a GPU never dereferences them) and other= filling [n, n_out).
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offsets = tl.where(lanes < n_out, lanes, wild + lanes)
    x = tl.load(src + offsets, lanes < n, other=other)
    tl.store(dst + offsets, x, lanes < n_out)


@triton.jit(do_not_specialize=["rows", "cols", "wild"])
def _masked_2d(src, dst, sums, counts, hits, rows, cols, wild, BR: tl.constexpr, BC: tl.constexpr):
    # A 2-D tile: row and column masks broadcast to the tile, row sums added
    # through (BR, 1) pointers and masks, and a one-element value and mask
    # broadcast by atomic_add to (1, BC) pointers (zero-stride numpy views in
    # Triton's interpreter).
    pid_r = tl.program_id(0)
    r = pid_r * BR + tl.arange(0, BR)[:, None]
    c = tl.program_id(1) * BC + tl.arange(0, BC)[None, :]
    row_ok = r < rows
    mask = row_ok & (c < cols)
    x = tl.load(src + tl.where(mask, r * cols + c, wild), mask, other=0)
    tl.store(dst + tl.where(mask, r * cols + c, wild - c), x * 2 + 1, mask)
    tl.atomic_add(sums + tl.where(row_ok, r, wild), tl.sum(x, axis=1, keep_dims=True), row_ok)
    live = tl.full((1, 1), 1, tl.int1) & (pid_r * BR < rows)  # one element
    tl.atomic_add(counts + tl.where(live, c % cols, wild), tl.full((1, 1), 1, tl.int32), live)
    # a (BR, 1) mask broadcast over the tile's pointers
    tl.atomic_add(hits + tl.where(row_ok, c % cols, wild), 1, row_ok)


@triton.jit(do_not_specialize=["n"])
def _indirect(idx, valid, src, dst, out, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    # Inductor's scatter / index_put and gather shapes: the index loaded under
    # the tail mask, the access masked by a second, data-dependent mask; lanes
    # it turns off hold wild indices.
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = lanes < n
    live = m & (tl.load(valid + lanes, m, other=0) != 0)
    off = tl.load(idx + lanes, m)
    v = tl.load(src + lanes, m)
    if OP == "gather":
        tl.store(dst + lanes, tl.load(out + off, live, other=-5), m)
    elif OP == "store":
        tl.store(out + off, v, live)
    elif OP == "add":
        tl.atomic_add(out + off, v, live)
    elif OP == "max":
        tl.atomic_max(out + off, v, live)
    elif OP == "xchg":
        tl.store(dst + lanes, tl.atomic_xchg(out + off, v, live), live)
    elif OP == "count":
        tl.atomic_add(out + off, 1, live)  # a scalar value, splat
    elif OP == "add_one":
        # a one-element block value, broadcast to the block (a zero-stride view in Triton's interpreter)
        tl.atomic_add(out + off, tl.broadcast_to(tl.load(src + tl.zeros((1,), tl.int32)), [BLOCK]), live)


@triton.jit(do_not_specialize=["n"])
def _indirect_cas(idx, cmp, val, out, old, n, BLOCK: tl.constexpr):
    # atomic_cas has no mask: the tail lanes all target out[0] with a cmp
    # (other=-3) no element ever holds, so they never write.
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = lanes < n
    off = tl.load(idx + lanes, m, other=0)
    previous = tl.atomic_cas(out + off, tl.load(cmp + lanes, m, other=-3), tl.load(val + lanes, m, other=-4))
    tl.store(old + lanes, previous, m)


# ---------------------------------------------------------------- references and drivers


def indices(gen, n, size, live, dtype, unique):
    """n indices into `size` elements (distinct where `unique`) for the live lanes, wild ones for the others."""
    if unique:
        chosen = gen.permutation(size)[:n]
    else:
        chosen = gen.integers(0, size, size=n)
    wild = WILD64 if dtype == torch.int64 else WILD32
    chosen = np.where(live, chosen, gen.choice(np.array(wild, dtype=np.int64), size=n))
    return torch.from_numpy(chosen).to(dtype)


def run_indirect(gen, op, dtype, index_dtype, block):
    n = int(gen.integers(1, 4 * block))
    programs = -(-n // block) + int(gen.integers(0, 3))  # extra programs: every lane masked out
    unique = op in ("store", "xchg")
    size = int(gen.integers(n if unique else 1, 2 * n + 8))
    live = gen.random(n) < gen.choice([0.0, 0.3, 0.8, 1.0])
    live_t = torch.from_numpy(live)
    idx = indices(gen, n, size, live, index_dtype, unique)
    src = small_values(gen, n, dtype)
    if op == "count":
        dtype = torch.int32
    out = small_values(gen, size, dtype) if op != "count" else torch.zeros(size, dtype=dtype)
    dst = torch.full((n,), 7, dtype=src.dtype if op != "count" else dtype)

    expected_out, expected_dst = out.clone(), dst.clone()
    hit = idx[live_t].long()
    if op == "gather":
        expected_dst = torch.where(live_t, out[torch.where(live_t, idx.long(), 0)], torch.tensor(-5, dtype=dtype))
    elif op == "store":
        expected_out[hit] = src[live_t]
    elif op == "add":
        expected_out.index_add_(0, hit, src[live_t])
    elif op == "max":
        expected_out.scatter_reduce_(0, hit, src[live_t], "amax", include_self=True)
    elif op == "xchg":
        expected_dst[live_t] = out[hit]
        expected_out[hit] = src[live_t]
    elif op == "count":
        expected_out.index_add_(0, hit, torch.ones(len(hit), dtype=dtype))
    elif op == "add_one":
        expected_out.index_add_(0, hit, src[:1].expand(len(hit)))

    d_out, d_dst = simdev(out), simdev(dst)
    _indirect[(programs,)](simdev(idx), simdev(live_t.to(torch.int8)), simdev(src), d_dst, d_out, n, OP=op,
                           BLOCK=block)
    what = f"{op} {dtype} indices {index_dtype} n={n} size={size} BLOCK={block} grid={programs}"
    assert torch.equal(d_out.cpu(), expected_out), what
    assert torch.equal(d_dst.cpu(), expected_dst), what


# ---------------------------------------------------------------- fuzz: every lane as a GPU computes it


COPY_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.int32, torch.int64]


def test_masked_loads_and_stores_with_wild_masked_lanes():
    gen = rng("copy")
    for _ in range(iterations(len(COPY_DTYPES) * 3)):
        dtype = COPY_DTYPES[int(gen.integers(len(COPY_DTYPES)))]
        n = int(gen.integers(0, 200))
        n_out = n + int(gen.integers(0, 40))
        block = 64
        programs = max(1, -(-n_out // block)) + int(gen.integers(0, 3))
        wild = int(gen.choice(WILD64[:-2]))  # wild + lane must stay an int64
        other = int(gen.integers(-9, 10)) * 2 + 3  # never 1 (a constant the JIT would specialize)
        src = small_values(gen, n, dtype)
        dst = torch.full((n_out + 5,), 11, dtype=dtype)
        expected = dst.clone()
        expected[:n] = src
        expected[n:n_out] = other
        d_dst = simdev(dst)
        _masked_copy[(programs,)](simdev(src), d_dst, n, n_out, wild, other, BLOCK=block)
        assert torch.equal(d_dst.cpu(), expected), f"{dtype} n={n} n_out={n_out} wild={wild} grid={programs}"


def test_2d_masks_row_reductions_and_one_element_broadcasts():
    gen = rng("2d")
    for _ in range(iterations(10)):
        rows, cols = int(gen.integers(1, 40)), int(gen.integers(1, 40))
        br, bc = 8, 16
        grid = (-(-rows // br) + int(gen.integers(0, 2)), -(-cols // bc) + int(gen.integers(0, 2)))
        wild = int(gen.choice(WILD64[:-2]))
        src = small_values(gen, rows * cols, torch.float32)
        dst, sums = torch.zeros(rows * cols), torch.zeros(rows)
        d_dst, d_sums = simdev(dst), simdev(sums)
        d_counts, d_hits = simdev(torch.zeros(cols, dtype=torch.int32)), simdev(torch.zeros(cols, dtype=torch.int32))
        _masked_2d[grid](simdev(src), d_dst, d_sums, d_counts, d_hits, rows, cols, wild, BR=br, BC=bc)
        # counts: every live row-program adds one per column lane, folded onto the columns by c % cols;
        # hits: every row in range does
        per_column = np.bincount(np.arange(grid[1] * bc) % cols, minlength=cols)
        what = f"rows={rows} cols={cols} grid={grid} wild={wild}"
        assert torch.equal(d_dst.cpu(), src * 2 + 1), what
        assert torch.equal(d_sums.cpu(), src.view(rows, cols).sum(1)), what
        assert d_counts.cpu().tolist() == (per_column * -(-rows // br)).tolist(), what
        assert d_hits.cpu().tolist() == (per_column * rows).tolist(), what


INDIRECT = {
    "gather": [torch.float32, torch.float16, torch.bfloat16, torch.int8],
    "store": [torch.float32, torch.int16],
    "add": [torch.float32, torch.int32, torch.float16],
    "max": [torch.int32, torch.float32, torch.int64],
    # Triton's interpreter (3.6-3.8) swaps integers only: float atomic_xchg raises "Unsupported data type"
    # (triton-lang/triton PR #11904 adds float and double).
    "xchg": [torch.int32, torch.int64],
    "count": [torch.int32],
    "add_one": [torch.float32, torch.int32],
}


@pytest.mark.parametrize("op", sorted(INDIRECT))
def test_indices_loaded_under_a_mask_then_used(op):
    gen = rng(op)
    dtypes = INDIRECT[op]
    for _ in range(iterations(8)):
        dtype = dtypes[int(gen.integers(len(dtypes)))]
        index_dtype = [torch.int32, torch.int64][int(gen.integers(2))]
        run_indirect(gen, op, dtype, index_dtype, block=32)


def test_atomic_cas_through_loaded_indices():
    gen = rng("cas")
    for _ in range(iterations(8)):
        dtype = [torch.int32, torch.int64, torch.float32][int(gen.integers(3))]
        n = int(gen.integers(1, 80))
        block = 32
        programs = -(-n // block) + int(gen.integers(0, 2))
        size = n + int(gen.integers(0, 10))
        idx = torch.from_numpy(gen.permutation(size)[:n]).to([torch.int32, torch.int64][int(gen.integers(2))])
        out = torch.from_numpy(gen.integers(0, 4, size=size)).to(dtype)
        cmp = torch.from_numpy(gen.integers(0, 4, size=n)).to(dtype)
        val = torch.from_numpy(gen.integers(10, 20, size=n)).to(dtype)
        expected_old = out[idx.long()]
        expected_out = out.clone()
        swap = expected_old == cmp
        expected_out[idx.long()[swap]] = val[swap]
        d_out, d_old = simdev(out), simdev(torch.zeros(n, dtype=dtype))
        _indirect_cas[(programs,)](simdev(idx), simdev(cmp), simdev(val), d_out, d_old, n, BLOCK=block)
        assert torch.equal(d_old.cpu(), expected_old) and torch.equal(d_out.cpu(), expected_out), f"{dtype} n={n}"


def test_the_scatter_shape_that_crashed():
    # Inductor's index_put: 64 lanes, 4 live, the rest masked with whatever
    # their masked index load left (the process used to die in atomic_rmw).
    idx = torch.tensor([3, 0, 3, 1], dtype=torch.int64)
    src = torch.tensor([1.0, 2.0, 4.0, 8.0])
    out = torch.zeros(4)
    d_out = simdev(out)
    _indirect[(1,)](simdev(idx), simdev(torch.ones(4, dtype=torch.int8)), simdev(src), simdev(torch.zeros(4)), d_out,
                    4, OP="add", BLOCK=64)
    assert d_out.cpu().tolist() == [2.0, 8.0, 0.0, 5.0]


# ---------------------------------------------------------------- an active lane at a wild address


class _Pages:
    """Anonymous pages of our own (mmap(2) through libc), unmapped at the end."""

    PROT_NONE, PROT_READ, PROT_WRITE = 0, mmap.PROT_READ, mmap.PROT_WRITE

    def __init__(self):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.mmap.restype = ctypes.c_void_p
        self.libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                   ctypes.c_long]
        self.libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self.mapped = []

    def map(self, *prots: int, fill: bytes = b"") -> int:
        """One page per protection, adjacent; `fill` written at the start. Returns the first page's address."""
        size = mmap.PAGESIZE * len(prots)
        address = self.libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                                 -1, 0)
        assert address not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
        self.mapped.append((address, size))
        ctypes.memmove(address, fill, len(fill))
        for i, prot in enumerate(prots):
            assert self.libc.mprotect(address + i * mmap.PAGESIZE, mmap.PAGESIZE, prot) == 0
        return address

    def close(self):
        for address, size in self.mapped:
            self.libc.munmap(address, size)
        # memory unmapped behind the table's back: read it again (address_space.refresh's purpose)
        address_space.refresh()


@pytest.fixture
def pages():
    if not LINUX:
        pytest.skip("the address check reads Linux's /proc/self/maps; other systems have no check")
    owned = _Pages()
    yield owned
    owned.close()


def element_index(address: int, base: torch.Tensor) -> int:
    delta = address - base.data_ptr()
    assert delta % base.element_size() == 0
    return delta // base.element_size()


def expect_illegal_access(capfd, launch, kernel, operation, detail):
    """`launch` fails at the next synchronize with the address check's error, naming the kernel, and
    the stream runs the next kernel right. The Python cause is in the exception's message or, where
    simdev's target only prints it, on stderr: both are read."""
    capfd.readouterr()
    launch()
    with pytest.raises(RuntimeError) as failure:
        torch.accelerator.synchronize()
    text = str(failure.value) + capfd.readouterr().err
    assert "devbridge_interpret" in str(failure.value) and "returned 1 at program (0, 0, 0)" in str(failure.value)
    for needle in (f" {kernel} program (0, 0, 0): ", "IllegalMemoryAccessError", f"illegal memory access: {operation} ",
                   "illegal memory access was encountered", detail):
        assert needle in text, f"{needle!r} not in: {text}"


def check_still_works():
    gen = rng("after")
    run_indirect(gen, "add", torch.float32, torch.int64, block=32)
    run_indirect(gen, "gather", torch.float32, torch.int32, block=32)


@pytest.mark.parametrize("op, operation, write", [("gather", "tl.load", False), ("store", "tl.store", True),
                                                  ("add", "tl.atomic_add", True), ("max", "tl.atomic_max", True),
                                                  ("xchg", "tl.atomic_xchg", True)])
@pytest.mark.parametrize("wild", [-(2**58), 2**58, "no-access page", "read-only page"])
def test_an_active_lane_at_a_wild_address_fails_the_launch(capfd, pages, op, operation, write, wild):
    if wild == "read-only page" and not write:
        wild = "no-access page"  # a load from read-only memory is legal
    dtype = torch.int32 if op in ("max", "xchg") else torch.float32
    out = simdev(torch.zeros(64, dtype=dtype))
    detail = "1 of its 4 active lanes"
    if wild == "read-only page":
        detail = "(read-only memory)"
    if isinstance(wild, str):
        page = pages.map(pages.PROT_READ if wild == "read-only page" else pages.PROT_NONE)
        wild = element_index(page + 8, out)
    # four active lanes, the third wild; the masked-out ones wild too
    idx = simdev(torch.tensor([1, 5, wild, 9] + WILD64[:4], dtype=torch.int64))
    valid = simdev(torch.tensor([1, 1, 1, 1, 0, 0, 0, 0], dtype=torch.int8))
    src, dst = simdev(torch.ones(8, dtype=dtype)), simdev(torch.zeros(8, dtype=dtype))
    expect_illegal_access(
        capfd, lambda: _indirect[(1,)](idx, valid, src, dst, out, 8, OP=op, BLOCK=8), "_indirect", operation, detail)
    check_still_works()


def test_atomic_cas_at_a_wild_address_fails_the_launch(capfd, pages):
    out = simdev(torch.zeros(16, dtype=torch.int32))
    idx = simdev(torch.tensor([0, 2**58, 3], dtype=torch.int64))
    three = simdev(torch.zeros(3, dtype=torch.int32))
    # atomic_cas has no mask: the tail lane (its index other=0) is active too, hence 4 active lanes
    expect_illegal_access(capfd, lambda: _indirect_cas[(1,)](idx, three, three, out, three, 3, BLOCK=4),
                          "_indirect_cas", "tl.atomic_cas", "1 of its 4 active lanes")
    check_still_works()


# ---------------------------------------------------------------- the address table itself


def test_memory_mapped_after_the_last_read_is_found(pages):
    out = simdev(torch.zeros(4))
    run_indirect(rng("warm"), "gather", torch.float32, torch.int64, block=32)  # the table is read by now
    page = pages.map(pages.PROT_READ, fill=np.array([42.0, 43.0], dtype=np.float32).tobytes())
    idx = simdev(torch.tensor([element_index(page, out), element_index(page + 4, out), 0], dtype=torch.int64))
    dst = simdev(torch.zeros(3))
    _indirect[(1,)](idx, simdev(torch.ones(3, dtype=torch.int8)), simdev(torch.zeros(3)), dst, out, 3, OP="gather",
                    BLOCK=4)
    assert dst.cpu().tolist() == [42.0, 43.0, 0.0]


@pytest.mark.skipif(not LINUX, reason="the address check reads Linux's /proc/self/maps")
def test_address_table_lanes_elements_and_permissions(pages):
    array = np.zeros(1024, dtype=np.float64)
    base = array.ctypes.data
    lanes = np.arange(1024, dtype=np.uint64) * np.uint64(8) + np.uint64(base)
    assert address_space.unmapped(lanes, None, 8, write=True) is None
    read_only = pages.map(pages.PROT_READ, pages.PROT_NONE)
    no_access = read_only + mmap.PAGESIZE
    address_space.refresh()
    # lanes spread over two mappings (the slow path), each inside one
    mixed = np.array([base, read_only, base + 8], dtype=np.uint64)
    assert address_space.unmapped(mixed, None, 8, write=False) is None
    assert address_space.unmapped(mixed, None, 8, write=True) == (1, read_only, True)
    # an element straddling the end of readable memory is caught by its last bytes
    last = np.array([no_access - 8, no_access - 4], dtype=np.uint64)
    assert address_space.unmapped(last, None, 8, write=False) == (1, no_access - 4, False)
    assert address_space.unmapped(np.array([no_access, 0, 2**64 - 4], dtype=np.uint64), None, 8, False)[0] == 3
    # masked-out lanes are not looked at
    active = np.array([True, False, False])
    assert address_space.unmapped(np.array([base, 0, no_access], dtype=np.uint64), active, 8, write=True) is None
    assert address_space.unmapped(np.array([0, 0], dtype=np.uint64), np.array([False, False]), 8, False) is None
