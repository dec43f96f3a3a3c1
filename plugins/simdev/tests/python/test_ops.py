"""Operators on simdev tensors give the CPU's results, and bad calls raise clearly."""

import pytest
import torch

torch_simdev = pytest.importorskip(
    "torch_simdev", reason="torch_simdev is not installed; build it with: pip install --no-build-isolation plugins/simdev"
)


def on_simdev(*tensors):
    return [t.to("simdev") for t in tensors]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32, torch.complex64], ids=str)
def test_binary_ops_match_cpu(dtype):
    a = (torch.randn(4, 5) * 10).to(dtype)
    b = (torch.randn(5) * 10).to(dtype)  # broadcast
    b = torch.where(b == 0, torch.ones_like(b), b)
    da, db = on_simdev(a, b)
    assert torch.equal((da + db).cpu(), a + b)
    assert torch.equal(torch.add(da, db, alpha=3).cpu(), torch.add(a, b, alpha=3))
    assert torch.equal((da - db).cpu(), a - b)
    assert torch.equal(torch.sub(da, db, alpha=2).cpu(), torch.sub(a, b, alpha=2))
    assert torch.equal((da * db).cpu(), a * b)
    torch.testing.assert_close((da / db).cpu(), a / b)


def test_type_promotion_and_scalar_operands():
    a = torch.arange(6).reshape(2, 3)  # int64
    da = a.to("simdev")
    for result, expected in [
        (da + 2, a + 2),
        (da * 2.5, a * 2.5),
        (da / 4, a / 4),
        (da + torch.tensor(1.5), a + torch.tensor(1.5)),  # CPU 0-dim tensor operand
        (da.float() + torch.tensor(2, dtype=torch.float64), a.float() + torch.tensor(2, dtype=torch.float64)),
        (2 - da, 2 - a),
    ]:
        assert result.device.type == "simdev"
        assert result.dtype == expected.dtype
        assert torch.equal(result.cpu(), expected)


def test_out_and_inplace_variants():
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    da, db = on_simdev(a, b)
    out = torch.empty(3, 4, device="simdev")
    torch.add(da, db, out=out)
    assert torch.equal(out.cpu(), a + b)
    torch.mul(da, db, out=out)
    assert torch.equal(out.cpu(), a * b)
    resized = torch.empty(0, device="simdev")
    torch.sub(da, db, out=resized)  # an empty out is resized, as on CPU
    assert resized.shape == (3, 4) and torch.equal(resized.cpu(), a - b)
    x = da.clone()
    x.add_(db).mul_(db).sub_(da).div_(db)
    torch.testing.assert_close(x.cpu(), ((a + b) * b - a) / b)
    y = da.clone()
    y.neg_()
    y.exp_()
    torch.testing.assert_close(y.cpu(), torch.exp(-a))
    torch.testing.assert_close(torch.neg(da).cpu(), -a)
    torch.testing.assert_close(torch.exp(da).cpu(), torch.exp(a))


def test_inplace_into_non_contiguous_view():
    a = torch.zeros(4, 6)
    da = a.to("simdev")
    da.t()[1:3].add_(torch.ones(2, 4, device="simdev"))
    a.t()[1:3].add_(torch.ones(2, 4))
    assert torch.equal(da.cpu(), a)


def test_fill_and_zero():
    d = torch.empty(3, 4, device="simdev")
    d.fill_(2.5)
    assert torch.equal(d.cpu(), torch.full((3, 4), 2.5))
    d[1].zero_()
    expected = torch.full((3, 4), 2.5)
    expected[1] = 0
    assert torch.equal(d.cpu(), expected)
    d.fill_(torch.tensor(4.0, device="simdev"))  # a device 0-dim value
    assert torch.equal(d.cpu(), torch.full((3, 4), 4.0))
    i = torch.empty(5, dtype=torch.int16, device="simdev").fill_(-3)
    assert torch.equal(i.cpu(), torch.full((5,), -3, dtype=torch.int16))
    assert torch.equal(torch.zeros(2, 2, device="simdev").cpu(), torch.zeros(2, 2))
    assert torch.equal(torch.ones(2, 2, dtype=torch.bool, device="simdev").cpu(), torch.ones(2, 2, dtype=torch.bool))


def test_fill_with_unrepresentable_value_raises_at_the_call():
    d = torch.empty(3, dtype=torch.uint8, device="simdev")
    with pytest.raises(RuntimeError, match="overflow"):
        d.fill_(300)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64], ids=str)
def test_reductions_match_cpu(dtype):
    a = (torch.randn(4, 5, 6) * 10).to(dtype)
    da = a.to("simdev")
    torch.testing.assert_close(da.sum().cpu(), a.sum())
    torch.testing.assert_close(da.sum(dim=1).cpu(), a.sum(dim=1))
    torch.testing.assert_close(da.sum(dim=(0, 2), keepdim=True).cpu(), a.sum(dim=(0, 2), keepdim=True))
    torch.testing.assert_close(da.sum(dtype=torch.float64).cpu(), a.sum(dtype=torch.float64))
    assert torch.equal(da.max().cpu(), a.max())
    if dtype.is_floating_point:
        torch.testing.assert_close(da.mean().cpu(), a.mean())
        torch.testing.assert_close(da.mean(dim=-1).cpu(), a.mean(dim=-1))
        out = torch.empty(0, dtype=dtype, device="simdev")
        torch.mean(da, dim=0, out=out)
        torch.testing.assert_close(out.cpu(), a.mean(dim=0))
    out = torch.empty(0, dtype=dtype, device="simdev")
    torch.sum(da, dim=2, out=out)
    torch.testing.assert_close(out.cpu(), a.sum(dim=2))
    assert da.sum().item() == pytest.approx(a.sum().item(), rel=1e-5)


def test_reduction_errors_are_raised_at_the_call():
    with pytest.raises(RuntimeError, match="numel\\(\\) == 0"):
        torch.empty(0, device="simdev").max()
    with pytest.raises(RuntimeError, match="mean"):
        torch.arange(4, device="simdev").mean()  # integer mean is an error on CPU too


def test_cpu_fallback_ops():
    a = torch.randn(5, 7)
    da = a.to("simdev")
    values, indices = torch.sort(da, dim=1)
    expected_values, expected_indices = torch.sort(a, dim=1)
    assert values.device.type == "simdev" and indices.device.type == "simdev"
    assert torch.equal(values.cpu(), expected_values)
    assert torch.equal(indices.cpu(), expected_indices)
    torch.testing.assert_close(torch.cumsum(da, dim=0).cpu(), torch.cumsum(a, dim=0))
    torch.testing.assert_close((da @ da.t()).cpu(), a @ a.t())
    assert torch.equal((da > 0).cpu(), a > 0)
    # fallback on a result of async ops: sees their data (the fallback's D2H copy waits)
    with torch.simdev.op_delay(5000):
        doubled = da * 2
        torch.testing.assert_close(torch.cumsum(doubled, dim=1).cpu(), torch.cumsum(a * 2, dim=1))


@pytest.mark.parametrize("loss", ["mse_loss", "smooth_l1_loss"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses_match_cpu_without_a_resize_warning(loss, reduction, recwarn):
    # torch's composite kernel for these ran the out= fallback into a 0-dim
    # result that the kernel's meta first resized (see ops/Fallback.cpp)
    fn = getattr(torch.nn.functional, loss)
    a, b = torch.randn(8, 4), torch.randn(8, 4)
    da, db = on_simdev(a, b)
    da.requires_grad_()
    a.requires_grad_()
    result, expected = fn(da, db, reduction=reduction), fn(a, b, reduction=reduction)
    assert result.device.type == "simdev" and result.shape == expected.shape
    torch.testing.assert_close(result.cpu(), expected)
    result.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(da.grad.cpu(), a.grad)
    assert not [w for w in recwarn if "resized" in str(w.message)], [str(w.message) for w in recwarn]


def test_random_ops_and_seeding():
    torch.manual_seed(123)
    first = torch.randn(8, device="simdev").cpu()
    torch.manual_seed(123)
    second = torch.randn(8, device="simdev").cpu()
    assert torch.equal(first, second)


def test_printing():
    text = repr(torch.tensor([[1.5, -2.0], [3.25, 4.0]]).to("simdev"))
    assert "device='simdev:0'" in text
    assert "1.5000" in text and "-2.0000" in text and "3.2500" in text
    assert "device='simdev:0'" in repr(torch.arange(3, device="simdev"))
    assert "tensor([], device='simdev:0')" == repr(torch.empty(0, device="simdev"))
    if torch.simdev.device_count() > 1:
        assert "device='simdev:1'" in str(torch.ones(2, device="simdev:1"))


def test_views_and_reshapes():
    a = torch.arange(24, dtype=torch.float32)
    da = a.to("simdev")
    assert torch.equal(da.view(4, 6).cpu(), a.view(4, 6))
    assert torch.equal(da.reshape(2, 3, 4).permute(2, 0, 1).reshape(4, 6).cpu(), a.reshape(2, 3, 4).permute(2, 0, 1).reshape(4, 6))
    assert torch.equal(da.view(4, 6)[:, 2].cpu(), a.view(4, 6)[:, 2])
    assert torch.equal(da.as_strided((3, 3), (1, 3), 2).cpu(), a.as_strided((3, 3), (1, 3), 2))
    assert torch.equal(da.view(torch.int32).cpu(), a.view(torch.int32))


def test_resize_keeps_data_in_stream_order():
    d = torch.ones(4, device="simdev")
    with torch.simdev.op_delay(20000):
        d.add_(1)  # queued, not yet run
        d.resize_(1000)  # grows the storage: the old bytes are copied after add_
    assert d.shape == (1000,)
    assert torch.equal(d[:4].cpu(), torch.full((4,), 2.0))


def test_storage_resize():
    d = torch.arange(4, dtype=torch.float32, device="simdev")
    storage = d.untyped_storage()
    storage.resize_(32)
    assert storage.nbytes() == 32
    assert torch.equal(d.cpu(), torch.arange(4, dtype=torch.float32))


def test_set_variants():
    source = torch.arange(10, dtype=torch.float32, device="simdev")
    t = torch.empty(0, device="simdev")
    t.set_(source.untyped_storage(), 2, (2, 3), (3, 1))
    assert torch.equal(t.cpu(), torch.arange(10, dtype=torch.float32).as_strided((2, 3), (3, 1), 2))
    u = torch.empty(0, device="simdev").set_(source)
    assert u.data_ptr() == source.data_ptr() and torch.equal(u.cpu(), source.cpu())
    v = torch.empty(0, device="simdev").set_(source.untyped_storage())
    assert v.shape == (10,)
    with pytest.raises(RuntimeError, match="type"):
        torch.empty(0, dtype=torch.int64, device="simdev").set_(source)


def test_cross_device_operands_are_rejected(two_devices):
    d0, d1 = two_devices
    a, b = torch.ones(3, device=d0), torch.ones(3, device=d1)
    with pytest.raises(RuntimeError, match=r"expected all tensors on the same device, but other is on simdev:1 and "
                                           r"self on simdev:0; move other there with \.to\('simdev:0'\)"):
        a + b
    with pytest.raises(RuntimeError, match="other is on simdev:1 and self on simdev:0"):
        a.add_(b)
    with pytest.raises(RuntimeError, match="out is on simdev:1 and self on simdev:0"):
        torch.mul(a, a, out=torch.empty(3, device=d1))


def test_cpu_tensor_operand_is_rejected():
    a = torch.ones(3, device="simdev")
    with pytest.raises(RuntimeError, match="other is on cpu and self on simdev:0"):
        a + torch.ones(3)
    with pytest.raises(RuntimeError, match="out is on cpu and self on simdev:0"):
        torch.add(a, a, out=torch.empty(3))


def test_bad_arguments_raise_at_the_call_not_later():
    a = torch.ones(3, device="simdev")
    with pytest.raises(RuntimeError, match="must match the size"):
        a + torch.ones(4, device="simdev")
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.arange(3, device="simdev").add_(a)  # float into int64 in place
    torch.simdev.synchronize()  # nothing failed on the stream


def test_failed_host_work_is_reported_at_the_next_synchronization():
    torch_simdev._C._enqueue_failure("deliberate failure for the test")
    with pytest.raises(RuntimeError, match="deliberate failure for the test"):
        torch.simdev.synchronize()
    torch.simdev.synchronize()  # reported once, then the stream is usable again
    assert torch.equal((torch.ones(2, device="simdev") + 1).cpu(), torch.full((2,), 2.0))
