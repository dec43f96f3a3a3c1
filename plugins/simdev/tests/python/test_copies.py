"""Copies to, from and between simdev devices: every dtype, every layout."""

import pytest
import torch

torch_simdev = pytest.importorskip(
    "torch_simdev", reason="torch_simdev is not installed; build it with: pip install --no-build-isolation plugins/simdev"
)

DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
] + [
    getattr(torch, name)
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu")
    if hasattr(torch, name)
]


def sample(dtype, shape=(3, 5)):
    """Deterministic data of `dtype` with distinct values (raw bits for the exotic types)."""
    n = 1
    for s in shape:
        n *= s
    if dtype == torch.bool:
        return (torch.arange(n) % 3 == 0).reshape(shape)
    if dtype.is_floating_point and dtype.itemsize == 1:  # float8: any bit pattern is a value
        return torch.randint(0, 120, shape, dtype=torch.uint8).view(dtype)
    if dtype.is_complex:
        return torch.complex(torch.randn(shape), torch.randn(shape)).to(dtype)
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    return torch.randint(0, 100, shape).to(dtype)


def same_bits(a, b):
    """Bitwise equality (NaN-safe, works for every dtype)."""
    assert a.dtype == b.dtype and a.shape == b.shape
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip_every_dtype(dtype):
    host = sample(dtype)
    device = host.to("simdev")
    assert device.device == torch.device("simdev:0")
    assert device.dtype == dtype
    assert same_bits(device.cpu(), host)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.complex128, torch.bool], ids=str)
def test_device_to_device_same_device_every_layout(dtype):
    host = sample(dtype, (4, 6))
    device = host.to("simdev")
    assert same_bits(device.clone().cpu(), host)
    assert same_bits(device.t().contiguous().cpu(), host.t().contiguous())
    target = torch.empty(6, 4, dtype=dtype, device="simdev")
    target.copy_(device.t())
    assert same_bits(target.cpu(), host.t().contiguous())


def test_zero_dim_and_item():
    for value, dtype in [(3.5, torch.float32), (-7, torch.int64), (True, torch.bool), (2 + 3j, torch.complex64)]:
        d = torch.tensor(value, dtype=dtype).to("simdev")
        assert d.dim() == 0
        assert d.item() == value
        assert d.cpu().item() == value


@pytest.mark.parametrize("shape", [(0,), (0, 3), (4, 0, 2)])
def test_zero_size(shape):
    host = torch.empty(shape)
    device = host.to("simdev")
    assert device.shape == host.shape
    assert device.cpu().shape == host.shape
    assert (device + device).shape == host.shape
    assert device.sum().item() == 0


def test_non_contiguous_host_to_device():
    host = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    for view in (host.t(), host[:, 1::2], host[1:3], host.reshape(2, 3, 4).permute(2, 0, 1)):
        assert torch.equal(view.to("simdev").cpu(), view)


def test_non_contiguous_device_to_host():
    host = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    device = host.to("simdev")
    assert torch.equal(device.t().cpu(), host.t())
    assert torch.equal(device[:, 1::2].cpu(), host[:, 1::2])
    assert torch.equal(device[1:3, 2:].cpu(), host[1:3, 2:])
    target = torch.zeros(6, 4)
    target.copy_(device.t())
    assert torch.equal(target, host.t())
    # into a non-contiguous host view
    target = torch.zeros(6, 4).t()
    target.copy_(device)
    assert torch.equal(target, host)


def test_writes_into_device_views():
    device = torch.zeros(4, 6, device="simdev")
    device[1:3] = torch.ones(2, 6)
    device[:, 0] = torch.full((4,), 7.0)
    device.t()[5].copy_(torch.arange(4, dtype=torch.float32))
    expected = torch.zeros(4, 6)
    expected[1:3] = 1
    expected[:, 0] = 7
    expected.t()[5] = torch.arange(4, dtype=torch.float32)
    assert torch.equal(device.cpu(), expected)


def test_broadcasting_copy():
    device = torch.zeros(3, 4, device="simdev")
    device.copy_(torch.arange(4, dtype=torch.float32))
    assert torch.equal(device.cpu(), torch.arange(4, dtype=torch.float32).expand(3, 4))
    device.copy_(torch.tensor(2.0))
    assert torch.equal(device.cpu(), torch.full((3, 4), 2.0))


def test_copy_rejects_non_broadcastable_source():
    device = torch.zeros(3, 4, device="simdev")
    with pytest.raises(RuntimeError, match="does not broadcast"):
        device.copy_(torch.ones(5))


@pytest.mark.parametrize(
    "src_dtype,dst_dtype",
    [
        (torch.float32, torch.float64),
        (torch.float64, torch.float16),
        (torch.int64, torch.float32),
        (torch.float32, torch.int32),
        (torch.bool, torch.float32),
        (torch.float32, torch.bfloat16),
        (torch.complex64, torch.complex128),
        (torch.uint8, torch.int64),
    ],
    ids=str,
)
def test_dtype_converting_copies(src_dtype, dst_dtype):
    host = sample(src_dtype, (5, 3))
    expected = host.to(dst_dtype)
    # host -> device with conversion
    assert same_bits(host.to("simdev", dst_dtype).cpu(), expected)
    # device -> device with conversion
    assert same_bits(host.to("simdev").to(dst_dtype).cpu(), expected)
    # device -> host with conversion
    assert same_bits(host.to("simdev").to("cpu", dst_dtype), expected)


def test_conj_and_neg_views_are_materialized():
    host = torch.complex(torch.randn(4), torch.randn(4))
    device = host.to("simdev")
    assert torch.equal(device.conj().cpu(), host.conj())
    assert torch.equal(device.conj().to("simdev:0").cpu().resolve_conj(), host.conj().resolve_conj())
    target = torch.empty(4, dtype=torch.complex64, device="simdev")
    target.copy_(device.conj())
    assert torch.equal(target.cpu(), host.conj().resolve_conj())


def test_overlapping_copy_within_one_storage():
    device = torch.arange(8, dtype=torch.float32).to("simdev")
    device[4:].copy_(device[:4])
    assert torch.equal(device.cpu(), torch.tensor([0, 1, 2, 3, 0, 1, 2, 3], dtype=torch.float32))


def test_cross_device_copies(two_devices):
    d0, d1 = two_devices
    host = torch.randn(6, 7)
    on1 = host.to(d1)
    assert on1.device == d1
    on0 = on1.to(d0)
    assert on0.device == d0
    assert torch.equal(on0.cpu(), host)
    # non-contiguous and dtype-converting across devices
    assert torch.equal(on1.t().to(d0).cpu(), host.t())
    assert torch.equal(on1.to(d0, torch.float64).cpu(), host.double())
    target = torch.empty(7, 6, device=d0)
    target.copy_(on1.t())
    assert torch.equal(target.cpu(), host.t())


def test_a_copy_between_simdev_tensors_never_makes_the_host_wait(two_devices):
    """As on CUDA: copy_ without non_blocking waits only for a copy to or from
    the host; between device tensors (one device or two) it is ordered on the
    streams alone, so the host returns while the copy is still queued (delay
    on), and a reader on the same stream still sees the copied values."""
    d0, d1 = two_devices
    src, same, other = torch.arange(64.0).to(d0), torch.zeros(64, device=d0), torch.zeros(64, device=d1)
    torch.simdev.synchronize(0)
    torch.simdev.synchronize(1)
    torch.simdev.set_op_delay_us(20_000)
    try:
        for dst in (same, other):
            dst.copy_(src)
            assert not torch.accelerator.current_stream(dst.device).query(), \
                f"copy_ to {dst.device} waited for the copy on the host"
            assert torch.equal(dst.cpu(), torch.arange(64.0))  # to the host: waits, after the copy
    finally:
        torch.simdev.set_op_delay_us(0)


def test_storage_methods():
    host = torch.arange(5, dtype=torch.int32)
    device = host.to("simdev")
    storage = device.untyped_storage()
    assert storage.device == torch.device("simdev:0")
    assert storage.nbytes() == 20
    assert host.untyped_storage().simdev().device.type == "simdev"
    assert device.is_simdev and not host.is_simdev
