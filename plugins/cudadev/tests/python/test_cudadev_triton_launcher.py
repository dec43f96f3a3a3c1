"""devbridge's generic launcher on cudadev: real Triton cubins, loaded through
devbridge's CUDA kernel runtime (libcuda opened at run time) and launched on
cudadev tensors under non-default cudadev streams, give results bit-identical
to the same cubins launched by upstream Triton on torch.cuda tensors; order is
proven against a long spin kernel queued earlier on the same stream, and
across streams with an event (and without one, to show the test can fail).

Cubins are compiled ahead of time for the GPU's own architecture with
triton.compile(ASTSource(...), target=GPUTarget("cuda", ...)): the same
binary goes to both launchers.
"""

from __future__ import annotations

import struct

import pytest
import torch

pytestmark = pytest.mark.gpu

triton = pytest.importorskip("triton", reason="triton is not installed")
tl = pytest.importorskip("triton.language")
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

import devbridge  # noqa: E402
import devbridge.triton  # noqa: E402
from devbridge import launch  # noqa: E402

SPIN_MS = 200
N = 1 << 20


@triton.jit
def add_kernel(x, y, out, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) * alpha + tl.load(y + offs, mask=mask), mask=mask)


@triton.jit
def scalars_kernel(out, a_i1, a_i8, a_i16, a_i32, a_i64, a_u1, a_u8, a_u16, a_u32, a_u64, a_fp16, a_bf16,
                   a_fp32, a_fp64):
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
    tl.store(out + 10, a_fp16.to(tl.float64))
    tl.store(out + 11, a_bf16.to(tl.float64))
    tl.store(out + 12, a_fp32.to(tl.float64))
    tl.store(out + 13, a_fp64)


@triton.jit
def dot_kernel(a, b, c, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    ra = tl.arange(0, BM)
    rb = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, 4):
        x = tl.load(a + ra[:, None] * (BK * 4) + k * BK + rk[None, :])
        y = tl.load(b + (k * BK + rk[:, None]) * BN + rb[None, :])
        acc += tl.dot(x, y)
    tl.store(c + ra[:, None] * BN + rb[None, :], acc)


@triton.jit
def descriptor_kernel(inp, out, M, N, BLOCK: tl.constexpr):
    # Device-side tensor descriptors live in global scratch memory on sm90.
    d_in = tl.make_tensor_descriptor(inp, shape=[M, N], strides=[N, 1], block_shape=[BLOCK, BLOCK])
    d_out = tl.make_tensor_descriptor(out, shape=[M, N], strides=[N, 1], block_shape=[BLOCK, BLOCK])
    pid = tl.program_id(0)
    d_out.store([pid * BLOCK, 0], d_in.load([pid * BLOCK, 0]) * 2.0)


def target():
    major, minor = torch.cuda.get_device_capability(0)
    return GPUTarget("cuda", major * 10 + minor, 32)


def compile_kernel(fn, signature, constexprs=(), divisible=(), **options):
    attrs = {(i,): [["tt.divisibility", 16]] for i in divisible}
    return triton.compile(ASTSource(fn, signature=signature, constexprs=dict(constexprs), attrs=attrs),
                          target=target(), options=options)


@pytest.fixture(scope="module")
def kernels():
    return {
        "add": compile_kernel(add_kernel, {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32",
                                           "alpha": "fp32", "BLOCK": "constexpr"},
                              {"BLOCK": 1024}, divisible=(0, 1, 2), num_warps=4),
        "scalars": compile_kernel(scalars_kernel, {"out": "*fp64", "a_i1": "i1", "a_i8": "i8", "a_i16": "i16",
                                                   "a_i32": "i32", "a_i64": "i64", "a_u1": "u1", "a_u8": "u8",
                                                   "a_u16": "u16", "a_u32": "u32", "a_u64": "u64",
                                                   "a_fp16": "fp16", "a_bf16": "bf16", "a_fp32": "fp32",
                                                   "a_fp64": "fp64"}, num_warps=1),
        "dot": compile_kernel(dot_kernel, {"a": "*fp16", "b": "*fp16", "c": "*fp32", "BM": "constexpr",
                                           "BN": "constexpr", "BK": "constexpr"},
                              {"BM": 128, "BN": 128, "BK": 64}, num_warps=8, num_stages=3),
        "descriptor": compile_kernel(descriptor_kernel, {"inp": "*fp32", "out": "*fp32", "M": "i32", "N": "i32",
                                                         "BLOCK": "constexpr"},
                                     {"BLOCK": 32}, divisible=(0, 1, 3), num_warps=4),
    }


@pytest.fixture(scope="module")
def cuda_runtime():
    return launch.kernel_runtime("cuda")


def load(ck, runtime, device="cudadev:0"):
    return launch.load_binary(ck.asm["cubin"], ck.metadata.name, device=device, runtime=runtime,
                              shared=ck.metadata.shared)


def ours(ck, kernel, grid, *args):
    """The compiled kernel through devbridge's launcher on the current cudadev stream."""
    launcher = devbridge.triton.Launcher(ck.src, ck.metadata)
    gx, gy, gz = (tuple(grid) + (1, 1))[:3]
    launcher(gx, gy, gz, devbridge.current_stream("cudadev:0"), kernel.function, ck.packed_metadata, None,
             None, None, *args)


def upstream(ck, grid, *args):
    """The same compiled kernel through upstream Triton's launcher on torch.cuda."""
    gx, gy, gz = (tuple(grid) + (1, 1))[:3]
    stream = torch.cuda.current_stream().cuda_stream
    ck.run(gx, gy, gz, stream, ck.function, ck.packed_metadata, None, None, None, *args)


def bits(tensor):
    return tensor.cpu().contiguous().view(torch.int32 if tensor.element_size() == 4 else torch.int64)


@pytest.fixture
def side_stream():
    stream = torch.Stream(device="cudadev:0")
    with stream:
        yield stream
    stream.synchronize()


def test_vector_add_is_bit_identical_to_upstream_on_a_non_default_stream(kernels, cuda_runtime, side_stream):
    ck = kernels["add"]
    n = N + 17
    x, y = torch.randn(n, generator=torch.Generator().manual_seed(0)), torch.randn(n)
    out_dev = torch.empty(n, device="cudadev")
    ours(ck, load(ck, cuda_runtime), ((n + 1023) // 1024,), x.to("cudadev"), y.to("cudadev"), out_dev, n,
         0.75, 1024)
    out_cuda = torch.empty(n, device="cuda")
    upstream(ck, ((n + 1023) // 1024,), x.cuda(), y.cuda(), out_cuda, n, 0.75, 1024)
    assert torch.equal(bits(out_dev), bits(out_cuda))
    torch.testing.assert_close(out_dev.cpu(), x * 0.75 + y)


SCALARS = (True, 100, -30000, -2**31, -2**62, True, 250, 65000, 2**32 - 1, 2**63 + 5, 1.0 / 3, 1.0 / 3, 1.0 / 3,
           1.0 / 3)


def test_every_scalar_type_is_bit_identical_to_upstream(kernels, cuda_runtime, side_stream):
    # i8 is positive here: Triton 3.6's launcher parses i8 with the "b" format,
    # an *unsigned* char, and refuses negative values (OverflowError).
    ck = kernels["scalars"]
    out_dev = torch.zeros(14, dtype=torch.float64, device="cudadev")
    ours(ck, load(ck, cuda_runtime), (1,), out_dev, *SCALARS)
    out_cuda = torch.zeros(14, dtype=torch.float64, device="cuda")
    upstream(ck, (1,), out_cuda, *SCALARS)
    assert torch.equal(bits(out_dev), bits(out_cuda))
    assert out_dev.cpu()[10].item() == struct.unpack("<e", struct.pack("<e", 1.0 / 3))[0]


def test_negative_small_integers_reach_the_kernel(kernels, cuda_runtime, side_stream):
    ck = kernels["scalars"]
    values = (False, -100, -30000, -7, -2**63, False, 0, 0, 0, 0, -0.0, -2.0, -1e30, -1e300)
    out = torch.zeros(14, dtype=torch.float64, device="cudadev")
    ours(ck, load(ck, cuda_runtime), (1,), out, *values)
    expected = [0.0, -100.0, -30000.0, -7.0, float(-2**63), 0.0, 0.0, 0.0, 0.0, 0.0, -0.0, -2.0,
                struct.unpack("<f", struct.pack("<f", -1e30))[0], -1e300]
    assert out.cpu().tolist() == expected


def test_a_dot_kernel_with_more_than_48kb_of_shared_memory(kernels, cuda_runtime, side_stream):
    ck = kernels["dot"]
    assert ck.metadata.shared > 49152
    a = torch.randn(128, 256, dtype=torch.float16)
    b = torch.randn(256, 128, dtype=torch.float16)
    c_dev = torch.empty(128, 128, device="cudadev")
    ours(ck, load(ck, cuda_runtime), (1,), a.to("cudadev"), b.to("cudadev"), c_dev, 128, 128, 64)
    c_cuda = torch.empty(128, 128, device="cuda")
    upstream(ck, (1,), a.cuda(), b.cuda(), c_cuda, 128, 128, 64)
    assert torch.equal(bits(c_dev), bits(c_cuda))
    torch.testing.assert_close(c_dev.cpu(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


def test_a_kernel_with_global_scratch_gets_it_from_the_cudadev_allocator(kernels, cuda_runtime, side_stream):
    ck = kernels["descriptor"]
    assert ck.metadata.global_scratch_size > 0
    inp = torch.randn(128, 32)
    out_dev = torch.zeros(128, 32, device="cudadev")
    ours(ck, load(ck, cuda_runtime), (4,), inp.to("cudadev"), out_dev, 128, 32, 32)
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    out_cuda = torch.zeros(128, 32, device="cuda")
    upstream(ck, (4,), inp.cuda(), out_cuda, 128, 32, 32)
    assert torch.equal(bits(out_dev), bits(out_cuda))
    torch.testing.assert_close(out_dev.cpu(), inp * 2)


def warm(kernels, cuda_runtime):
    """First launches load code lazily and may wait for the whole GPU; do them before timing order."""
    ck = kernels["add"]
    kernel = load(ck, cuda_runtime)
    x = torch.ones(1024, device="cudadev")
    ours(ck, kernel, (1,), x, x, x, 1024, 1.0, 1024)
    x.fill_(1.0)
    torch.cudadev._sleep_on_current_stream(0)
    torch.cudadev.synchronize()
    return ck, kernel


def test_the_launch_is_ordered_after_a_spin_queued_earlier_on_its_stream(kernels, cuda_runtime, side_stream):
    ck, kernel = warm(kernels, cuda_runtime)
    x = torch.ones(N, device="cudadev")
    y = torch.zeros(N, device="cudadev")
    out = torch.zeros(N, device="cudadev")
    torch.cudadev.synchronize()
    torch.cudadev._sleep_on_current_stream(SPIN_MS)
    x.fill_(5.0)  # runs after the spin; a launch not on this stream would read 1.0
    ours(ck, kernel, (N // 1024,), x, y, out, N, 2.0, 1024)
    host = out.cpu()  # copy on the same stream
    assert torch.all(host == 10.0)


def test_across_streams_the_event_orders_the_launch_and_its_absence_does_not(kernels, cuda_runtime):
    ck, kernel = warm(kernels, cuda_runtime)
    producer = torch.Stream(device="cudadev:0")
    consumer = torch.Stream(device="cudadev:0")
    x = torch.ones(N, device="cudadev")
    y = torch.zeros(N, device="cudadev")
    unordered = torch.zeros(N, device="cudadev")
    ordered = torch.zeros(N, device="cudadev")
    torch.cudadev.synchronize()
    with producer:
        torch.cudadev._sleep_on_current_stream(SPIN_MS)
        x.fill_(5.0)
        event = torch.Event()
        event.record(producer)
    with consumer:
        ours(ck, kernel, (N // 1024,), x, y, unordered, N, 2.0, 1024)  # no wait: reads x = 1
        consumer.wait_event(event)
        ours(ck, kernel, (N // 1024,), x, y, ordered, N, 2.0, 1024)
    torch.cudadev.synchronize()
    assert torch.all(unordered.cpu() == 2.0), "the consumer waited without an event: the test cannot fail"
    assert torch.all(ordered.cpu() == 10.0)


def test_a_tensor_on_torch_cuda_is_refused_for_a_cudadev_kernel(kernels, cuda_runtime):
    ck = kernels["add"]
    kernel = load(ck, cuda_runtime)
    x = torch.ones(16, device="cudadev")
    with pytest.raises(ValueError, match=r"argument 1 \('y'\) of kernel 'add_kernel' is a tensor on cuda:0, "
                                         r"but the kernel launches on cudadev:0"):
        ours(ck, kernel, (1,), x, torch.ones(16, device="cuda"), x, 16, 1.0, 1024)
    with pytest.raises(ValueError, match="is a tensor on cpu"):
        ours(ck, kernel, (1,), x, torch.ones(16), x, 16, 1.0, 1024)


def test_loading_a_kernel_that_needs_too_much_shared_memory_names_the_limit(kernels, cuda_runtime):
    ck = kernels["add"]
    with pytest.raises(RuntimeError, match=r"needs 1048576 bytes of shared memory, but CUDA device 0 allows at most"):
        launch.load_binary(ck.asm["cubin"], ck.metadata.name, device="cudadev:0", runtime=cuda_runtime,
                           shared=1 << 20)
