"""Work on cudadev tensors is ordered on the current cudadev stream, streams
are independent of each other, and memory is never reused while queued work
still uses it.

Each test first runs its sequence once without sleeping: CUDA loads a kernel
on its first launch, and that load can wait for the whole GPU, which would
hide an ordering bug behind an accidental synchronisation.
"""

import pytest
import torch

pytestmark = pytest.mark.gpu

N = 1 << 22  # 16 MiB of float32: enough that a misordered read sees stale data
SLEEP_MS = 200


def pinned_like(tensor):
    # Allocated before any sleep: a fresh pinned allocation may wait for the
    # whole GPU, which would hide what the test looks for.
    return torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)


def read_into(host, tensor):
    """The values `tensor` has as the current cudadev stream sees them now: an
    asynchronous copy into pinned memory, then a wait for this stream only
    (a copy into pageable memory might wait for more than that)."""
    host.copy_(tensor, non_blocking=True)
    torch.accelerator.current_stream().synchronize()
    return host


def warm_up():
    x = torch.zeros(N, device="cudadev")
    y = torch.empty(N, device="cudadev")
    x.add_(1)
    y.copy_(x)
    z = torch.full((N,), 3.0, device="cudadev") * 2.0
    z.fill_(5.0)
    x.cpu()
    read_into(pinned_like(x), x)
    torch.cudadev._sleep_on_current_stream(0)
    torch.cudadev.synchronize()


def test_an_op_on_a_busy_stream_runs_after_the_sleep_and_before_the_copy():
    warm_up()
    x = torch.zeros(N, device="cudadev")
    torch.cudadev.synchronize()
    stream = torch.Stream(device="cudadev")
    with stream:
        torch.cudadev._sleep_on_current_stream(SLEEP_MS)
        x.add_(1)
        host = x.cpu()  # device-to-host copy on the same stream
    assert torch.all(host == 1)


def test_a_plain_device_copy_waits_for_the_busy_stream_it_is_queued_on():
    # Same dtype, contiguous: one cudaMemcpyAsync, which must be queued on the
    # current cudadev stream like every other copy.
    warm_up()
    x = torch.zeros(N, device="cudadev")
    y = torch.empty(N, device="cudadev")
    host = pinned_like(y)  # before the sleep (see pinned_like)
    torch.cudadev.synchronize()
    stream = torch.Stream(device="cudadev")
    with stream:
        torch.cudadev._sleep_on_current_stream(SLEEP_MS)
        x.add_(1)
        y.copy_(x)
        read_into(host, y)
    assert torch.all(host == 1)


def test_queued_work_really_waits_on_its_own_stream_only():
    warm_up()
    x = torch.zeros(N, device="cudadev")
    early = pinned_like(x)
    torch.cudadev.synchronize()
    stream = torch.Stream(device="cudadev")
    with stream:
        torch.cudadev._sleep_on_current_stream(300)
        x.add_(1)  # queued behind the sleep
    read_into(early, x)  # default stream, not busy: add_ has not run yet
    stream.synchronize()
    late = x.cpu()
    assert torch.all(early == 0), "the operator did not wait on the current cudadev stream"
    assert torch.all(late == 1)


def test_an_event_orders_work_across_streams():
    warm_up()
    x = torch.zeros(N, device="cudadev")
    y = torch.zeros(N, device="cudadev")
    unordered = pinned_like(x)
    torch.cudadev.synchronize()
    producer = torch.Stream(device="cudadev")
    consumer = torch.Stream(device="cudadev")
    done = torch.Event(device="cudadev")
    with producer:
        torch.cudadev._sleep_on_current_stream(SLEEP_MS)
        x.add_(1)
        done.record(producer)
    with consumer:
        read_into(unordered, x)  # not ordered after the producer: zeros
        consumer.wait_event(done)
        y.copy_(x)
        ordered = y.cpu()
    assert torch.all(unordered == 0)
    assert torch.all(ordered == 1)


@pytest.mark.parametrize("source", ["cudadev_allocator", "cuda_kernel_output"])
def test_freeing_a_tensor_in_use_does_not_corrupt_it(source):
    warm_up()
    first = torch.Stream(device="cudadev")
    second = torch.Stream(device="cudadev")
    with first:
        if source == "cudadev_allocator":
            x = torch.full((N,), 3.0, device="cudadev")  # memory from cudadev's allocator
        else:
            x = torch.ones(N, device="cudadev") * 3.0  # memory adopted from a CUDA kernel
        torch.cudadev._sleep_on_current_stream(SLEEP_MS)
        y = x * 2.0  # reads x after the sleep
        del x  # freed while the read is still queued
    with second:
        z = torch.empty(N, device="cudadev")
        z.fill_(5.0)  # must not land in x's memory before y is computed
        w = torch.ones(N, device="cudadev") * 7.0
    first.synchronize()
    second.synchronize()
    assert torch.all(y.cpu() == 6.0)
    assert torch.all(z.cpu() == 5.0)
    assert torch.all(w.cpu() == 7.0)


def test_record_stream_keeps_memory_until_the_other_stream_is_done():
    warm_up()
    x = torch.full((N,), 3.0, device="cudadev")  # allocated on the default stream
    torch.cudadev.synchronize()
    side = torch.Stream(device="cudadev")
    with side:
        torch.cudadev._sleep_on_current_stream(SLEEP_MS)
        y = x * 2.0
    x.record_stream(side)
    del x
    z = torch.empty(N, device="cudadev")  # default stream again
    z.fill_(9.0)
    side.synchronize()
    torch.accelerator.current_stream().synchronize()
    assert torch.all(y.cpu() == 6.0)
    assert torch.all(z.cpu() == 9.0)
