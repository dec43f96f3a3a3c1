"""Launchers built from REAL Triton compile results match the kernels' ABI.

Every kernel here is compiled by Triton 3.7.1 ahead of time, without a GPU
(`triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))`, Triton's
python/triton/compiler/compiler.py), and devbridge builds its launcher from the
compile result exactly as a Triton driver does: `Launcher(ck.src, ck.metadata)`.

Two independent witnesses check that launcher:

* the PTX Triton generated: the `.entry` parameter list of `ck.asm["ptx"]` is
  the kernel ABI (one parameter per non-constexpr argument, tuples flattened,
  host tensor descriptors decomposed, then the two scratch pointers). The
  launcher's `param_sizes` must equal the PTX sizes one for one, and its
  pointer positions must be the PTX `.ptr` parameters;
* simdev: the launcher packs real Python values through the real descriptor
  into simdev's `probe_args` host kernel (tests/python/kernels/
  simdev_launch_kernels.cc), which records the size and bytes of every
  parameter it received; the test computes the expected bytes on its own with
  `struct`. The add kernel's launcher also drives simdev's `add_f32` (the same
  parameter list) and the result is compared with torch.

The compile-only tests need Triton only; the simdev tests are skipped
(visibly) without the simdev plugin.
"""

from __future__ import annotations

import math
import re
import struct
from typing import Any, NamedTuple

import pytest
import torch

triton = pytest.importorskip(
    "triton", reason="Triton is not installed: pip install triton==3.7.1 (the version torch 2.13 pins)")
import triton.language as tl  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

import devbridge.triton  # noqa: E402
from devbridge import launch  # noqa: E402
from devbridge.triton._describe import tensordesc_flags  # noqa: E402

TENSORDESC_FLAGS = tensordesc_flags()

import launch_support  # noqa: E402
from triton_aot_kernels import (  # noqa: E402
    ADD_SIGNATURE, HOST_DESC_SIGNATURE, KIND, SCALAR_SIGNATURE, SCALAR_TYPES, SM80, SM90,
    TUPLE_CONSTANTS, TUPLE_SIGNATURE, add_kernel, compile_kernel, divisible, every_scalar_kernel,
    host_descriptor_kernel, tuple_kernel)
from launch_support import skip_without_simdev  # noqa: E402

DEVICE = "simdev:0"
U64 = (1 << 64) - 1


# ---------------------------------------------------------------- PTX .entry parameters


class PtxParam(NamedTuple):
    name: str
    type: str      # the PTX type of one element: "u64", "u32", "f32", "b8", ...
    count: int     # array elements (1 for a scalar; `.b8 p[2]` -> 2)
    size: int      # bytes: element size x count
    pointer: bool  # declared `.ptr`


_PTX_ELEMENT_BYTES = {
    **{f"{k}8": 1 for k in "usb"},
    **{f"{k}16": 2 for k in "usbf"},
    **{f"{k}32": 4 for k in "usbf"},
    **{f"{k}64": 8 for k in "usbf"},
}
_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(")
_PARAM_NAME = re.compile(r"^([A-Za-z_$%][\w$]*)(?:\[(\d+)\])?$")
_STATE_SPACES = {".global", ".const", ".shared", ".local"}


def ptx_entry_params(ptx: str, kernel_name: str | None = None) -> list[PtxParam]:
    """The parameters of the `.entry` (the one named `kernel_name`, else the
    only one) of a PTX module, in order, with their sizes in bytes.

    Reads the lines between `.entry name(` and the closing `)`; each must be a
    `.param` declaration (`.param [.align N] .<type> [.ptr [.<space>] [.align N]]
    name[ [count] ]`). Anything else raises, so a PTX form this parser does
    not know fails loudly instead of being miscounted."""
    entries = [(m.group(1), m.end()) for m in _ENTRY.finditer(ptx)]
    if kernel_name is not None:
        entries = [e for e in entries if e[0] == kernel_name]
    if len(entries) != 1:
        raise ValueError(f"expected exactly one .entry{' ' + kernel_name if kernel_name else ''} in the PTX, "
                         f"found {[name for name, _ in entries]}")
    params: list[PtxParam] = []
    closed = False
    for raw in ptx[entries[0][1]:].splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if line.startswith(")"):
            closed = True
            break
        tokens = line.rstrip(",").split()
        if tokens[0] != ".param" or len(tokens) < 3:
            raise ValueError(f"not a .param declaration in the .entry parameter list: {raw!r}")
        match = _PARAM_NAME.match(tokens[-1])
        if match is None:
            raise ValueError(f"bad parameter name in {raw!r}")
        types, pointer, i = [], False, 1
        while i < len(tokens) - 1:
            token = tokens[i]
            if token == ".align":
                int(tokens[i + 1])  # the alignment; a non-number raises
                i += 2
                continue
            if token == ".ptr":
                pointer = True
            elif token in _STATE_SPACES:
                pass
            elif token.startswith(".") and token[1:] in _PTX_ELEMENT_BYTES:
                types.append(token[1:])
            else:
                raise ValueError(f"unknown token {token!r} in {raw!r}")
            i += 1
        if len(types) != 1:
            raise ValueError(f"expected one PTX type in {raw!r}, found {types}")
        count = int(match.group(2)) if match.group(2) else 1
        size = _PTX_ELEMENT_BYTES[types[0]] * count
        params.append(PtxParam(match.group(1), types[0], count, size, pointer))
    if not closed:
        raise ValueError("the .entry parameter list is not closed by ')'")
    return params


def test_ptx_parser_reads_every_parameter_form():
    """The PTX helper itself: pointers, scalars of every width, `.b8` arrays
    (fp16/bf16 scalars, 128-byte TMA descriptors), comments and blank lines."""
    ptx = """
    .version 8.4
    .func helper(.param .u32 unrelated)
    .visible .entry k(
    \t.param .u64 .ptr .global .align 1 k_param_0,
    \t.param .u8 k_param_1,   // i1
    \t.param .u16 k_param_2,

    \t.param .u32 k_param_3,
    \t.param .f32 k_param_4,
    \t.param .f64 k_param_5,
    \t.param .b64 k_param_6,
    \t.param .align 2 .b8 k_param_7[2],
    \t.param .align 64 .b8 k_param_8[128],
    \t.param .u64 .ptr .global .align 1 k_param_9
    )
    .reqntid 128
    { ret; }
    """
    params = ptx_entry_params(ptx)
    assert [(p.type, p.count, p.size, p.pointer) for p in params] == [
        ("u64", 1, 8, True), ("u8", 1, 1, False), ("u16", 1, 2, False), ("u32", 1, 4, False),
        ("f32", 1, 4, False), ("f64", 1, 8, False), ("b64", 1, 8, False), ("b8", 2, 2, False),
        ("b8", 128, 128, False), ("u64", 1, 8, True)]
    assert params[-1].name == "k_param_9"
    assert ptx_entry_params(ptx, "k") == params


def test_ptx_parser_fails_loudly_on_unknown_forms():
    """A declaration the helper does not understand is an error, never a
    silently wrong count (the size comparisons below rely on that)."""
    with pytest.raises(ValueError, match="unknown token"):
        ptx_entry_params(".entry k(\n.param .u64 .weird k_param_0\n)\n")
    with pytest.raises(ValueError, match="not a .param"):
        ptx_entry_params(".entry k(\n.reg .u32 r\n)\n")
    with pytest.raises(ValueError, match="exactly one"):
        ptx_entry_params(".func f(\n)\n")
    with pytest.raises(ValueError, match="not closed"):
        ptx_entry_params(".entry k(\n.param .u32 k_param_0,\n")


# ---------------------------------------------------------------- the kernels


@triton.jit
def matmul_kernel(a, b, c, M, N, K, stride_am, stride_bk, stride_cm,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * stride_am + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * stride_bk + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * stride_cm + rn[None, :], acc.to(tl.float16))


@triton.jit
def device_descriptor_kernel(x, out, M, N, BM: tl.constexpr, BN: tl.constexpr):
    # Device-side descriptors: on sm90 they are built in global scratch.
    src = tl.make_tensor_descriptor(x, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(out, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst.store([0, 0], src.load([0, 0]))


@triton.jit
def constexpr_kernel(out, maybe, one, n, x, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK) * one
    value = tl.full((BLOCK,), 0.0, tl.float32) + x
    if maybe is not None:
        value += tl.load(maybe + offsets)
    tl.store(out + offsets, value, mask=offsets < n)


class Compiled(NamedTuple):
    ck: Any        # triton.compiler.CompiledKernel
    launcher: Any  # devbridge.triton.Launcher(ck.src, ck.metadata)
    ptx: list      # [PtxParam]


def _build(ck) -> Compiled:
    launcher = devbridge.triton.Launcher(ck.src, ck.metadata)
    return Compiled(ck, launcher, ptx_entry_params(ck.asm["ptx"], ck.metadata.name))




@pytest.fixture(scope="module")
def add():
    return _build(compile_kernel(add_kernel, ADD_SIGNATURE, {"BLOCK": 128}, divisible(0, 1, 2)))


@pytest.fixture(scope="module")
def every_scalar():
    return _build(compile_kernel(every_scalar_kernel, SCALAR_SIGNATURE, {"KIND": KIND}, divisible(0),
                                 num_warps=1))


@pytest.fixture(scope="module")
def dot():
    signature = {"a": "*fp16", "b": "*fp16", "c": "*fp16", "M": "i32", "N": "i32", "K": "i32",
                 "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32",
                 "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    return _build(compile_kernel(matmul_kernel, signature, {"BM": 128, "BN": 128, "BK": 64},
                                 divisible(0, 1, 2, 6, 7, 8), num_stages=3))


@pytest.fixture(scope="module")
def device_descriptor():
    signature = {"x": "*fp32", "out": "*fp32", "M": "i32", "N": "i32", "BM": "constexpr", "BN": "constexpr"}
    return _build(compile_kernel(device_descriptor_kernel, signature, {"BM": 16, "BN": 16},
                                 divisible(0, 1, 3)))


@pytest.fixture(scope="module")
def constexpr_none():
    # What the JIT binder produces for kernel(out, None, 1, n, x, BLOCK=64):
    # None and an int equal to 1 are typed "constexpr", like tl.constexpr.
    signature = {"out": "*fp32", "maybe": "constexpr", "one": "constexpr", "n": "i32", "x": "fp32",
                 "BLOCK": "constexpr"}
    return _build(compile_kernel(constexpr_kernel, signature, {"maybe": None, "one": 1, "BLOCK": 64},
                                 divisible(0), num_warps=1))


@pytest.fixture(scope="module")
def tuple_arg():
    return _build(compile_kernel(tuple_kernel, TUPLE_SIGNATURE, TUPLE_CONSTANTS, divisible(0), num_warps=1))




@pytest.fixture(scope="module")
def host_descriptor_sm80():
    return _build(compile_kernel(host_descriptor_kernel, HOST_DESC_SIGNATURE, {"BM": 16}, target=SM80))


CASES = ["add", "every_scalar", "dot", "device_descriptor", "constexpr_none", "tuple_arg",
         "host_descriptor_sm80"]


# ---------------------------------------------------------------- descriptors vs PTX


@pytest.mark.parametrize("case", CASES)
def test_param_sizes_and_pointers_match_ptx(case, request):
    """The launcher's parameter layout is the PTX `.entry` list Triton emitted:
    the same count, the same size at every position (the two trailing 8-byte
    scratch pointers included), and pointers exactly where PTX has `.ptr`."""
    c = request.getfixturevalue(case)
    assert list(c.launcher.param_sizes) == [p.size for p in c.ptx]
    assert [t == "*" for t in c.launcher.signature] + [True, True] == [p.pointer for p in c.ptx]
    assert len(c.launcher.signature) == len(c.ptx) - 2


# The PTX parameter each launcher type becomes (as in the PTX Triton 3.6 and 3.7.1 generate).
_PTX_OF_TYPE = {"*": ("u64", 1), "i1": ("u8", 1), "u1": ("u8", 1), "i8": ("u8", 1), "u8": ("u8", 1),
                "i16": ("u16", 1), "u16": ("u16", 1), "i32": ("u32", 1), "u32": ("u32", 1),
                "i64": ("u64", 1), "u64": ("u64", 1), "fp16": ("b8", 2), "bf16": ("b8", 2),
                "fp32": ("f32", 1), "fp64": ("f64", 1)}


@pytest.mark.parametrize("case", CASES)
def test_param_types_match_ptx(case, request):
    """Beyond sizes: each flattened launcher type is declared as the PTX type
    Triton lowers it to (i1 is `.u8`, fp16/bf16 are `.b8[2]`, ...)."""
    c = request.getfixturevalue(case)
    assert [_PTX_OF_TYPE[t] for t in c.launcher.signature] == [(p.type, p.count) for p in c.ptx[:-2]]


_LAUNCH_FIELDS = ("num_warps", "num_ctas", "shared", "global_scratch_size", "global_scratch_align",
                  "profile_scratch_size", "profile_scratch_align", "launch_cooperative_grid", "launch_pdl")


@pytest.mark.parametrize("case", CASES)
def test_launch_metadata_copied_from_the_compile(case, request):
    """Every launch-relevant field of the real metadata namedtuple reaches the
    launcher unchanged, and the kernel name is the compiled `.entry` name."""
    c = request.getfixturevalue(case)
    expected = {f: getattr(c.ck.metadata, f) for f in _LAUNCH_FIELDS}
    assert {f: c.launcher.metadata[f] for f in _LAUNCH_FIELDS} == expected
    assert c.launcher.kernel_name == c.ck.metadata.name
    assert tuple(c.ck.packed_metadata) == (c.launcher.metadata["num_warps"], c.launcher.metadata["num_ctas"],
                                           c.launcher.metadata["shared"])


def test_every_scalar_type_has_its_ptx_size(every_scalar):
    """All 14 Triton scalar types, in signature order, with the constexpr in
    the middle dropped: i1/u1/i8/u8 take 1 byte, i16/u16/fp16/bf16 2,
    i32/u32/fp32 4, i64/u64/fp64 8."""
    L = every_scalar.launcher
    assert L.signature == ("*", *SCALAR_TYPES)
    assert list(L.param_sizes) == [8, 1, 1, 2, 4, 8, 1, 1, 2, 4, 8, 2, 2, 4, 8, 8, 8]
    assert len(every_scalar.ptx) == 1 + 14 + 2


def test_dot_kernel_needs_more_than_48k_shared(dot):
    """A pipelined 128x128x64 fp16 tl.dot kernel asks for more than the 48 KB
    default of dynamic shared memory; the launcher carries that amount."""
    assert dot.launcher.metadata["shared"] == dot.ck.metadata.shared > 49152
    assert dot.ck.packed_metadata[2] == dot.ck.metadata.shared


def test_device_descriptors_need_global_scratch(device_descriptor):
    """tl.make_tensor_descriptor on sm90 builds the descriptor in global
    scratch: the compile asks for it, and the launcher keeps its size and
    alignment (the scratch pointer itself stays the second-to-last param)."""
    md = device_descriptor.ck.metadata
    assert md.global_scratch_size > 0
    assert device_descriptor.launcher.metadata["global_scratch_size"] == md.global_scratch_size
    assert device_descriptor.launcher.metadata["global_scratch_align"] == md.global_scratch_align
    assert device_descriptor.ptx[-2].pointer and device_descriptor.ptx[-1].pointer


def test_constexpr_none_and_one_are_dropped(constexpr_none):
    """A None argument, an int specialized to 1 and a tl.constexpr are all
    "constexpr" in the signature; the cubin has no parameter for them and
    neither has the launcher (out, n, x, then the scratch pair) — yet the
    launcher is still called with all six bound arguments."""
    L = constexpr_none.launcher
    assert len(constexpr_none.ptx) == 5
    assert L.signature == ("*", "i32", "fp32")
    assert list(L.param_sizes) == [8, 4, 4, 8, 8]


def test_tuple_is_flattened_in_order(tuple_arg):
    """A tuple argument ("*fp32", "i32", ("fp32", constexpr)) becomes its
    elements in order, the nested constexpr dropped, between its neighbours."""
    L = tuple_arg.launcher
    assert L.signature == ("*", "*", "i32", "fp32", "i64")
    assert [p.type for p in tuple_arg.ptx] == ["u64", "u64", "u32", "f32", "u64", "u64", "u64"]


def test_host_descriptor_without_tma_is_decomposed(host_descriptor_sm80):
    """On sm80 (no TMA) a host tensordesc<fp32[16, 16]> is passed as Triton
    3.7 decomposes it: base, 2*ndim i64 (shape, strides), two i1 (padding,
    round_f32_to_tf32), ndim i32 (shape), ndim i64 (strides)."""
    L = host_descriptor_sm80.launcher
    flags = TENSORDESC_FLAGS  # two from Triton 3.7, one (padding only) in 3.6
    assert host_descriptor_sm80.ck.metadata.tensordesc_meta in ([], None)
    assert L.signature == ("*", "i64", "i64", "i64", "i64", *["i1"] * flags, "i32", "i32", "i64", "i64", "*")
    assert [(p.type, p.size) for p in host_descriptor_sm80.ptx[:9 + flags]] == [
        ("u64", 8), ("u64", 8), ("u64", 8), ("u64", 8), ("u64", 8), *[("u8", 1)] * flags,
        ("u32", 4), ("u32", 4), ("u64", 8), ("u64", 8)]


def test_nvtmadesc_in_a_signature_is_refused():
    """A signature with an nvTmaDesc (a host-built CUtensorMap) is refused at
    construction, both through the Triton face and devbridge.launch, with an
    error naming the fix (pass a TensorDescriptor)."""
    src = ASTSource(host_descriptor_kernel, constexprs={"BM": 16},
                    signature={"desc": "nvTmaDesc", "out": "*fp32", "BM": "constexpr"})
    metadata = {"name": "host_descriptor_kernel", "num_warps": 4, "num_ctas": 1, "shared": 0,
                "tensordesc_meta": []}
    with pytest.raises(NotImplementedError, match=r"TensorDescriptor"):
        devbridge.triton.Launcher(src, metadata)
    with pytest.raises(NotImplementedError, match=r"nvTmaDesc.*TensorDescriptor"):
        launch.launcher({"desc": "nvTmaDesc"})


def test_a_gsan_instrumented_kernel_is_refused():
    """Triton 3.8's GSan instrumentation makes NVIDIA's launcher append a
    hidden global-state pointer (instrumentation_mode "gsan" in the
    metadata): devbridge's launcher would pass one argument too few, so it
    refuses, naming the fix; other modes change only the compile."""
    src = ASTSource(host_descriptor_kernel, constexprs={"BM": 16},
                    signature={"desc": "*fp32", "out": "*fp32", "BM": "constexpr"})
    metadata = {"name": "host_descriptor_kernel", "num_warps": 4, "num_ctas": 1, "shared": 0,
                "tensordesc_meta": [], "instrumentation_mode": "gsan"}
    with pytest.raises(NotImplementedError, match=r"GSan.*TRITON_INSTRUMENTATION_MODE"):
        devbridge.triton.Launcher(src, metadata)
    devbridge.triton.Launcher(src, dict(metadata, instrumentation_mode="fpsan"))


def test_tma_lowered_descriptor_is_refused():
    """The same host descriptor kernel compiled for sm90 is lowered to TMA: the
    real metadata has a non-None tensordesc_meta entry and PTX takes a
    128-byte CUtensorMap. The launcher refuses it, naming the fix."""
    ck = compile_kernel(host_descriptor_kernel, HOST_DESC_SIGNATURE, {"BM": 16}, target=SM90)
    assert any(meta is not None for meta in ck.metadata.tensordesc_meta)
    assert ptx_entry_params(ck.asm["ptx"])[0].size == 128
    with pytest.raises(NotImplementedError, match=r"without TMA"):
        devbridge.triton.Launcher(ck.src, ck.metadata)


# ---------------------------------------------------------------- packing on simdev, bit for bit

_STRUCT_FORMAT = {"i8": "<b", "i16": "<h", "i32": "<i", "i64": "<q", "u8": "<B", "u16": "<H", "u32": "<I",
                  "u64": "<Q", "fp16": "<e", "fp32": "<f", "fp64": "<d"}


def expected_bytes(ty: str, value) -> bytes:
    """The little-endian bytes a kernel parameter of Triton type `ty` must hold,
    computed here without devbridge: struct for ints and IEEE floats (fp16
    round to nearest), the upper half of the fp32 bits for bf16 (truncated, as
    Triton packs it), 0/1 in one byte for i1/u1, the device address for a
    pointer."""
    if ty == "*":
        return struct.pack("<Q", 0 if value is None else value.data_ptr())
    if ty in ("i1", "u1"):
        return struct.pack("<B", int(bool(value)))
    if ty == "bf16":
        return struct.pack("<f", value)[2:4]
    return struct.pack(_STRUCT_FORMAT[ty], value)


def probe(launcher, record, *args, grid=(1, 1, 1), packed=launch_support.PACKED):
    """Launch `launcher` with all bound arguments `args` on simdev's
    probe_args kernel, as Triton's CompiledKernel.run calls launchers, wait,
    and return the (size, value) pairs probe_args wrote into `record` (the
    tensor its first parameter points at), one per parameter it received."""
    kernel = launch_support.load("probe_args")
    launcher(*grid, launch_support.stream_of(DEVICE), kernel.function, packed, None, None, None, *args)
    launch_support.sync(DEVICE)
    words = [w & U64 for w in record.cpu().view(torch.int64).tolist()]
    return [(words[1 + 2 * i], words[2 + 2 * i]) for i in range(words[0])]


def records(types, values):
    """What probe() must report: (size, bytes zero-extended to 8) for each
    parameter, then the two NULL scratch pointers."""
    out = []
    for ty, value in zip(types, values):
        raw = expected_bytes(ty, value)
        out.append((len(raw), int.from_bytes(raw, "little")))
    return out + [(8, 0), (8, 0)]


def scalar_args(out, values):
    """All bound arguments of every_scalar_kernel, as Triton passes them: the
    output pointer, the 14 scalars, and the constexpr KIND in its place
    between u64 and fp16."""
    return [out, *values[:10], KIND, *values[10:]]


def probe_buffer(dtype=torch.int64, numel=64):
    return torch.zeros(numel, dtype=dtype, device=DEVICE)


SCALAR_VALUE_SETS = {
    "limits": [True, -128, -32768, -2**31, -2**63, True, 255, 65535, 2**32 - 1, 2**64 - 1,
               1 / 3, 1 / 3, 1 / 3, 1 / 3],
    "negative_and_mixed": [False, -5, -1234, -7, -(2**40) - 3, 0, 7, 4321, 2**31, 2**63 + 5,
                           -0.0, -2.5, -0.0, -1e300],
    "maxima": [1, 127, 32767, 2**31 - 1, 2**63 - 1, 1, 0, 0, 0, 0, 65504.0, 3.0e38, 3.4e38, 1.7e308],
}


@skip_without_simdev
@pytest.mark.parametrize("values", list(SCALAR_VALUE_SETS.values()), ids=list(SCALAR_VALUE_SETS))
def test_every_scalar_type_packs_bit_exact(every_scalar, values):
    """Through the real compile's descriptor, each of the 14 scalar types
    arrives in the kernel at its PTX size with exactly the bytes struct
    computes (negative ints two's complement, u64 2**64-1, booleans as one
    byte, fp16 rounded, bf16 truncated), the constexpr KIND passed
    positionally and dropped, the scratch pointers NULL."""
    out = probe_buffer()
    got = probe(every_scalar.launcher, out, *scalar_args(out, values), packed=every_scalar.ck.packed_metadata)
    assert got == records(["*"] + SCALAR_TYPES, [out] + values)
    assert [size for size, _ in got] == [p.size for p in every_scalar.ptx]


@skip_without_simdev
def test_known_bit_patterns(every_scalar):
    """Hard-coded bit patterns, so the struct model above is itself pinned:
    fp16(1/3) = 0x3555 (round to nearest), bf16(1/3) = 0x3eaa although
    round-to-nearest would give 0x3eab (fp32 1/3 = 0x3eaaaaab: truncated),
    fp32(1/3) = 0x3eaaaaab, fp64(1/3) = 0x3fd5555555555555, i8 -1 = 0xff."""
    out = probe_buffer()
    values = [True, -1, -1, -1, -1, True, 1, 1, 1, U64, 1 / 3, 1 / 3, 1 / 3, 1 / 3]
    got = probe(every_scalar.launcher, out, *scalar_args(out, values), packed=every_scalar.ck.packed_metadata)
    assert [value for _, value in got[1:]] == [
        1, 0xff, 0xffff, 0xffffffff, U64, 1, 1, 1, 1, U64,
        0x3555, 0x3eaa, 0x3eaaaaab, 0x3fd5555555555555, 0, 0]


FP16_SPECIALS = {
    "nan": (math.nan, None),
    "inf": (math.inf, 0x7c00),
    "-inf": (-math.inf, 0xfc00),
    "-0.0": (-0.0, 0x8000),
    "max": (65504.0, 0x7bff),
    "rounds_down_to_max": (65519.0, 0x7bff),
    "smallest_subnormal": (2.0**-24, 0x0001),
    "third": (1 / 3, 0x3555),
}


@skip_without_simdev
@pytest.mark.parametrize("value,bits", list(FP16_SPECIALS.values()), ids=list(FP16_SPECIALS))
def test_fp16_special_values_bit_exact(every_scalar, value, bits):
    """fp16 NaN and +-inf are fp16 values, not overflow: they pack as fp16
    NaN/inf; -0.0 keeps its sign; 65519 rounds to the largest finite 65504;
    the smallest subnormal survives. Checked against struct 'e' and against
    the hard-coded IEEE binary16 pattern."""
    out = probe_buffer()
    values = [False, 0, 0, 0, 0, False, 0, 0, 0, 0, value, 0.0, 0.0, 0.0]
    got = probe(every_scalar.launcher, out, *scalar_args(out, values), packed=every_scalar.ck.packed_metadata)
    size, half = got[11]
    assert (size, half) == (2, int.from_bytes(struct.pack("<e", value), "little"))
    if bits is None:  # NaN: exponent all ones, mantissa non-zero
        assert half & 0x7c00 == 0x7c00 and half & 0x03ff != 0
    else:
        assert half == bits


@skip_without_simdev
@pytest.mark.parametrize("value", [1e6, -1e6, 65520.0])
def test_fp16_overflow_is_a_value_error_naming_the_argument(every_scalar, value):
    """A finite value too large for fp16 (65520 already rounds to inf) raises
    ValueError naming the argument and its type, and nothing is launched: the
    probe buffer stays all zero."""
    out = probe_buffer()
    values = [False, 0, 0, 0, 0, False, 0, 0, 0, 0, value, 0.0, 0.0, 0.0]
    kernel = launch_support.load("probe_args")
    with pytest.raises(ValueError, match=r"'a_fp16'.*fp16"):
        every_scalar.launcher(1, 1, 1, launch_support.stream_of(DEVICE), kernel.function,
                              every_scalar.ck.packed_metadata, None, None, None, *scalar_args(out, values))
    launch_support.sync(DEVICE)
    assert not out.cpu().any()


@skip_without_simdev
def test_constexpr_none_and_one_end_to_end(constexpr_none):
    """kernel(out, None, 1, n, x, BLOCK) through the real descriptor: all six
    bound arguments are passed, and the kernel receives exactly out, n, x and
    the two scratch pointers."""
    out = probe_buffer()
    got = probe(constexpr_none.launcher, out, out, None, 1, -7, 0.5, 64,
                packed=constexpr_none.ck.packed_metadata)
    assert got == records(["*", "i32", "fp32"], [out, -7, 0.5])


@skip_without_simdev
def test_tuple_end_to_end(tuple_arg):
    """A tuple argument (ptr, n, (scale, C)) reaches the kernel as ptr, n,
    scale in order, the nested constexpr C dropped, then k."""
    out = probe_buffer()
    other = torch.zeros(16, dtype=torch.float32, device=DEVICE)
    got = probe(tuple_arg.launcher, out, out, (other, 5, (2.5, 3)), -9, packed=tuple_arg.ck.packed_metadata)
    assert got == records(["*", "*", "i32", "fp32", "i64"], [out, other, 5, 2.5, -9])


@skip_without_simdev
@pytest.mark.parametrize("padding,round_tf32", [("zero", False), ("nan", True)])
def test_host_descriptor_end_to_end(host_descriptor_sm80, padding, round_tf32):
    """A real triton.tools.tensor_descriptor.TensorDescriptor for the sm80
    (decomposed) kernel: base address, shape and strides as i64, the padding
    and round_f32_to_tf32 flags as one byte each, shape as i32, strides as
    i64, then the output pointer and the scratch pair."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    base = probe_buffer(torch.float32, 128)  # probe_args writes its record here
    if TENSORDESC_FLAGS == 2:
        desc = TensorDescriptor(base, shape=[8, 16], strides=[16, 1], block_shape=[16, 16], padding=padding,
                                round_f32_to_tf32=round_tf32)
    else:  # Triton 3.6: no round_f32_to_tf32, one flag
        desc = TensorDescriptor(base, shape=[8, 16], strides=[16, 1], block_shape=[16, 16], padding=padding)
    out = torch.zeros(256, dtype=torch.float32, device=DEVICE)
    got = probe(host_descriptor_sm80.launcher, base, desc, out, 16,
                packed=host_descriptor_sm80.ck.packed_metadata)
    flag = padding == "nan"
    flag_types, flag_values = (["i1", "i1"], [flag, round_tf32]) if TENSORDESC_FLAGS == 2 else (["i1"], [flag])
    assert got == records(
        ["*", "i64", "i64", "i64", "i64", *flag_types, "i32", "i32", "i64", "i64", "*"],
        [base, 8, 16, 16, 1, *flag_values, 8, 16, 16, 1, out])
    assert [size for size, _ in got] == [p.size for p in host_descriptor_sm80.ptx]


@skip_without_simdev
def test_global_scratch_reaches_the_kernel(device_descriptor):
    """The device-descriptor kernel's real metadata (global scratch > 0) makes
    the launcher allocate global scratch on the launch stream and pass it,
    aligned as the metadata says, as the second-to-last parameter; profile
    scratch (size 0) stays NULL."""
    out = probe_buffer()
    other = torch.zeros(256, dtype=torch.float32, device=DEVICE)
    got = probe(device_descriptor.launcher, out, out, other, 16, 16, 16, 16, grid=(3, 1, 1),
                packed=device_descriptor.ck.packed_metadata)
    assert got[:4] == records(["*", "*", "i32", "i32"], [out, other, 16, 16])[:4]
    (scratch_size, scratch), (profile_size, profile) = got[4], got[5]
    assert scratch_size == profile_size == 8
    assert scratch != 0 and scratch % device_descriptor.ck.metadata.global_scratch_align == 0
    assert profile == 0


# ---------------------------------------------------------------- a real kernel's descriptor, computing


@skip_without_simdev
@pytest.mark.parametrize("hooks", ["none", "triton_knobs"])
def test_add_descriptor_drives_add_f32(add, hooks):
    """The real add kernel's launcher (x, y, out, n: i32, alpha: fp32, BLOCK
    constexpr) drives simdev's add_f32, which has the same parameter list:
    out = x * alpha + y over a grid of ceil(n / 128) programs, as torch
    computes it. With hooks "triton_knobs" the empty HookChain objects Triton
    itself passes are used instead of None."""
    n, alpha = 1000, 2.5
    generator = torch.Generator().manual_seed(0)
    x_host = torch.randn(n, generator=generator)
    y_host = torch.randn(n, generator=generator)
    x, y = x_host.to(DEVICE), y_host.to(DEVICE)
    out = torch.full((n,), float("nan"), device=DEVICE)
    if hooks == "none":
        enter = exit_ = None
    else:
        enter, exit_ = triton.knobs.runtime.launch_enter_hook, triton.knobs.runtime.launch_exit_hook
    kernel = launch_support.load("add_f32")
    add.launcher(math.ceil(n / 128), 1, 1, launch_support.stream_of(DEVICE), kernel.function,
                 add.ck.packed_metadata, None, enter, exit_, x, y, out, n, alpha, 128)
    launch_support.sync(DEVICE)
    torch.testing.assert_close(out.cpu(), x_host * alpha + y_host, rtol=1e-6, atol=1e-6)
