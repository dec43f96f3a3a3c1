"""Real @triton.jit kernels through `kernel[grid](...)` on cudadev tensors,
with devbridge's Triton driver active: compiled by NVIDIA's Triton compiler
for the plugin's target, launched by devbridge's launcher on the current
cudadev stream. Each result is compared bit for bit with the same kernel on
torch.cuda tensors under upstream Triton's own driver, in the same process."""

from __future__ import annotations

import threading

import pytest
import torch

pytestmark = pytest.mark.gpu

triton = pytest.importorskip("triton", reason="triton is not installed")
import triton.language as tl  # noqa: E402

import devbridge  # noqa: E402
import devbridge.triton  # noqa: E402

SPIN_MS = 200


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
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
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


@triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 1024})], key=["n"])
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
def descriptor_scale_kernel(inp, out, M, N, BLOCK: tl.constexpr):
    # Device-side tensor descriptors need global scratch on sm90.
    d_in = tl.make_tensor_descriptor(inp, shape=[M, N], strides=[N, 1], block_shape=[BLOCK, BLOCK])
    d_out = tl.make_tensor_descriptor(out, shape=[M, N], strides=[N, 1], block_shape=[BLOCK, BLOCK])
    pid = tl.program_id(0)
    d_out.store([pid * BLOCK, 0], d_in.load([pid * BLOCK, 0]) * 3.0)


@pytest.fixture(scope="module", autouse=True)
def cuda_scratch_allocator():
    # Upstream's launcher needs an allocator for global scratch on torch.cuda;
    # devbridge's takes it from the cudadev allocator by itself.
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))


def on_both(run, *host_inputs, outputs):
    """Runs `run(device, *inputs)` with upstream's driver on cuda and with
    devbridge's on cudadev (under a non-default stream); returns both outputs."""
    devbridge.triton.deactivate()
    cuda_in = [t.cuda() for t in host_inputs]
    cuda_out = [torch.zeros_like(o, device="cuda") for o in outputs]
    run("cuda", *cuda_in, *cuda_out)
    torch.cuda.synchronize()
    with devbridge.triton.activate():
        stream = torch.Stream(device="cudadev:0")
        with stream:
            dev_in = [t.to("cudadev") for t in host_inputs]
            dev_out = [torch.zeros_like(o, device="cudadev") for o in outputs]
            run("cudadev", *dev_in, *dev_out)
            result = [o.cpu() for o in dev_out]  # on the same stream
    return [o.cpu() for o in cuda_out], result


def same_bits(a, b):
    return a.dtype == b.dtype and torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def test_vector_add():
    n = (1 << 20) + 3
    x, y = torch.randn(n), torch.randn(n)
    cuda, dev = on_both(lambda d, x, y, o: add_kernel[(triton.cdiv(n, 1024),)](x, y, o, n, BLOCK=1024),
                        x, y, outputs=[torch.empty(n)])
    assert same_bits(cuda[0], dev[0])
    torch.testing.assert_close(dev[0], x + y)


def test_softmax():
    rows, cols = 256, 1000
    x = torch.randn(rows, cols)
    cuda, dev = on_both(lambda d, x, o: softmax_kernel[(rows,)](x, o, cols, cols, BLOCK=1024), x,
                        outputs=[torch.empty(rows, cols)])
    assert same_bits(cuda[0], dev[0])
    torch.testing.assert_close(dev[0], torch.softmax(x, dim=1))


def test_dot_matmul():
    M = N = K = 256
    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    cuda, dev = on_both(lambda d, a, b, c: matmul_kernel[(M // 64, N // 64)](a, b, c, M, N, K, BM=64, BN=64,
                                                                               BK=32),
                        a, b, outputs=[torch.empty(M, N)])
    assert same_bits(cuda[0], dev[0])
    torch.testing.assert_close(dev[0], a.float() @ b.float(), rtol=1e-2, atol=1e-2)


def test_autotuned_kernel():
    n = 100_000
    x = torch.randn(n)
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    cuda, dev = on_both(lambda d, x, o: tuned_scale_kernel[grid](x, o, n, 2.5), x, outputs=[torch.empty(n)])
    assert same_bits(cuda[0], dev[0])
    torch.testing.assert_close(dev[0], x * 2.5)


def test_atomics():
    n = 1 << 16
    values = torch.randint(0, 64, (n,), dtype=torch.int32)
    cuda, dev = on_both(lambda d, v, c: histogram_kernel[(triton.cdiv(n, 1024),)](v, c, n, BLOCK=1024), values,
                        outputs=[torch.zeros(64, dtype=torch.int32)])
    assert torch.equal(cuda[0], dev[0])
    assert torch.equal(dev[0], torch.bincount(values, minlength=64).int())


def test_a_kernel_with_global_scratch():
    inp = torch.randn(128, 32)
    cuda, dev = on_both(lambda d, i, o: descriptor_scale_kernel[(4,)](i, o, 128, 32, BLOCK=32), inp,
                        outputs=[torch.empty(128, 32)])
    assert same_bits(cuda[0], dev[0])
    torch.testing.assert_close(dev[0], inp * 3)


def test_two_host_threads_on_their_own_streams():
    n = 1 << 20
    with devbridge.triton.activate():
        warm = torch.ones(n, device="cudadev")
        add_kernel[(n // 1024,)](warm, warm, warm, n, BLOCK=1024)
        torch.accelerator.synchronize()
        errors = []

        def worker(value):
            try:
                stream = torch.Stream(device="cudadev:0")
                with stream:
                    x = torch.full((n,), float(value), device="cudadev")
                    out = torch.empty(n, device="cudadev")
                    for _ in range(20):
                        add_kernel[(n // 1024,)](x, x, out, n, BLOCK=1024)
                        x, out = out, x
                    result = x.cpu()
                expected = float(value) * 2 ** 20
                if not torch.all(result == expected):
                    errors.append((value, result[:4]))
            except Exception as error:  # noqa: BLE001
                errors.append(error)

        threads = [threading.Thread(target=worker, args=(v,)) for v in (1, 3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


def test_the_kernel_runs_after_a_spin_queued_earlier_on_its_stream():
    n = 1 << 22
    with devbridge.triton.activate():
        stream = torch.Stream(device="cudadev:0")
        with stream:
            x = torch.ones(n, device="cudadev")
            out = torch.zeros(n, device="cudadev")
            add_kernel[(n // 1024,)](x, x, out, n, BLOCK=1024)  # compiled and loaded before the spin
            torch.cudadev._sleep_on_current_stream(0)
            torch.accelerator.synchronize()
            torch.cudadev._sleep_on_current_stream(SPIN_MS)
            x.fill_(5.0)  # after the spin; a kernel on another stream would read 1.0
            add_kernel[(n // 1024,)](x, x, out, n, BLOCK=1024)
            assert torch.all(out.cpu() == 10.0)


def test_do_bench_works_on_cudadev():
    n = 1 << 20
    with devbridge.triton.activate():
        x = torch.ones(n, device="cudadev")
        ms = triton.testing.do_bench(lambda: add_kernel[(n // 1024,)](x, x, x, n, BLOCK=1024), warmup=5, rep=20)
    assert 0 < ms < 100
