"""torch's multi-tensor operators (_foreach_*) on cudadev run CUDA's
multi-tensor kernels (csrc/foreach.cpp), not the per-tensor loop torch's
composite kernel would give a PrivateUse1 device: the same values and the
same number of GPU kernels as on torch.cuda, on the current cudadev stream.
An AdamW(foreach=True) step on cudadev matches the step on torch.cuda.

torch.cuda references are computed without autograd (see test_cudadev_ops.py
for why a torch.cuda backward cannot run beside a PrivateUse1 backend)."""

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

pytestmark = pytest.mark.gpu

SHAPES = [(64, 32), (128,), (3, 5, 7), (1024, 768), (1,), (300, 4)]
SLEEP_MS = 200


def tensors(device, seed, shapes=SHAPES):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator).to(device) for shape in shapes]


def kernels_launched(fn):
    """Names of the GPU kernels fn launched, one entry per launch
    (torch.profiler's CUDA activity, as bench/compile.py reads it), memory
    operations left out. Never empty: every operation here launches."""
    fn()  # the first call loads the kernels
    torch.accelerator.synchronize()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.accelerator.synchronize()
        torch.cuda.synchronize()
    names = sorted(name for event in prof.key_averages()
                   if getattr(event, "self_device_time_total", 0.0) > 0
                   and not event.key.startswith(("Memset", "Memcpy"))
                   for name in [event.key] * event.count)
    assert names, "the profiler saw no kernel: the comparison below would be empty"
    return names


OPERATIONS = {
    "_foreach_add_.Scalar": lambda xs, ys: torch._foreach_add_(xs, 2.5),
    "_foreach_mul_.List": lambda xs, ys: torch._foreach_mul_(xs, ys),
    "_foreach_lerp_.Scalar": lambda xs, ys: torch._foreach_lerp_(xs, ys, 0.1),
    "_foreach_addcdiv_.ScalarList": lambda xs, ys: torch._foreach_addcdiv_(
        xs, ys, [y.abs() + 1 for y in ys], [0.5] * len(xs)),
    "_foreach_sqrt": lambda xs, ys: torch._foreach_sqrt([x.abs() for x in xs]),
    "_foreach_norm.Scalar": lambda xs, ys: torch._foreach_norm(xs),
    "_foreach_zero_": lambda xs, ys: torch._foreach_zero_(xs),
    # The same tensors as two arguments: one alias each, as on torch.cuda.
    "_foreach_add_.List on itself": lambda xs, ys: torch._foreach_add_(xs, xs, alpha=0.5),
    "_foreach_addcmul_.Scalar, one list twice": lambda xs, ys: torch._foreach_addcmul_(xs, ys, ys, value=0.1),
    # A 0-dim CPU tensor beside cudadev lists: CUDA's kernel takes it, as on torch.cuda.
    "_foreach_mul.Tensor, a CPU scalar": lambda xs, ys: torch._foreach_mul(xs, torch.tensor(3.0)),
    "_foreach_pow.ScalarAndTensor": lambda xs, ys: torch._foreach_pow(2.0, ys),
    "_foreach_copy_": lambda xs, ys: torch._foreach_copy_(xs, ys),
    "_foreach_maximum_.List": lambda xs, ys: torch._foreach_maximum_(xs, ys),
}


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_gives_cudas_values_with_cudas_kernels(name):
    operation = OPERATIONS[name]
    results = {}
    for device in ("cudadev", "cuda"):
        xs, ys = tensors(device, seed=0), tensors(device, seed=1)
        out = operation(xs, ys)
        results[device] = [t.cpu() for t in (out if out is not None else xs)]
    for got, expected in zip(results["cudadev"], results["cuda"]):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)

    launched = {}
    for device in ("cudadev", "cuda"):
        xs, ys = tensors(device, seed=0), tensors(device, seed=1)
        launched[device] = kernels_launched(lambda: operation([x.clone() for x in xs], ys))
    assert launched["cudadev"] == launched["cuda"], (
        f"{name} launched other kernels on cudadev than on torch.cuda:\n"
        f"cudadev: {launched['cudadev']}\ncuda: {launched['cuda']}")


def test_views_sharing_a_storage_and_strided_views_give_cudas_values():
    results = {}
    for device in ("cudadev", "cuda"):
        base = torch.arange(48, dtype=torch.float32).reshape(6, 8).to(device)
        other = torch.arange(48, dtype=torch.float32).reshape(8, 6).to(device)
        xs = [base[0], base[1:3], base[:, 5], other.t()]  # one storage, and a transposed view
        ys = [x * 0 + 2 for x in xs]
        torch._foreach_addcmul_(xs, ys, ys, value=0.25)
        sums = torch._foreach_add(xs, ys)
        results[device] = [base.cpu(), other.cpu(), *[s.cpu() for s in sums]]
    for got, expected in zip(results["cudadev"], results["cuda"]):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_the_multi_tensor_kernel_is_one_launch_for_the_whole_list():
    xs = tensors("cudadev", seed=0)
    launched = kernels_launched(lambda: torch._foreach_add_(xs, 1.0))
    assert len(launched) == 1 and "multi_tensor_apply" in launched[0], launched


def test_runs_on_the_current_cudadev_stream_in_order():
    xs = tensors("cudadev", seed=0, shapes=[(1 << 20,)] * 4)
    torch._foreach_add_(xs, 0.0)  # loads the kernel before the sleep
    torch.cudadev._sleep_on_current_stream(0)
    torch.accelerator.synchronize()
    expected = [x.cpu() + 1 for x in xs]
    stream = torch.Stream(device="cudadev")
    with stream:
        torch.cudadev._sleep_on_current_stream(SLEEP_MS)
        torch._foreach_add_(xs, 1.0)
        hosts = [x.cpu() for x in xs]  # copies on the same stream
    for got, want in zip(hosts, expected):
        assert torch.equal(got, want)


def test_tensors_of_two_cudadev_devices_are_refused_by_name():
    if torch.accelerator.device_count() < 2:
        pytest.skip("needs two GPUs")
    xs = [torch.ones(4, device="cudadev:0"), torch.ones(4, device="cudadev:1")]
    with pytest.raises(RuntimeError, match=r"cudadev:0 and cudadev:1"):
        torch._foreach_add_(xs, 1.0)


def test_an_adamw_foreach_step_matches_torch_cuda():
    steps = 3
    parameters = {}
    launched = {}
    for device in ("cudadev", "cuda"):
        params = [torch.nn.Parameter(t) for t in tensors(device, seed=0)]
        optimizer = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1, foreach=True)
        for step in range(steps):
            for p, g in zip(params, tensors(device, seed=10 + step)):
                p.grad = g
            optimizer.step()
        parameters[device] = [p.detach().cpu() for p in params]
        launched[device] = len(kernels_launched(optimizer.step))
    for got, expected in zip(parameters["cudadev"], parameters["cuda"]):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert launched["cudadev"] == launched["cuda"], launched
