"""torch's multi-tensor operators (_foreach_*) on cudadev run CUDA's
multi-tensor kernels (csrc/foreach.cpp), not the per-tensor loop torch's
composite kernel would give a PrivateUse1 device: the same values and the
same number of GPU kernels as on torch.cuda, on the current cudadev stream.
An AdamW(foreach=True) step on cudadev matches the step on torch.cuda.

torch.cuda references are computed without autograd (see test_cudadev_ops.py
for why a torch.cuda backward cannot run beside a PrivateUse1 backend)."""

import gc

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


# The multi-tensor operators keep their CUDA aliases from one call to the next
# (csrc/alias_cache.h): the same lists come back on every optimizer step. The
# tests below change what a cached alias describes between two calls and
# check that the next call sees the change, as torch.cuda does.

def both_devices(build):
    """build(device) on cudadev and on torch.cuda, each result moved to the CPU."""
    return {device: [t.cpu() for t in build(device)] for device in ("cudadev", "cuda")}


def assert_same(results):
    for got, expected in zip(results["cudadev"], results["cuda"], strict=True):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_a_tensor_given_other_memory_between_calls_is_aliased_anew():
    def build(device):
        xs = tensors(device, seed=0)
        torch._foreach_add_(xs, 1.0)  # cached here
        xs[0].resize_(4096)  # the same tensor, new memory (and geometry)
        xs[0].fill_(2.0)
        xs[1].data = torch.full_like(xs[1], 3.0)  # the same tensor, another storage
        xs[2].transpose_(0, 2)  # the same memory, other strides
        torch._foreach_mul_(xs, 2.0)
        return xs
    assert_same(both_devices(build))


def test_a_freed_tensors_memory_handed_to_a_new_tensor_is_seen_as_the_new_one():
    def build(device):
        results = []
        for step in range(4):
            xs = [torch.full((1 << 16,), float(step + i), device=device) for i in range(6)]
            torch._foreach_addcmul_(xs, xs, xs, value=0.5)
            results += [x.clone() for x in xs]
            del xs  # the next step's tensors may get this memory back
        return results
    assert_same(both_devices(build))


def test_views_of_one_storage_across_calls_give_cudas_values():
    def build(device):
        base = torch.arange(48, dtype=torch.float32).reshape(6, 8).to(device)
        rows = [base[0], base[1:3]]
        torch._foreach_add_(rows, 1.0)
        columns = [base[:, 5], base[:, 0]]  # new views of the same storage
        torch._foreach_mul_(columns, 3.0)
        torch._foreach_add_(rows + columns, 0.5)
        return [base]
    assert_same(both_devices(build))


def test_the_cache_keeps_no_memory_of_freed_tensors_alive():
    gc.collect()  # tensors of earlier tests must not be freed halfway through
    torch.accelerator.synchronize()
    before = torch.cudadev.memory_allocated()
    xs = [torch.ones(1 << 20, device="cudadev") for _ in range(8)]
    ys = torch._foreach_sqrt(xs)  # fresh results: adopted CUDA memory
    torch._foreach_add_(xs, ys)
    del xs, ys
    torch.accelerator.synchronize()
    assert torch.cudadev.memory_allocated() == before


def test_host_threads_with_lists_of_their_own_run_concurrently_in_order():
    import threading

    def work(device, seed, out, index):
        xs = tensors(device, seed=seed)
        for _ in range(50):
            torch._foreach_mul_(xs, 1.01)
            torch._foreach_add_(xs, xs, alpha=0.01)
        out[index] = [x.cpu() for x in xs]

    results = {}
    for device in ("cudadev", "cuda"):
        out = [None] * 4
        threads = [threading.Thread(target=work, args=(device, seed, out, seed)) for seed in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        results[device] = [t for per_thread in out for t in per_thread]
    assert_same(results)
