"""Copies in every direction: CPU, cudadev (same and other device), torch.cuda."""

import pytest
import torch

pytestmark = pytest.mark.gpu

DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int8,
    torch.uint8,
    torch.int32,
    torch.int64,
    torch.bool,
    torch.complex64,
]

two_gpus = pytest.mark.skipif(
    torch.cuda.device_count() < 2, reason="needs two GPUs (cudadev:0 and cudadev:1)"
)


def host_values(dtype, shape=(5, 7)):
    generator = torch.Generator().manual_seed(1234)
    if dtype == torch.bool:
        return torch.rand(shape, generator=generator) > 0.5
    if dtype.is_complex:
        return torch.randn(shape, generator=generator, dtype=dtype)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator).to(dtype)
    return torch.randint(0, 100, shape, generator=generator, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cpu_round_trip(dtype):
    host = host_values(dtype)
    device = host.to("cudadev")
    assert device.device.type == "cudadev"
    assert device.dtype == dtype
    assert torch.equal(device.cpu(), host)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cudadev_to_cuda_and_back(dtype):
    host = host_values(dtype)
    on_cuda = host.to("cudadev").to("cuda")
    assert on_cuda.is_cuda
    assert torch.equal(on_cuda.cpu(), host)
    back = on_cuda.to("cudadev")
    assert back.device.type == "cudadev"
    assert torch.equal(back.cpu(), host)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_device_to_device_same_device(dtype):
    host = host_values(dtype)
    source = host.to("cudadev")
    target = torch.empty_like(source)
    target.copy_(source)
    assert torch.equal(target.cpu(), host)
    assert torch.equal(source.clone().cpu(), host)


def test_overlapping_views_on_one_device_behave_as_on_cuda():
    # Contiguous, same dtype, but the ranges overlap: not a plain byte copy;
    # the answer (values or torch's overlap error) must be cuda's.
    def attempt(device):
        x = torch.arange(16.0, device=device)
        try:
            x[1:9].copy_(x[0:8])
        except RuntimeError as error:
            return type(error), str(error).split("\n")[0]
        return x.cpu()

    on_cuda, on_cudadev = attempt("cuda"), attempt("cudadev")
    if isinstance(on_cuda, torch.Tensor):
        assert torch.equal(on_cudadev, on_cuda)
    else:
        assert on_cudadev == on_cuda


def test_a_copy_into_itself_and_empty_copies_leave_values_alone():
    x = torch.arange(12.0, device="cudadev").reshape(3, 4)
    x.copy_(x)
    x[1:2].copy_(x[1:2])
    torch.empty(0, device="cudadev").copy_(torch.empty(0, device="cudadev"))
    assert torch.equal(x.cpu(), torch.arange(12.0).reshape(3, 4))


def test_non_contiguous_sources_and_destinations():
    host = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    device = host.to("cudadev")
    assert torch.equal(device.t().cpu(), host.t())
    assert torch.equal(device[:, ::2].cpu(), host[:, ::2])

    transposed = torch.zeros(6, 4, device="cudadev")
    transposed.t().copy_(host)
    assert torch.equal(transposed.cpu(), host.t())

    strided = torch.zeros(4, 6, device="cudadev")
    strided[:, 1::2].copy_(host[:, :3])
    expected = torch.zeros(4, 6)
    expected[:, 1::2] = host[:, :3]
    assert torch.equal(strided.cpu(), expected)

    host_out = torch.zeros(6, 4).t()
    host_out.copy_(device)
    assert torch.equal(host_out, host)


def test_broadcasting_copies():
    row = torch.arange(6.0)
    device = torch.empty(4, 6, device="cudadev")
    device.copy_(row)
    assert torch.equal(device.cpu(), row.expand(4, 6))
    host = torch.empty(4, 6)
    host.copy_(row.to("cudadev"))
    assert torch.equal(host, row.expand(4, 6))
    with pytest.raises(RuntimeError, match="expanded size"):
        device.copy_(torch.arange(5.0))


def test_dtype_conversions_in_copies():
    host = torch.randn(10)
    half = torch.empty(10, dtype=torch.float16, device="cudadev")
    half.copy_(host)
    assert torch.equal(half.cpu(), host.half())
    wide = torch.empty(10, dtype=torch.float64)
    wide.copy_(half)
    assert torch.equal(wide, host.half().double())
    assert torch.equal(host.to("cudadev").to(torch.int32).cpu(), host.to(torch.int32))


def test_conj_and_neg_views_are_resolved():
    z = torch.randn(8, dtype=torch.complex64)
    device = z.to("cudadev")
    assert torch.equal(device.conj().cpu(), z.conj().resolve_conj())
    assert torch.equal(z.conj().to("cudadev").cpu(), z.conj().resolve_conj())
    target = torch.zeros(8, dtype=torch.complex64, device="cudadev")
    target.conj().copy_(z)  # writing through a conj view stores conj(z)
    assert torch.equal(target.cpu(), z.conj().resolve_conj())


def test_pinned_non_blocking_round_trip():
    host = torch.randn(1 << 20).pin_memory()
    assert host.is_pinned()
    device = host.to("cudadev", non_blocking=True)
    out = torch.empty(1 << 20, pin_memory=True)
    out.copy_(device, non_blocking=True)
    torch.accelerator.current_stream().synchronize()
    assert torch.equal(out, host)


def test_item_reads_one_element():
    assert torch.tensor([3.5]).to("cudadev").item() == 3.5
    assert torch.tensor(7, dtype=torch.int64).to("cudadev").item() == 7
    assert torch.tensor(True).to("cudadev").item() is True
    assert torch.arange(10.0).to("cudadev")[7].item() == 7.0


def test_storage_copies():
    host = torch.arange(16, dtype=torch.uint8).untyped_storage()
    device = host.cudadev()
    assert device.device.type == "cudadev"
    assert device.cpu().tolist() == host.tolist()


@two_gpus
def test_copies_across_cudadev_devices():
    host = torch.randn(1000)
    on_0 = host.to("cudadev:0")
    on_1 = on_0.to("cudadev:1")
    assert on_1.device == torch.device("cudadev:1")
    assert torch.equal(on_1.cpu(), host)
    assert torch.equal(on_1.to("cudadev:0").cpu(), host)


@two_gpus
def test_copies_between_cudadev_and_cuda_on_other_devices():
    host = torch.randn(1000)
    assert torch.equal(host.to("cudadev:0").to("cuda:1").cpu(), host)
    assert torch.equal(host.to("cuda:1").to("cudadev:0").cpu(), host)
