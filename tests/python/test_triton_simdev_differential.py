"""simdev's Triton target against TRITON_INTERPRET=1, case by case (issue #22).

Every case of triton_differential_kernels.CASES runs once under
TRITON_INTERPRET=1 on CPU tensors, the whole table in ONE fresh subprocess,
and once here on simdev tensors through devbridge (kernel[grid](...) with
devbridge's driver: the front end, the launcher, simdev's streams, the
interpreter per program on the stream worker). The outputs must be the same
bits. Cases rotate over simdev:0's default stream, a second stream on
simdev:0 and a stream on simdev:1.

The rest of the file: what TRITON_INTERPRET=1 cannot show (masked lanes at
wild addresses, broadcast masks, bool scalars, libdevice), checked against torch.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
import torch

triton = pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")
import triton.language as tl  # noqa: E402
from triton.language.extra import libdevice  # noqa: E402

import devbridge  # noqa: E402
import devbridge.triton  # noqa: E402

import triton_differential_kernels as table  # noqa: E402
from launch_support import skip_without_simdev  # noqa: E402

# numpy warns where a kernel divides or takes a log in lanes its mask turns off
# (loaded as 0): on both sides alike, and harmless, as on a GPU.
pytestmark = [skip_without_simdev, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


@pytest.fixture(autouse=True)
def devbridge_driver():
    with devbridge.triton.activate():
        yield


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("triton-interpret-differential") / "reference.pt"
    env = {**os.environ, "TRITON_INTERPRET": "1", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    done = subprocess.run([sys.executable, "-W", "ignore", str(pathlib.Path(table.__file__)), str(out)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the TRITON_INTERPRET=1 side crashed ({done.returncode}):\n{done.stderr[-4000:]}"
    return torch.load(out)


@pytest.fixture(scope="module")
def streams():
    return [None, torch.Stream(device="simdev:0"), torch.Stream(device="simdev:1")]


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    a, b = a.contiguous(), b.contiguous()
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


NAMES = sorted(table.CASES)


def _run_on_simdev(case, index, streams):
    stream = streams[index % len(streams)]
    if stream is None:
        return table.run_case(case, device="simdev:0")
    torch.accelerator.set_device_index(stream.device.index)
    try:
        with stream:
            return table.run_case(case, device=str(stream.device))
    finally:
        torch.accelerator.set_device_index(0)


def _bfloat16_product(case, name) -> torch.Tensor:
    """The float32 product of a square bfloat16 dot case's operands (run_case's inputs)."""
    a, b, _ = case.args(torch.Generator().manual_seed(sum(map(ord, name))))
    n = int(a.numel() ** 0.5)
    return (a.float().reshape(n, n) @ b.float().reshape(n, n)).reshape(-1)


# Conversions Triton's interpreter (3.6.0, 3.7.1, 3.8.0) gets wrong and simdev computes as a GPU does
# (devbridge/triton/interpreter/casts.py, checked against torch and a GPU's answers in
# test_interpreter_casts.py): float32 -> bfloat16 truncated instead of rounded to nearest even,
# integers and bool -> bfloat16 stored as numbers in the bits, fp8 ties, negative floats into unsigned
# types wrapped where a GPU's cvt saturates to 0. Where TRITON_INTERPRET=1 differs from torch's answer
# in these cases, simdev is held to torch's answer instead.
_UNSIGNED = (torch.uint8, torch.uint16, torch.uint32, torch.uint64)


def _converted(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x.to(dtype) as a GPU converts: a negative float into an unsigned type is 0 (torch's cast wraps)."""
    if x.is_floating_point() and dtype in _UNSIGNED:
        x = x.clamp(min=0)
    return x.to(dtype)


def _stored(values: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """`out` (the zeros run_case passes) with the lanes a masked 1-D case stores (the first N_USED)."""
    out = out.clone()
    out[:table.N_USED] = values[:table.N_USED]
    return out


def _torch_answer(name: str, case) -> torch.Tensor | None:
    """torch's answer for a case whose conversions TRITON_INTERPRET=1 gets wrong (from run_case's
    inputs); None for the other cases."""
    args = case.args(torch.Generator().manual_seed(sum(map(ord, name))))
    if name.startswith(("cast/to/", "cast/rtne/")):
        return _stored(_converted(args[0], args[1].dtype), args[1])
    if name.startswith("cast/roundtrip-fp8e4b15/"):  # no torch dtype: clamped to 1.75 (held to one fp8e4b15 step)
        return _stored(args[0].clamp(-1.75, 1.75), args[1])
    if name.startswith("constexpr/"):
        v = args[0] * case.kwargs["SCALE"]
        return _stored(_converted(-v if case.kwargs["NEGATE"] else v, args[1].dtype), args[1])
    if name == "arith/truediv/bfloat16-bfloat16":  # bfloat16 / is computed in float32, then rounded
        return _stored((args[0].float() / args[1].float()).bfloat16(), args[2])
    if name == "scalar/a * s + s/bfloat16/int":  # bfloat16 with an int32 scalar: float32
        return _stored((args[0].float() * args[2] + args[2]).bfloat16(), args[1])
    if name == "reduce/cumsum/bfloat16/axisNone":  # tl.cumsum promotes bfloat16 to float32
        return args[0].float().view(table.M2, table.N2).cumsum(1).view(-1).bfloat16()
    if name == "math/softmax/bfloat16":  # per program of 32 lanes in float32, masked lanes loaded as 0
        x = args[0].float()
        x[table.N_USED:] = 0
        return _stored(torch.softmax(x.view(-1, 32), dim=1).view(-1).bfloat16(), args[1])
    bfloat16 = _BFLOAT16_ANSWERS.get(name)
    return bfloat16(*args) if bfloat16 is not None else None


# bfloat16 arithmetic, which Triton's interpreter (3.6.0, 3.7.1, 3.8.0) computes on the uint16 bits
# bfloat16 is kept in (a + b adds the bit patterns, a < b is wrong for negative values, tl.sum sums the
# bits) and simdev on the values, as a GPU does (devbridge/triton/interpreter/narrow_floats.py, checked
# in test_interpreter_bf16_arithmetic.py): held to torch's bfloat16 arithmetic, which rounds each
# operation once to nearest even, as sm_90's add/sub/mul/fma.rn.bf16 do.


def _bf16_tree_sum(t: torch.Tensor, dim: int) -> torch.Tensor:
    """tl.sum of bfloat16: adds in bfloat16, halving the axis (narrow_floats' order)."""
    while t.shape[dim] > 1:
        half = t.shape[dim] // 2
        t = t.narrow(dim, 0, half) + t.narrow(dim, half, half)
    return t.squeeze(dim)


def _bf16_binary(op):
    return lambda x, y, out, n: _stored(op(x, y), out)


_BFLOAT16_ANSWERS = {
    "arith/add/bfloat16-bfloat16": _bf16_binary(torch.add),
    "arith/sub/bfloat16-bfloat16": _bf16_binary(torch.sub),
    "arith/mul/bfloat16-bfloat16": _bf16_binary(torch.mul),
    **{f"compare/{op}/bfloat16-bfloat16": _bf16_binary(getattr(torch, op)) for op in ("lt", "le", "gt", "ge")},
    "unary/neg/bfloat16": lambda x, out, n: _stored(-x, out),  # (no zeros among the inputs: 0 - x is -x)
    # fma.rn.bf16: the exact a*b+c (float64 holds it for these inputs) rounded once
    "math/fma/bfloat16": lambda a, b, c, out, n: _stored((a.double() * b.double() + c.double()).bfloat16(), out),
    # -tl.abs(b) in bfloat16, then clamped in float32 (language/core.py promotes bfloat16 for tl.clamp)
    "math/clamp/bfloat16": lambda a, b, c, out, n: _stored(torch.clamp(a.float(), -b.abs().float(),
                                                                       b.abs().float()).bfloat16(), out),
    "masked2d/bfloat16": lambda x, out, m, n: x + x,  # every element of the 13 x 11 tensor is stored
    "shape/join_split/bfloat16": lambda x, out: x + x,
    "reduce/sum/bfloat16/axis0": lambda x, out: _bf16_tree_sum(x.view(table.M2, table.N2), 0),
    "reduce/sum/bfloat16/axis1": lambda x, out: _bf16_tree_sum(x.view(table.M2, table.N2), 1),
}


def _assert_torch_answer(name: str, ours: torch.Tensor, answer: torch.Tensor) -> None:
    if name.startswith("cast/roundtrip-fp8e4b15/"):
        torch.testing.assert_close(ours, answer, rtol=2**-4, atol=2**-17)
    elif name == "math/softmax/bfloat16":  # numpy's exp and torch's may differ in float32's last bit
        torch.testing.assert_close(ours.float(), answer.float(), rtol=2**-7, atol=0)
    else:
        assert same_bits(ours, answer), f"{name}: simdev differs from torch's answer:\n{ours}\n{answer}"


@pytest.mark.parametrize("name", NAMES)
def test_simdev_matches_triton_interpret_bit_for_bit(name, reference, streams):
    case = table.CASES[name]
    expected = reference[name]
    assert not isinstance(expected, str), f"TRITON_INTERPRET=1 itself fails this case (fix the table): {expected}"
    ours = _run_on_simdev(case, NAMES.index(name), streams)
    if isinstance(ours, dict):  # autotuned: simdev's pick, against the reference run of that config
        ((config, ours),) = ours.items()
        expected = expected[config]
    assert len(ours) == len(expected)
    if name.startswith("dot/bfloat16"):
        product = _bfloat16_product(case, name)
        if not torch.allclose(expected[0].float(), product, rtol=2e-2, atol=1e-1):
            # Triton 3.6's interpreter multiplies bfloat16 bit patterns as integers in tl.dot;
            # simdev computes the product (devbridge/triton/interpreter/dot.py): held to it instead.
            torch.testing.assert_close(ours[0].float(), product, rtol=2e-2, atol=1e-1)
            return
    answer = _torch_answer(name, case)
    if answer is not None and not same_bits(expected[0], answer):
        # TRITON_INTERPRET=1 converts wrongly here (see _torch_answer): simdev is held to torch's answer
        _assert_torch_answer(name, ours[0], answer)
        return
    for position, (a, b) in enumerate(zip(ours, expected)):
        if case.atol is None:
            assert same_bits(a, b), f"{name}: output {position} differs from TRITON_INTERPRET=1:\n{a}\n{b}"
        else:
            torch.testing.assert_close(a, b, atol=case.atol, rtol=0)


def test_the_table_is_broad():
    families = {case.family for case in table.CASES.values()}
    assert {"arith", "compare", "bitwise", "unary", "math", "cast", "reduce", "atomic", "masked", "dot", "shape",
            "helpers", "control", "grid", "constexpr", "autotune", "scalar", "tuple"} <= families
    dtypes = set(table.ALL + table.FP8)
    named = {d for d in dtypes for n in table.CASES if d in n}
    assert named == dtypes
    assert len(table.CASES) >= 700


# ---------------------------------------------------------------- what TRITON_INTERPRET=1 cannot show


@triton.jit
def _single_element_broadcasts(ptr, src, active, BLOCK: tl.constexpr):
    # A value and a mask of one element, broadcast by the atomic to the
    # pointers' shape: numpy views whose strides are all zero, which Triton's
    # interpreter (3.6.0, 3.7.1) reads as contiguous buffers, past their end.
    # The programs from `active` on are masked out, at wild addresses.
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    total = tl.sum(tl.load(src + offs), axis=0, keep_dims=True)  # shape (1,)
    program_ok = tl.full((1,), 1, tl.int1) & (pid < active)  # shape (1,)
    offsets = tl.where(pid < active, offs, (offs + 1) * 1_000_000_007)
    tl.atomic_add(ptr + offsets, total, mask=program_ok)
    tl.atomic_max(ptr + offsets, total * 0, mask=program_ok)
    v = tl.load(ptr + offsets, mask=program_ok, other=0.0)
    tl.store(ptr + offsets, v + total, mask=program_ok)


def test_masked_lanes_with_wild_addresses_and_broadcast_operands_run_like_a_gpu():
    src = torch.arange(16, dtype=torch.float32)
    ptr = torch.zeros(16, device="simdev")
    _single_element_broadcasts[(4,)](ptr, src.to("simdev"), 2, BLOCK=16)
    # each active program: add the total, max with 0, add the total again
    assert ptr.cpu().tolist() == [4 * src.sum().item()] * 16


@triton.jit
def _bool_scalar(out, flag, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.where(flag, offs, -offs))


def test_bool_scalar_arguments():
    # TRITON_INTERPRET=1 refuses them (its int conversion makes an int32 array typed int1)
    out = torch.empty(8, dtype=torch.int32, device="simdev")
    _bool_scalar[(1,)](out, True, BLOCK=8)
    assert out.cpu().tolist() == list(range(8))
    _bool_scalar[(1,)](out, False, BLOCK=8)
    assert out.cpu().tolist() == [-i for i in range(8)]


@triton.jit
def _typed_scalars(x, out, a: tl.int64, b: tl.int64, scale, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs) * scale)  # bfloat16 times an fp32 parameter: fp32 on a GPU
    tl.store(out + BLOCK, (a * b).to(tl.float32))  # i64 parameters: no int32 overflow on a GPU


def test_scalar_parameters_are_typed_as_the_signature_types_them():
    # TRITON_INTERPRET=1 types an int by its value (int32 here, where the
    # kernel says int64: 70000 * 70000 wraps) and passes a float untyped (the
    # product then stays bfloat16); a GPU computes both as compiled.
    x = torch.tensor([1.0078125, 3.0, -7.5, 0.33203125], dtype=torch.bfloat16)
    out = torch.empty(5, device="simdev")
    scale = 1.0009765625
    _typed_scalars[(1,)](x.to("simdev"), out, 70000, 70000, scale, BLOCK=4)
    expected = torch.cat([x.float() * torch.tensor(scale, dtype=torch.float32), torch.tensor([4.9e9])])
    assert torch.equal(out.cpu(), expected), (out.cpu(), expected)


@triton.jit
def _libdevice_kernel(x, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x + offs, mask=mask)
    tl.store(out + offs, libdevice.tanh(v) + libdevice.log1p(tl.abs(v)) + libdevice.pow(tl.abs(v), 1.5), mask=mask)


def test_libdevice_runs_on_simdev_where_triton_interpret_returns_none():
    x = torch.randn(30, generator=torch.Generator().manual_seed(0))
    out = torch.empty(30, device="simdev")
    _libdevice_kernel[(1,)](x.to("simdev"), out, 30, BLOCK=32)
    torch.testing.assert_close(out.cpu(), torch.tanh(x) + torch.log1p(x.abs()) + x.abs() ** 1.5)


def test_fp8_types_the_interpreter_cannot_type_are_refused_clearly():
    # Triton's interpreter has no fp8e4b8 / fp8e5b16 (dtype.to_ir): simdev's
    # front end refuses them when the kernel compiles, naming the fp8 types it takes.
    out = torch.empty(64, device="simdev")
    for dtype, name in ((torch.float8_e4m3fnuz, "fp8e4b8"), (torch.float8_e5m2fnuz, "fp8e5b16")):
        kernel = table.specialize(table.unary_template, EXPR="a.to(tl.float32)")
        x = torch.zeros(64, dtype=dtype, device="simdev")
        with pytest.raises(triton.compiler.errors.CompilationError,
                           match=rf"type {name} not supported in this architecture. The supported fp8 dtypes are "
                                 r"\('fp8e5', 'fp8e4nv', 'fp8e4b15'\)"):
            kernel[(2,)](x, out, 64, BLOCK=32)
    kernel = table.specialize(table.unary_template, EXPR="a.to(tl.float8e4b8).to(tl.float32)")
    with pytest.raises(triton.compiler.errors.CompilationError, match="type fp8e4b8 not supported"):
        kernel[(2,)](out, out, 64, BLOCK=32)


def _closure_kernel(scale):
    @triton.jit
    def scaled(x, out, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out + offs, tl.load(x + offs) * SCALE)

    SCALE = tl.constexpr(scale)
    return scaled


def test_kernels_see_the_names_they_closed_over():
    # The front end reads a kernel's closure (JITCallable.get_capture_scope);
    # TRITON_INTERPRET=1 runs the rewritten text in the module's globals only
    # (NameError: name 'SCALE' is not defined). simdev runs what was compiled.
    x = torch.arange(16, dtype=torch.float32, device="simdev")
    for scale in (3.0, -2.0):  # one source, two closures: each launch runs its own
        out = torch.empty(16, device="simdev")
        _closure_kernel(scale)[(1,)](x, out, BLOCK=16)
        assert torch.equal(out.cpu(), torch.arange(16, dtype=torch.float32) * scale)


@triton.jit
def _generated_helper(v):
    return HELPER_BODY  # noqa: F821 - replaced before use, as a code generator does


@triton.jit
def _calls_generated_helper(x, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, HELPER(tl.load(x + offs)))  # noqa: F821 - replaced before use


def test_runtime_updated_helpers_run_their_new_source():
    helper = triton.JITFunction(_generated_helper.fn)
    helper._unsafe_update_src(helper.src.replace("HELPER_BODY", "v * v + 1"))
    kernel = triton.JITFunction(_calls_generated_helper.fn)
    kernel._unsafe_update_src(kernel.src.replace("HELPER(", "GENERATED("))
    kernel.fn.__globals__["GENERATED"] = helper  # the name the generated text calls
    try:
        x = torch.arange(8, dtype=torch.float32, device="simdev")
        out = torch.empty(8, device="simdev")
        kernel[(1,)](x, out, BLOCK=8)
        assert out.cpu().tolist() == [v * v + 1 for v in range(8)]
    finally:
        del kernel.fn.__globals__["GENERATED"]


@triton.jit
def _sum_first_rows_with_break(x, out, ROWS: tl.constexpr, N: tl.constexpr):
    acc = tl.zeros([N], dtype=tl.float32)
    row = 0
    while row < 4:
        if row == ROWS:
            break
        acc += tl.load(x + row * N + tl.arange(0, N))
        row += 1
    tl.store(out + tl.arange(0, N), acc)


@triton.jit
def _sum_first_rows(x, out, ROWS: tl.constexpr, N: tl.constexpr):
    acc = tl.zeros([N], dtype=tl.float32)
    for row in range(ROWS):
        acc += tl.load(x + row * N + tl.arange(0, N))
    tl.store(out + tl.arange(0, N), acc)


def test_what_the_front_end_refuses_fails_as_on_a_gpu():
    # simdev compiles through Triton's front end, as a GPU target does: a
    # `break` fails there ("unsupported AST node type: Break", Triton 3.6,
    # 3.7.1 and 3.8.0) on every target, although TRITON_INTERPRET=1, which
    # has no front end, runs it as Python. The same sum written as a bounded
    # loop compiles and runs.
    x = torch.arange(32, dtype=torch.float32, device="simdev")
    out = torch.empty(8, device="simdev")
    with pytest.raises(triton.compiler.errors.CompilationError, match="unsupported AST node type: Break"):
        _sum_first_rows_with_break[(1,)](x, out, 2, 8)
    _sum_first_rows[(1,)](x, out, 2, 8)
    assert torch.equal(out.cpu(), torch.arange(32, dtype=torch.float32).view(4, 8)[:2].sum(0))


def test_descriptor_parameters_it_cannot_take_are_refused_naming_the_fix():
    # A TMA descriptor built on the host (nvTmaDesc) has no interpreter form;
    # host TensorDescriptors (tensordesc<...>) run (the table's cases above).
    from devbridge.triton.interpreter import interpreter

    with pytest.raises(NotImplementedError, match=r"desc of type nvTmaDesc.*TensorDescriptor"):
        interpreter._reject_unsupported({"x": "*fp32", "desc": "nvTmaDesc"})
    with pytest.raises(NotImplementedError, match=r"pair\[1\] of type tensordesc<broken>"):
        interpreter._reject_unsupported({"pair": ("*fp32", "tensordesc<broken>")})
    interpreter._reject_unsupported({"desc": "tensordesc<fp32[16, 16]>"})
