"""Convolution on simdev (csrc/ops/Convolution.cpp): forward and backward run
as stream-ordered host work and give the CPU's results; a convolution mixing
devices is refused, naming the argument and the fix."""

import time

import pytest
import torch
import torch.nn.functional as F

torch_simdev = pytest.importorskip(
    "torch_simdev", reason="torch_simdev is not installed; build it with: pip install --no-build-isolation plugins/simdev"
)

SIMDEV = torch.device("simdev:0")


def _randn(*shape, seed, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# name, functional, input shape, weight shape, bias?, keyword arguments
CASES = [
    ("conv1d", F.conv1d, (2, 4, 11), (6, 4, 3), True, dict(stride=2, padding=1)),
    ("conv1d_dilated_groups", F.conv1d, (2, 4, 13), (6, 2, 3), True, dict(padding=2, dilation=2, groups=2)),
    ("conv2d", F.conv2d, (2, 3, 7, 6), (5, 3, 3, 3), True, dict(stride=(2, 1), padding=(1, 2))),
    ("conv2d_no_bias", F.conv2d, (2, 3, 7, 6), (5, 3, 3, 2), False, dict(padding=1)),
    ("conv2d_groups_dilation", F.conv2d, (2, 4, 9, 8), (6, 2, 3, 3), True, dict(groups=2, dilation=(2, 1))),
    ("conv2d_depthwise", F.conv2d, (1, 4, 6, 6), (8, 1, 3, 3), True, dict(groups=4, padding=1)),
    ("conv3d", F.conv3d, (1, 2, 5, 4, 6), (4, 2, 3, 2, 3), True, dict(stride=(1, 2, 1), padding=1)),
    ("conv_transpose1d", F.conv_transpose1d, (2, 4, 7), (4, 3, 3), True, dict(stride=2, output_padding=1)),
    ("conv_transpose2d", F.conv_transpose2d, (2, 4, 5, 5), (4, 3, 3, 3), True,
     dict(stride=2, padding=1, output_padding=1)),
    ("conv_transpose2d_groups_no_bias", F.conv_transpose2d, (2, 4, 4, 5), (4, 2, 3, 2), False,
     dict(stride=(1, 2), groups=2, dilation=(2, 1))),
    ("conv_transpose3d", F.conv_transpose3d, (1, 2, 3, 4, 3), (2, 3, 2, 3, 2), True, dict(stride=2)),
]


def _leaf(t, device):
    return t.detach().to(device).requires_grad_(True)


@pytest.mark.parametrize("name, conv, input_shape, weight_shape, has_bias, kwargs", CASES, ids=[c[0] for c in CASES])
def test_forward_and_backward_match_the_cpu(name, conv, input_shape, weight_shape, has_bias, kwargs):
    x = _randn(*input_shape, seed=1)
    w = _randn(*weight_shape, seed=2)
    transposed = "transpose" in name
    out_channels = weight_shape[1] * kwargs.get("groups", 1) if transposed else weight_shape[0]
    b = _randn(out_channels, seed=3) if has_bias else None

    cpu = [_leaf(t, "cpu") for t in (x, w, b) if t is not None]
    dev = [_leaf(t, SIMDEV) for t in (x, w, b) if t is not None]
    expected = conv(*cpu, **kwargs)
    actual = conv(*dev, **kwargs)
    assert actual.device == SIMDEV and actual.shape == expected.shape and actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected.detach(), rtol=1e-6, atol=1e-6)

    grad = _randn(*expected.shape, seed=4)
    expected.backward(grad)
    actual.backward(grad.to(SIMDEV))
    for name_, c, d in zip(("input", "weight", "bias"), cpu, dev):
        assert d.grad is not None and d.grad.device == SIMDEV, name_
        torch.testing.assert_close(d.grad.cpu(), c.grad, rtol=1e-5, atol=1e-5, msg=lambda m: f"{name_}: {m}")


def test_float64_results_are_the_cpus_bit_for_bit():
    x, w, b = _randn(2, 3, 6, 5, seed=1, dtype=torch.float64), _randn(4, 3, 3, 3, seed=2, dtype=torch.float64), \
        _randn(4, seed=3, dtype=torch.float64)
    cpu = [_leaf(t, "cpu") for t in (x, w, b)]
    dev = [_leaf(t, SIMDEV) for t in (x, w, b)]
    expected, actual = F.conv2d(*cpu, padding=1), F.conv2d(*dev, padding=1)
    assert torch.equal(actual.cpu(), expected.detach())
    expected.sum().backward()
    actual.sum().backward()  # grad_output is an expanded (stride 0) tensor
    for c, d in zip(cpu, dev):
        assert torch.equal(d.grad.cpu(), c.grad)


@pytest.mark.parametrize("mask", [(True, True, True), (True, False, False), (False, True, False),
                                  (False, False, True), (False, True, True)], ids=str)
def test_backward_computes_what_the_output_mask_asks_for(mask):
    x, w, g = _randn(2, 3, 6, 6, seed=1), _randn(4, 3, 3, 3, seed=2), _randn(2, 4, 4, 4, seed=3)
    args = dict(bias_sizes=[4], stride=[1, 1], padding=[0, 0], dilation=[1, 1], transposed=False,
                output_padding=[0, 0], groups=1, output_mask=list(mask))
    expected = torch.ops.aten.convolution_backward(g, x, w, **args)
    actual = torch.ops.aten.convolution_backward(g.to(SIMDEV), x.to(SIMDEV), w.to(SIMDEV), **args)
    for wanted, a, e, what in zip(mask, actual, expected, ("grad_input", "grad_weight", "grad_bias")):
        if wanted:
            assert a.device == SIMDEV, what
            torch.testing.assert_close(a.cpu(), e, rtol=1e-5, atol=1e-5)
        else:
            assert a is None, what


def test_only_the_weight_gradient_when_the_input_needs_none():
    x, w = _randn(2, 3, 6, 6, seed=1), _randn(4, 3, 3, 3, seed=2)
    cpu_w, dev_w = _leaf(w, "cpu"), _leaf(w, SIMDEV)
    F.conv2d(x, cpu_w).square().sum().backward()
    F.conv2d(x.to(SIMDEV), dev_w).square().sum().backward()
    torch.testing.assert_close(dev_w.grad.cpu(), cpu_w.grad, rtol=1e-5, atol=1e-5)


def test_channels_last_and_non_contiguous_inputs():
    x = _randn(2, 3, 7, 7, seed=1).to(memory_format=torch.channels_last)
    w = _randn(4, 3, 3, 3, seed=2).to(memory_format=torch.channels_last)
    wide = _randn(2, 3, 7, 14, seed=3)[..., ::2]  # a strided view
    for inp in (x, wide):
        torch.testing.assert_close(F.conv2d(inp.to(SIMDEV), w.to(SIMDEV)).cpu(), F.conv2d(inp, w),
                                   rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(F.conv2d(wide.to(SIMDEV)[..., 1:], w.to(SIMDEV)).cpu(), F.conv2d(wide[..., 1:], w),
                               rtol=1e-6, atol=1e-6)


_CL = {4: torch.channels_last, 5: torch.channels_last_3d}


@pytest.mark.parametrize("dims,input_cl,weight_cl,dtype,cl_expected", [
    (2, False, False, torch.float32, False),
    (2, True, False, torch.float32, True),
    (2, False, True, torch.float32, True),
    (2, True, True, torch.float64, False),  # cuDNN keeps float64 contiguous
    (3, True, False, torch.float32, True),
    (3, False, False, torch.float32, False),
    (1, False, False, torch.float32, False),
])
def test_output_layouts_are_cudnns_and_what_fake_tensors_predict(dims, input_cl, weight_cl, dtype, cl_expected):
    """simdev's convolutions return cuDNN's layouts (channels-last results for
    channels-last inputs or weights) and declare that rule to torch.compile:
    compiled graphs assert the strides of extern kernels' outputs against what
    FakeTensor traced, so the real outputs must have exactly those."""
    pytest.importorskip("devbridge", reason="the layout declaration is made through devbridge")
    from torch._subclasses.fake_tensor import FakeTensorMode

    spatial = (7,) * dims
    x = _randn(2, 3, *spatial, seed=1).to(dtype)
    w = _randn(4, 3, *(3,) * dims, seed=2).to(dtype)
    if input_cl:
        x = x.to(memory_format=_CL[x.dim()])
    if weight_cl:
        w = w.to(memory_format=_CL[w.dim()])
    x, w = x.to(SIMDEV), w.to(SIMDEV)
    g = _randn(2, 4, *(5,) * dims, seed=3).to(dtype).to(SIMDEV)
    ones, zeros = [1] * dims, [0] * dims
    args = dict(bias_sizes=[4], stride=ones, padding=zeros, dilation=ones, transposed=False,
                output_padding=zeros, groups=1, output_mask=[True, True, True])
    real = [torch.ops.aten.convolution(x, w, None, ones, zeros, ones, False, zeros, 1),
            *torch.ops.aten.convolution_backward(g, x, w, **args)]
    with FakeTensorMode() as mode:
        fx, fw, fg = (mode.from_tensor(t) for t in (x, w, g))
        fake = [torch.ops.aten.convolution(fx, fw, None, ones, zeros, ones, False, zeros, 1),
                *torch.ops.aten.convolution_backward(fg, fx, fw, **args)]
    for r, f in zip(real, fake):
        assert (r.shape, r.stride(), r.device) == (f.shape, f.stride(), f.device)
    out, grad_input, grad_weight = real[:3]
    for t in (out, grad_input, grad_weight):
        assert t.is_contiguous(memory_format=_CL[t.dim()]) if cl_expected else t.is_contiguous(), t.stride()
    # The values do not depend on the layout.
    torch.testing.assert_close(out.cpu(), torch.ops.aten.convolution(x.cpu(), w.cpu(), None, ones, zeros, ones,
                                                                     False, zeros, 1), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------- asynchrony and stream order

def test_forward_and_backward_run_in_order_on_the_current_stream():
    """With every queued operation held up by the delay knob, on a side
    stream: the convolutions must read what fill_ wrote before them, and
    add_ must see their results. A convolution run on the calling thread (or
    on another stream) would read zeros or race with add_; one that waited
    for the stream would take the queue's time to return."""
    w = _randn(3, 2, 3, 3, seed=2)
    stream = torch.Stream(device=SIMDEV)
    with stream:
        x = torch.zeros(1, 2, 6, 6, device=SIMDEV)
        weight = w.to(SIMDEV).requires_grad_(True)
        torch.simdev.synchronize()
        with torch.simdev.op_delay(100_000):
            x.fill_(1.0)
            began = time.perf_counter()
            out = F.conv2d(x, weight, padding=1)
            returned_after = time.perf_counter() - began
            out.add_(1.0)
            assert not stream.query()
            assert torch.simdev.default_stream(0).query(), "convolution work went to the default stream"
            (out * out).sum().backward()
            del x  # the queued convolutions hold its memory
            result, grad = out.detach().cpu(), weight.grad.cpu()
    assert returned_after < 0.08, f"F.conv2d waited {returned_after:.3f}s for queued work"

    cpu_weight = w.clone().requires_grad_(True)
    expected = F.conv2d(torch.ones(1, 2, 6, 6), cpu_weight, padding=1) + 1.0
    (expected * expected).sum().backward()
    torch.testing.assert_close(result, expected.detach(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(grad, cpu_weight.grad, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------- refused calls

def test_a_cpu_weight_or_bias_is_refused_naming_it():
    x, w, b = _randn(1, 2, 5, 5, seed=1), _randn(3, 2, 3, 3, seed=2), _randn(3, seed=3)
    dx, dw, db = x.to(SIMDEV), w.to(SIMDEV), b.to(SIMDEV)
    with pytest.raises(RuntimeError, match=r"weight is on cpu and input on simdev:0; move weight there with "
                                           r"\.to\('simdev:0'\) \(a module's parameters with module\.to"):
        F.conv2d(dx, w)
    with pytest.raises(RuntimeError, match=r"bias is on cpu and input on simdev:0; move bias there"):
        F.conv2d(dx, dw, b)
    with pytest.raises(RuntimeError, match=r"weight is on cpu and input on simdev:0"):
        torch.nn.Conv1d(2, 3, 3)(_randn(1, 2, 5, seed=4).to(SIMDEV))


@pytest.mark.parametrize("conv, weight_shape", [(F.conv2d, (3, 2, 3, 3)), (F.conv_transpose2d, (2, 3, 3, 3)),
                                                 (F.conv1d, (3, 2, 3)), (F.conv3d, (3, 2, 1, 3, 3))],
                         ids=["conv2d", "conv_transpose2d", "conv1d", "conv3d"])
def test_a_cpu_input_with_simdev_parameters_is_refused(conv, weight_shape):
    """ATen would pick a CPU backend from the input alone and compute on the
    CPU through the fallback, quietly: simdev refuses it, as CUDA does."""
    x = _randn(1, 2, *([5] * (len(weight_shape) - 2)), seed=1)
    w = _randn(*weight_shape, seed=2).to(SIMDEV)
    with pytest.raises(RuntimeError, match=r"input is on cpu and weight on simdev:0; move input there with "
                                           r"\.to\('simdev:0'\)"):
        conv(x, w)


def test_another_simdev_device_is_refused(two_devices):
    first, second = two_devices
    x, w = _randn(1, 2, 5, 5, seed=1), _randn(3, 2, 3, 3, seed=2)
    with pytest.raises(RuntimeError, match=r"weight is on simdev:1 and input on simdev:0; move weight there with "
                                           r"\.to\('simdev:0'\)"):
        F.conv2d(x.to(first), w.to(second))
    with pytest.raises(RuntimeError, match=r"input is on simdev:0 and grad_output on simdev:1"):
        torch.ops.aten.convolution_backward(_randn(1, 3, 3, 3, seed=3).to(second), x.to(first), w.to(second),
                                            [3], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True])
    # The same call on one device (the second) works.
    out = F.conv2d(x.to(second), w.to(second))
    assert out.device == second
    torch.testing.assert_close(out.cpu(), F.conv2d(x, w), rtol=1e-6, atol=1e-6)


def test_a_cpu_grad_output_is_refused_in_the_backward():
    x, w, g = _randn(1, 2, 5, 5, seed=1).to(SIMDEV), _randn(3, 2, 3, 3, seed=2).to(SIMDEV), _randn(1, 3, 3, 3, seed=3)
    with pytest.raises(RuntimeError, match=r"grad_output is on cpu and input on simdev:0"):
        torch.ops.aten.convolution_backward(g, x, w, [3], [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
                                            [True, True, True])


def test_mixed_dtypes_and_bad_shapes_raise_at_the_call():
    """Raised on the calling thread: the stream is not failed by queued work."""
    x, w = _randn(1, 2, 5, 5, seed=1).to(SIMDEV), _randn(3, 2, 3, 3, seed=2).to(SIMDEV)
    with pytest.raises(RuntimeError, match=r"weight is Double and input is Float; convert one with \.to\(dtype\)"):
        F.conv2d(x, w.double())
    with pytest.raises(RuntimeError):  # 4 input channels expected by the weight, 2 given
        torch.ops.aten.convolution_overrideable(x, _randn(3, 4, 3, 3, seed=3).to(SIMDEV), None, [1, 1], [0, 0],
                                                [1, 1], False, [0, 0], 1)
    torch.simdev.synchronize()  # would raise a failure recorded by queued work
    torch.testing.assert_close(F.conv2d(x, w).cpu(), F.conv2d(x.cpu(), w.cpu()), rtol=1e-6, atol=1e-6)
