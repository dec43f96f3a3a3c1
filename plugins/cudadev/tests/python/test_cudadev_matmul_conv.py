"""The operators cudadev registers itself instead of running them through its
boxed fallback: the matrix products (csrc/matmul.cpp) and the convolutions
(csrc/convolution.cpp). They give what torch.cuda gives for the same inputs
(values, dtype, shape, strides), in their out= and in-place forms too, run on
the current cudadev stream, reject tensors of other devices by name, and
carry a small conv net through torch.compile, forward and backward.

torch.cuda references are computed without autograd: torch.cuda's backward
beside a PrivateUse1 backend trips PyTorch's autograd engine (see
test_cudadev_ops.py), so reference gradients come from
torch.ops.aten.convolution_backward or from the CPU."""

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.gpu

DEVICES = ("cudadev", "cuda")
TIGHT = dict(rtol=1e-5, atol=1e-5)
SLEEP_MS = 200


@pytest.fixture(autouse=True)
def full_float32():
    """Both backends (and the CPU references) compute in full float32, not
    TF32, so that results can be compared tightly."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def host(*shape, seed, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator).to(dtype)


def laid_out(shape, layout, seed, device, dtype=torch.float32):
    """A tensor of `shape` on `device` (the same values for the same seed on
    every device), with the memory layout `layout`."""
    if layout == "contiguous":
        return host(*shape, seed=seed, dtype=dtype).to(device)
    if layout == "transposed":  # the last two dimensions swapped in memory
        swapped = (*shape[:-2], shape[-1], shape[-2])
        return host(*swapped, seed=seed, dtype=dtype).to(device).transpose(-1, -2)
    if layout == "strided":  # every other column of a wider tensor
        wider = (*shape[:-1], 2 * shape[-1])
        return host(*wider, seed=seed, dtype=dtype).to(device)[..., ::2]
    if layout == "broadcast":  # batch dimension of stride 0
        return host(1, *shape[1:], seed=seed, dtype=dtype).to(device).expand(*shape)
    raise ValueError(layout)


def check_like_cuda(result, expected, **tolerance):
    assert result.device.type == "cudadev", result.device
    assert expected.device.type == "cuda", expected.device
    assert (result.dtype, result.shape, result.stride()) == (
        expected.dtype,
        expected.shape,
        expected.stride(),
    )
    torch.testing.assert_close(result.cpu(), expected.cpu(), **(tolerance or TIGHT))


# ------------------------------------------------------------ matrix products

# (name, operand shapes, call); operands are (self/mat1/batch1..., in order).
PRODUCTS = {
    "mm": ([(33, 20), (20, 17)], lambda a, b: torch.mm(a, b)),
    "addmm": (
        [(17,), (33, 20), (20, 17)],
        lambda bias, a, b: torch.addmm(bias, a, b, beta=0.5, alpha=2.0),
    ),
    "addmm_full_self": ([(33, 17), (33, 20), (20, 17)], lambda c, a, b: torch.addmm(c, a, b)),
    "bmm": ([(4, 33, 20), (4, 20, 17)], lambda a, b: torch.bmm(a, b)),
    "baddbmm": (
        [(4, 33, 17), (4, 33, 20), (4, 20, 17)],
        lambda c, a, b: torch.baddbmm(c, a, b, beta=0.5, alpha=2.0),
    ),
}

# What each product's out= tensor is compared against, and its call.
OUT_CALLS = {
    "mm": lambda out, a, b: torch.mm(a, b, out=out),
    "addmm": lambda out, bias, a, b: torch.addmm(bias, a, b, beta=0.5, alpha=2.0, out=out),
    "addmm_full_self": lambda out, c, a, b: torch.addmm(c, a, b, out=out),
    "bmm": lambda out, a, b: torch.bmm(a, b, out=out),
    "baddbmm": lambda out, c, a, b: torch.baddbmm(c, a, b, beta=0.5, alpha=2.0, out=out),
}


def operands(name, layouts, device, dtype=torch.float32):
    shapes, _ = PRODUCTS[name]
    # Layouts apply to the two factors (the last two operands); self stays contiguous.
    layouts = ("contiguous",) * (len(shapes) - 2) + tuple(layouts)
    return [
        laid_out(shape, layout, seed=i, device=device, dtype=dtype)
        for i, (shape, layout) in enumerate(zip(shapes, layouts))
    ]


LAYOUT_PAIRS = [
    ("contiguous", "contiguous"),
    ("transposed", "contiguous"),
    ("contiguous", "transposed"),
    ("transposed", "transposed"),
    ("strided", "strided"),
]


@pytest.mark.parametrize("layouts", LAYOUT_PAIRS, ids="-".join)
@pytest.mark.parametrize("name", PRODUCTS)
def test_product_matches_cuda(name, layouts):
    _, call = PRODUCTS[name]
    result = call(*operands(name, layouts, "cudadev"))
    check_like_cuda(result, call(*operands(name, layouts, "cuda")))


@pytest.mark.parametrize("name", ["bmm", "baddbmm"])
def test_batched_product_of_a_broadcast_operand_matches_cuda(name):
    _, call = PRODUCTS[name]
    result = call(*operands(name, ("broadcast", "contiguous"), "cudadev"))
    check_like_cuda(result, call(*operands(name, ("broadcast", "contiguous"), "cuda")))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", PRODUCTS)
def test_product_in_half_precision_matches_cuda(name, dtype):
    _, call = PRODUCTS[name]
    result = call(*operands(name, ("contiguous", "transposed"), "cudadev", dtype))
    expected = call(*operands(name, ("contiguous", "transposed"), "cuda", dtype))
    check_like_cuda(result, expected, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize(
    "shapes",
    [((0, 5), (5, 3)), ((3, 0), (0, 4)), ((3, 5), (5, 0))],
    ids=["no-rows", "no-inner", "no-columns"],
)
def test_empty_products_match_cuda(shapes):
    # A zero inner dimension still gives zeros of the full shape.
    results = {}
    for device in DEVICES:
        a, b = (host(*shape, seed=i).to(device) for i, shape in enumerate(shapes))
        results[device] = (torch.mm(a, b), torch.addmm(torch.ones(shapes[1][1], device=device), a, b))
    for result, expected in zip(results["cudadev"], results["cuda"]):
        check_like_cuda(result, expected)


def test_one_tensor_in_several_arguments_matches_cuda():
    results = {}
    for device in DEVICES:
        a = host(24, 24, seed=3).to(device)
        results[device] = (torch.mm(a, a), torch.mm(a, a.t()), torch.addmm(a, a, a), torch.bmm(a[None], a[None]))
    for result, expected in zip(results["cudadev"], results["cuda"]):
        check_like_cuda(result, expected)


def out_tensor(kind, shape, device):
    if kind == "exact":
        return torch.full(shape, float("nan"), device=device)
    if kind == "transposed":  # the right shape, column-major: written through, not replaced
        swapped = (*shape[:-2], shape[-1], shape[-2])
        return torch.full(swapped, float("nan"), device=device).transpose(-1, -2)
    if kind == "empty":  # resized by the kernel to the result's shape
        return torch.empty(0, device=device)
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["exact", "transposed", "empty"])
@pytest.mark.parametrize("name", PRODUCTS)
def test_out_variant_matches_cuda(name, kind):
    _, call = PRODUCTS[name]
    shape = call(*operands(name, LAYOUT_PAIRS[0], "cpu")).shape
    outs = {}
    for device in DEVICES:
        out = out_tensor(kind, shape, device)
        storage = out.untyped_storage().data_ptr()
        result = OUT_CALLS[name](out, *operands(name, ("transposed", "contiguous"), device))
        assert result is out
        if kind != "empty":
            assert out.untyped_storage().data_ptr() == storage, "the out= tensor was given other memory"
        outs[device] = out
    check_like_cuda(outs["cudadev"], outs["cuda"])


@pytest.mark.parametrize("self_layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("name", ["addmm_", "baddbmm_"])
def test_in_place_product_matches_cuda(name, self_layout):
    results = {}
    for device in DEVICES:
        if name == "addmm_":
            c = laid_out((33, 17), self_layout, seed=0, device=device)
            a, b = host(33, 20, seed=1).to(device), host(20, 17, seed=2).to(device)
            result = c.addmm_(a, b, beta=0.5, alpha=2.0)
        else:
            c = laid_out((4, 33, 17), self_layout, seed=0, device=device)
            a, b = host(4, 33, 20, seed=1).to(device), host(4, 20, 17, seed=2).to(device)
            result = c.baddbmm_(a, b, beta=0.5, alpha=2.0)
        assert result is c
        results[device] = c
    check_like_cuda(results["cudadev"], results["cuda"])


def test_products_keep_cudas_errors():
    a = torch.ones(3, 4, device="cudadev")
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(3x4 and 3x4\)"):
        torch.mm(a, a)
    with pytest.raises(RuntimeError, match="self must be a matrix"):
        torch.mm(a[0], a)
    with pytest.raises(RuntimeError, match="batch1 must be a 3D tensor"):
        torch.bmm(a, a.t())
    with pytest.raises(RuntimeError, match="same dtype|expected"):
        torch.mm(a, a.t().double())


def test_products_are_cudadevs_own_kernels_not_the_fallback():
    key = torch._C.DispatchKey.PrivateUse1
    direct = [
        "aten::mm", "aten::mm.out", "aten::addmm", "aten::addmm.out", "aten::addmm_",
        "aten::bmm", "aten::bmm.out", "aten::baddbmm", "aten::baddbmm.out", "aten::baddbmm_",
        "aten::convolution_overrideable", "aten::convolution_backward_overrideable",
    ]  # fmt: skip
    missing = [name for name in direct if not torch._C._dispatch_has_kernel_for_dispatch_key(name, key)]
    assert not missing, f"served by the boxed fallback (or not at all): {missing}"
    # The query tells the two apart: sin runs through the fallback.
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("aten::sin", key)


def test_functional_results_come_from_cudadevs_allocator():
    a = host(64, 64, seed=0).to("cudadev")
    calls = [
        lambda: torch.mm(a, a),
        lambda: torch.addmm(a, a, a),
        lambda: torch.bmm(a[None], a[None]),
        lambda: torch.baddbmm(a[None], a[None], a[None]),
    ]
    for call in calls:
        call()  # cuBLAS's setup, whatever it allocates, happens here

    def own_allocations():
        return torch.accelerator.memory_stats(0)["num_device_alloc"]

    torch.cudadev.empty_cache()  # each result then needs a block of its own from the pool
    before = own_allocations()
    results = [call() for call in calls]
    assert own_allocations() == before + len(results)
    del results


# ------------------------------------------------------------- stream order


def ordered_after_the_sleep(stream, prepare, run, read):
    """Queues on `stream`: a sleep, `prepare()` (writes the inputs), `run()`.
    Returns what `read(result)` gives on the default stream right away (before
    the sleep ends) and what it gives on `stream` afterwards."""
    with stream:  # CUDA libraries' first use of a stream may synchronize: not in the timed part
        read(run())
    stream.synchronize()
    torch.cudadev.synchronize()
    with stream:
        torch.cudadev._sleep_on_current_stream(SLEEP_MS)
        prepare()
        result = run()
    early = read(result)
    with stream:
        late = read(result)
    return early, late


N = 2048


def pinned_reader(shape):
    host_buffer = torch.empty(shape, pin_memory=True)

    def read(tensor):
        # Asynchronous copy on the current stream, then a wait for that stream only.
        host_buffer.copy_(tensor, non_blocking=True)
        torch.accelerator.current_stream().synchronize()
        return host_buffer.clone()

    return read


@pytest.mark.parametrize("name", ["mm", "addmm", "bmm", "baddbmm", "addmm_"])
def test_products_run_on_the_current_cudadev_stream(name):
    batched = name in ("bmm", "baddbmm")
    shape = (2, N // 2, N // 2) if batched else (N, N)
    a = torch.zeros(shape, device="cudadev")
    out = torch.zeros(shape, device="cudadev")
    stream = torch.Stream(device="cudadev")
    run = {
        "mm": lambda: torch.mm(a, a, out=out),
        "addmm": lambda: torch.addmm(a, a, a, out=out),
        "bmm": lambda: torch.bmm(a, a, out=out),
        "baddbmm": lambda: torch.baddbmm(a, a, a, out=out),
        "addmm_": lambda: out.copy_(a).addmm_(a, a),
    }[name]
    inner = shape[-1]
    early, late = ordered_after_the_sleep(stream, lambda: a.fill_(1.0), run, pinned_reader(shape))
    expected = inner if name in ("mm", "bmm") else inner + 1
    assert torch.all(early == 0), "the product did not wait on the current cudadev stream"
    assert torch.all(late == expected), "the product ran before the inputs were written"


def test_functional_product_is_allocated_and_computed_on_the_current_stream():
    a = torch.zeros(N, N, device="cudadev")
    stream = torch.Stream(device="cudadev")
    _, late = ordered_after_the_sleep(stream, lambda: a.fill_(1.0), lambda: a @ a, pinned_reader((N, N)))
    assert torch.all(late == N)


def test_convolution_forward_and_backward_run_on_the_current_cudadev_stream():
    x = torch.zeros(8, 16, 64, 64, device="cudadev")
    w = torch.zeros(16, 16, 3, 3, device="cudadev")
    stream = torch.Stream(device="cudadev")

    def write():
        x.fill_(1.0)
        w.fill_(1.0)

    def run():
        y = F.conv2d(x, w, padding=1)
        grad_input, grad_weight, grad_bias = torch.ops.aten.convolution_backward(
            torch.ones_like(y), x, w, [16], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True]
        )
        return torch.stack([y.sum(), grad_input.sum(), grad_weight.sum(), grad_bias.sum()])

    _, late = ordered_after_the_sleep(stream, write, run, pinned_reader((4,)))
    # With all-ones tensors, y, grad_input and grad_weight all sum to the
    # number of (output position, input position) pairs the kernel connects;
    # grad_bias sums the ones of grad_output. A convolution on another stream
    # would have read the zeros from before the sleep.
    pairs = F.conv2d(torch.ones(8, 16, 64, 64), torch.ones(16, 16, 3, 3), padding=1).sum()
    reference = torch.stack([pairs, pairs, pairs, torch.tensor(8 * 16 * 64 * 64.0)])
    torch.testing.assert_close(late, reference, rtol=1e-5, atol=0)


# ------------------------------------------------------------ device errors


def test_a_cpu_tensor_in_a_product_is_named_with_the_fix():
    a = torch.ones(4, 4, device="cudadev")
    cpu = torch.ones(4, 4)
    cases = [
        (lambda: torch.mm(a, cpu), r"aten::mm got mat2 on cpu and self on cudadev:0.*mat2\.to\('cudadev:0'\)"),
        (lambda: torch.mm(cpu, a), r"aten::mm got self on cpu and mat2 on cudadev:0.*self\.to\('cudadev:0'\)"),
        (lambda: torch.addmm(torch.ones(4), a, a), r"aten::addmm got self on cpu.*self\.to\('cudadev:0'\)"),
        (lambda: torch.mm(a, a, out=cpu), r"aten::mm\.out got out on cpu.*out\.to\('cudadev:0'\)"),
        (lambda: torch.bmm(a[None], cpu[None]), r"aten::bmm got mat2 on cpu"),
        (lambda: torch.baddbmm(a[None], a[None], cpu[None]), r"aten::baddbmm got batch2 on cpu"),
        (lambda: a.addmm_(cpu, a), r"aten::addmm_ got mat1 on cpu"),
    ]
    for call, message in cases:
        with pytest.raises(RuntimeError, match=message):
            call()


def test_a_torch_cuda_tensor_in_a_product_is_named_with_the_fix():
    a = torch.ones(4, 4, device="cudadev")
    b = torch.ones(4, 4, device="cuda")
    with pytest.raises(RuntimeError, match=r"aten::mm got mat2 on cuda:0 .*would race.*mat2\.to\('cudadev:0'\)"):
        torch.mm(a, b)
    with pytest.raises(RuntimeError, match=r"aten::baddbmm\.out got out on cuda:0"):
        torch.baddbmm(a[None], a[None], a[None], out=b[None])


def test_a_convolution_with_another_devices_weight_or_bias_is_named_with_the_fix():
    x = torch.ones(1, 2, 5, 5, device="cudadev")
    w = torch.ones(3, 2, 3, 3, device="cudadev")
    with pytest.raises(
        RuntimeError,
        match=r"aten::convolution_overrideable got weight on cpu and input on cudadev:0.*weight\.to\('cudadev:0'\)",
    ):
        F.conv2d(x, w.cpu())
    with pytest.raises(RuntimeError, match=r"aten::convolution_overrideable got bias on cuda:0"):
        F.conv2d(x, w, torch.ones(3, device="cuda"))
    with pytest.raises(RuntimeError, match=r"aten::convolution_backward_overrideable got grad_output on cpu"):
        torch.ops.aten.convolution_backward(
            torch.ones(1, 3, 3, 3), x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, False]
        )


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_two_cudadev_devices_in_one_product_is_an_error_and_the_tensors_device_is_used():
    a = torch.ones(4, 4, device="cudadev:0")
    b = torch.ones(4, 4, device="cudadev:1")
    with pytest.raises(RuntimeError, match=r"aten::mm got mat2 on cudadev:1 and self on cudadev:0.*one device"):
        torch.mm(a, b)
    with pytest.raises(RuntimeError, match=r"convolution_overrideable got weight on cudadev:1"):
        F.conv2d(torch.ones(1, 4, 4, 4, device="cudadev:0"), torch.ones(4, 4, 1, 1, device="cudadev:1"))
    with torch.cudadev.device(1):  # the tensors' device wins over the current one
        c = torch.mm(a, a)
        y = F.conv2d(a[None, None], a[None, None])
    assert c.device == torch.device("cudadev:0") and y.device == torch.device("cudadev:0")
    assert torch.all(c.cpu() == 4) and torch.all(y.cpu() == 16)


# ------------------------------------------------------------- convolutions

# torch.convolution's arguments after input and weight:
# (input shape, weight shape, bias, stride, padding, dilation, transposed, output_padding, groups)
CONVOLUTIONS = {
    "1d": ((2, 4, 33), (6, 4, 5), True, [2], [1], [1], False, [0], 1),
    "2d": ((2, 4, 17, 19), (8, 4, 3, 3), True, [1, 2], [1, 0], [2, 1], False, [0, 0], 1),
    "2d_groups_no_bias": ((2, 8, 16, 16), (12, 4, 3, 3), False, [1, 1], [1, 1], [1, 1], False, [0, 0], 2),
    "2d_depthwise": ((2, 8, 16, 16), (8, 1, 3, 3), True, [1, 1], [1, 1], [1, 1], False, [0, 0], 8),
    "3d": ((1, 3, 6, 8, 8), (4, 3, 3, 3, 3), True, [1, 1, 1], [1, 1, 1], [1, 1, 1], False, [0, 0, 0], 1),
    "transposed_1d": ((2, 4, 9), (4, 3, 3), True, [2], [1], [1], True, [1], 1),
    "transposed_2d": ((2, 6, 7, 9), (6, 4, 3, 3), True, [2, 2], [1, 1], [1, 1], True, [1, 1], 1),
    "transposed_2d_groups_dilated_no_bias": (
        (2, 6, 7, 9), (6, 2, 3, 3), False, [2, 1], [0, 1], [2, 2], True, [1, 0], 3,
    ),
    "transposed_3d": ((1, 4, 3, 4, 4), (4, 2, 3, 3, 3), True, [2, 2, 2], [1, 1, 1], [1, 1, 1], True, [1, 0, 1], 1),
}  # fmt: skip


def convolution_arguments(name, device, channels_last=False):
    x_shape, w_shape, has_bias, stride, padding, dilation, transposed, output_padding, groups = CONVOLUTIONS[name]
    x = host(*x_shape, seed=1).to(device)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    w = host(*w_shape, seed=2).to(device)
    out_channels = w_shape[1] * groups if transposed else w_shape[0]
    bias = host(out_channels, seed=3).to(device) if has_bias else None
    return x, w, bias, (stride, padding, dilation, transposed, output_padding, groups)


@pytest.mark.parametrize("name", CONVOLUTIONS)
def test_convolution_matches_cuda(name):
    results = {}
    for device in DEVICES:
        x, w, bias, params = convolution_arguments(name, device)
        results[device] = torch.convolution(x, w, bias, *params)
    check_like_cuda(results["cudadev"], results["cuda"])


def test_channels_last_convolution_matches_cuda():
    results = {}
    for device in DEVICES:
        x, w, bias, params = convolution_arguments("2d", device, channels_last=True)
        results[device] = torch.convolution(x, w, bias, *params)
    torch.testing.assert_close(results["cudadev"].cpu(), results["cuda"].cpu())


@pytest.mark.parametrize("channels_last", ["input", "weight", "both"])
def test_results_have_cudnns_memory_format_which_torch_compile_predicts(channels_last):
    """cudadev's convolutions return cuDNN's layouts, as torch.cuda's do:
    channels-last results for a channels-last input or weight. cudadev
    declares that rule to torch.compile (devbridge.inductor.
    declare_convolution_format), so FakeTensor predicts exactly these
    strides, which compiled graphs assert; without the declaration torch
    predicts contiguous results for every PrivateUse1 convolution."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    outputs, arguments = {}, {}
    for device in DEVICES:
        x, w, bias, params = convolution_arguments("2d", device)
        if channels_last in ("input", "both"):
            x = x.contiguous(memory_format=torch.channels_last)
        if channels_last in ("weight", "both"):
            w = w.contiguous(memory_format=torch.channels_last)
        arguments[device] = x, w, bias
        outputs[device] = torch.convolution(x, w, bias, *params)
    out = outputs["cudadev"]
    assert out.is_contiguous(memory_format=torch.channels_last), out.stride()
    assert out.stride() == outputs["cuda"].stride()
    x, w, bias = arguments["cudadev"]
    grads = torch.ops.aten.convolution_backward(torch.ones_like(out), x, w, [w.shape[0]], *params,
                                                [True, True, False])
    with FakeTensorMode() as mode:
        fx, fw, fb = (mode.from_tensor(t) for t in (x, w, bias))
        fake = torch.convolution(fx, fw, fb, *params)
        fake_grads = torch.ops.aten.convolution_backward(torch.ones_like(fake), fx, fw, [w.shape[0]], *params,
                                                         [True, True, False])
    assert fake.stride() == out.stride()
    assert (fake_grads[0].stride(), fake_grads[1].stride()) == (grads[0].stride(), grads[1].stride())
    expected = torch.convolution(x.cpu().double(), w.cpu().double(), bias.cpu().double(), *params)
    torch.testing.assert_close(out.cpu().double(), expected, atol=1e-4, rtol=1e-4)


MASKS = [(True, True, True), (True, False, False), (False, True, True), (False, False, True)]


@pytest.mark.parametrize("mask", MASKS, ids=lambda m: "".join("IWB"[i] if m[i] else "-" for i in range(3)))
@pytest.mark.parametrize("name", CONVOLUTIONS)
def test_convolution_backward_matches_cuda(name, mask):
    results = {}
    for device in DEVICES:
        x, w, bias, params = convolution_arguments(name, device)
        stride, padding, dilation, transposed, output_padding, groups = params
        y_shape = torch.convolution(x.cpu(), w.cpu(), None, *params).shape
        grad_output = host(*y_shape, seed=4).to(device)
        bias_sizes = [bias.shape[0]] if bias is not None else None
        results[device] = torch.ops.aten.convolution_backward(
            grad_output, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, list(mask)
        )
    for wanted, result, expected in zip(mask, results["cudadev"], results["cuda"]):
        if wanted:
            check_like_cuda(result, expected, rtol=1e-4, atol=1e-4)
        else:  # what a backend returns for a gradient not asked for is its own affair; cudadev's is cuda's
            assert (result is None) == (expected is None)


@pytest.mark.parametrize("name", ["1d", "2d_groups_no_bias", "transposed_2d"])
def test_convolution_autograd_on_cudadev_matches_cudas_backward(name):
    x, w, bias, params = convolution_arguments(name, "cudadev")
    stride, padding, dilation, transposed, output_padding, groups = params
    leaves = [t.requires_grad_() for t in (x, w, bias) if t is not None]
    y = torch.convolution(x, w, bias, *params)
    grad_output = host(*y.shape, seed=4)
    y.backward(grad_output.to("cudadev"))

    cx, cw = x.detach().to("cuda"), w.detach().to("cuda")
    bias_sizes = [bias.shape[0]] if bias is not None else None
    expected = torch.ops.aten.convolution_backward(
        grad_output.to("cuda"), cx, cw, bias_sizes, stride, padding, dilation, transposed, output_padding, groups,
        [True, True, bias is not None],
    )  # fmt: skip
    for leaf, reference in zip(leaves, expected):
        check_like_cuda(leaf.grad, reference, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------ torch.compile, training


class SmallConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2, bias=False)
        self.up = torch.nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        self.head = torch.nn.Linear(4 * 16 * 16, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        x = torch.tanh(self.up(x))
        return self.head(x.flatten(1))


def test_compiled_conv_net_forward_and_backward(tmp_path, monkeypatch):
    pytest.importorskip("triton", reason="triton is not installed")
    inductor = pytest.importorskip("devbridge.inductor")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    inductor.register()
    torch._dynamo.reset()

    torch.manual_seed(0)
    model = SmallConvNet()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    x = host(4, 3, 16, 16, seed=5)
    target = host(4, 10, seed=6)

    on_plugin = SmallConvNet().to("cudadev")
    on_plugin.load_state_dict(state)
    compiled = torch.compile(on_plugin, fullgraph=True)
    out = compiled(x.to("cudadev"))
    F.mse_loss(out, target.to("cudadev")).backward()

    on_cuda = SmallConvNet().to("cuda")
    on_cuda.load_state_dict(state)
    with torch.no_grad():
        expected = on_cuda(x.to("cuda"))
    assert out.device.type == "cudadev"
    torch.testing.assert_close(out.detach().cpu(), expected.cpu(), rtol=1e-4, atol=1e-4)

    on_cpu = SmallConvNet().double()
    on_cpu.load_state_dict({k: v.double() for k, v in state.items()})
    F.mse_loss(on_cpu(x.double()), target.double()).backward()
    for (name, p), reference in zip(on_plugin.named_parameters(), on_cpu.parameters()):
        assert p.grad is not None and p.grad.device.type == "cudadev", name
        torch.testing.assert_close(p.grad.cpu().double(), reference.grad, rtol=1e-3, atol=1e-4, msg=name)
    torch._dynamo.reset()
