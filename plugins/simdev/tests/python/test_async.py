"""simdev work is asynchronous and stream-ordered, and the debug delay makes
a missing synchronization visible as stale data.

The delay (SIMDEV_OP_DELAY_US / torch.simdev.op_delay) sleeps before every
queued operation, so a stream with more queued work reaches a point later
than a stream with less. No test here measures time: every assertion is
about which data was observed.
"""

import pytest
import torch

torch_simdev = pytest.importorskip(
    "torch_simdev", reason="torch_simdev is not installed; build it with: pip install --no-build-isolation plugins/simdev"
)


DELAY_US = 20_000  # per queued operation
N = 1 << 12


def busy(stream_work: int) -> None:
    """Queue `stream_work` extra operations on the current stream (each costs one delay)."""
    for _ in range(stream_work):
        torch_simdev._C._enqueue_sleep(0)


def test_missing_cross_stream_wait_reads_stale_data():
    """The negative test: without a wait, stream B reads before stream A wrote."""
    a, b = torch.Stream(device="simdev"), torch.Stream(device="simdev")
    x = torch.zeros(N, device="simdev")
    torch.simdev.synchronize()
    with torch.simdev.op_delay(DELAY_US):
        with a:
            busy(2)  # A: sleep, sleep, fill -> the fill lands after 3 delays
            x.fill_(1.0)
        with b:
            seen = x.cpu()  # B: its copy runs after 1 delay, and the call waits only for B
    assert torch.equal(seen, torch.zeros(N)), "stream B should have read x before stream A filled it"
    torch.simdev.synchronize()
    assert torch.equal(x.cpu(), torch.ones(N))


def test_cross_stream_wait_on_event_reads_new_data():
    a, b = torch.Stream(device="simdev"), torch.Stream(device="simdev")
    x = torch.zeros(N, device="simdev")
    torch.simdev.synchronize()
    with torch.simdev.op_delay(DELAY_US):
        with a:
            busy(2)
            x.fill_(1.0)
            filled = torch.Event()
            filled.record()
        with b:
            b.wait_event(filled)
            seen = x.cpu()
    assert torch.equal(seen, torch.ones(N))


def test_stream_wait_stream_orders_work():
    a, b = torch.Stream(device="simdev"), torch.Stream(device="simdev")
    x = torch.zeros(N, device="simdev")
    torch.simdev.synchronize()
    with torch.simdev.op_delay(DELAY_US):
        with a:
            busy(2)
            x.add_(5)
        b.wait_stream(a)
        with b:
            seen = x.cpu()
    assert torch.equal(seen, torch.full((N,), 5.0))


def test_same_stream_work_is_ordered_without_waits():
    with torch.simdev.op_delay(DELAY_US // 4):
        x = torch.zeros(N, device="simdev")
        x.add_(1)
        x.mul_(3)
        y = x + 1
        assert torch.equal(y.cpu(), torch.full((N,), 4.0))


def test_non_blocking_device_to_host_returns_before_the_data_arrives():
    x = torch.ones(N, device="simdev")
    torch.simdev.synchronize()
    host = torch.full((N,), -1.0)
    with torch.simdev.op_delay(DELAY_US):
        host.copy_(x, non_blocking=True)
        assert torch.equal(host, torch.full((N,), -1.0)), "a non_blocking copy must not wait for the device"
        torch.accelerator.current_stream().synchronize()
    assert torch.equal(host, torch.ones(N))


def test_blocking_device_to_host_is_complete_on_return():
    x = torch.zeros(N, device="simdev")
    with torch.simdev.op_delay(DELAY_US):
        x.fill_(7)
        host = torch.full((N,), -1.0)
        host.copy_(x)  # blocking: includes waiting for fill_
        assert torch.equal(host, torch.full((N,), 7.0))
        assert torch.equal(x.to("cpu"), torch.full((N,), 7.0))


def test_enqueueing_does_not_wait_for_queued_work():
    x = torch.zeros(N, device="simdev")
    torch.simdev.synchronize()
    start, end = torch.Event(), torch.Event()
    with torch.simdev.op_delay(DELAY_US):
        start.record()
        for _ in range(5):
            x.add_(1)
        end.record()
        assert not end.query(), "five delayed ops cannot have finished as soon as they were queued"
        end.synchronize()
    assert end.query()
    assert torch.equal(x.cpu(), torch.full((N,), 5.0))


def test_non_blocking_host_to_device_keeps_the_host_tensor_alive():
    device = torch.empty(N, device="simdev")
    with torch.simdev.op_delay(DELAY_US):
        device.copy_(torch.full((N,), 3.0), non_blocking=True)  # the host tensor is dropped at once
        junk = [torch.full((N,), 9.0) for _ in range(8)]  # reuse freed host memory if it was freed
    del junk
    assert torch.equal(device.cpu(), torch.full((N,), 3.0))


def test_tensor_freed_while_its_work_is_in_flight_stays_valid():
    with torch.simdev.op_delay(DELAY_US):
        x = torch.full((N,), 2.0, device="simdev")
        y = x * 3  # queued, reads x later
        del x  # the queued work still holds x's memory
        z = torch.full((N,), 100.0, device="simdev")  # must not land in x's memory before y is computed
        assert torch.equal(y.cpu(), torch.full((N,), 6.0))
        assert torch.equal(z.cpu(), torch.full((N,), 100.0))


class TestCachingAllocatorStreams:
    """A freed block goes back to other streams only when its stream's work is done."""

    SIZE = 1 << 20

    def _free_block_while_stream_busy(self, stream):
        with stream:
            x = torch.empty(self.SIZE, dtype=torch.uint8, device="simdev")
            pointer = x.data_ptr()
            # Work that does not hold x (as a kernel launched with a raw pointer would not).
            torch_simdev._C._enqueue_sleep(300_000)
            del x
        return pointer

    def test_not_reused_on_another_stream_while_pending(self):
        torch.simdev.empty_cache()
        a, b = torch.Stream(device="simdev"), torch.Stream(device="simdev")
        pointer = self._free_block_while_stream_busy(a)
        with b:
            y = torch.empty(self.SIZE, dtype=torch.uint8, device="simdev")
        assert y.data_ptr() != pointer, "the block was handed to stream B while stream A's work was pending"
        a.synchronize()
        with b:
            z = torch.empty(self.SIZE, dtype=torch.uint8, device="simdev")
        assert z.data_ptr() == pointer, "once stream A is idle the cached block should be reused"

    def test_reused_at_once_on_the_same_stream(self):
        torch.simdev.empty_cache()
        a = torch.Stream(device="simdev")
        pointer = self._free_block_while_stream_busy(a)
        with a:
            y = torch.empty(self.SIZE, dtype=torch.uint8, device="simdev")
        assert y.data_ptr() == pointer, "same-stream reuse is safe (stream order) and should be immediate"
        assert not a.query()

    def test_record_stream_protects_the_block_from_its_own_stream(self):
        torch.simdev.empty_cache()
        a, b = torch.Stream(device="simdev"), torch.Stream(device="simdev")
        with a:
            x = torch.empty(self.SIZE, dtype=torch.uint8, device="simdev")
        pointer = x.data_ptr()
        with b:
            torch_simdev._C._enqueue_sleep(300_000)  # B uses x (without holding it)
        x.record_stream(b)
        del x
        with a:
            y = torch.empty(self.SIZE, dtype=torch.uint8, device="simdev")
        assert y.data_ptr() != pointer, "record_stream(B) must keep the block until B's work is done"
        b.synchronize()
        with a:
            z = torch.empty(self.SIZE, dtype=torch.uint8, device="simdev")
        assert z.data_ptr() == pointer

    def test_stream_ordered_reuse_gives_correct_results(self):
        a, b = torch.Stream(device="simdev"), torch.Stream(device="simdev")
        with torch.simdev.op_delay(DELAY_US // 4):
            results = []
            for i in range(6):
                stream = a if i % 2 == 0 else b
                with stream:
                    t = torch.full((N,), float(i), device="simdev")
                    results.append((i, stream, (t * 2).sum()))
                    del t
            for i, stream, total in results:
                with stream:
                    assert total.item() == pytest.approx(2.0 * i * N)


def test_cross_device_copy_is_ordered_on_both_sides(two_devices):
    d0, d1 = two_devices
    src = torch.zeros(N, device=d1)
    torch.simdev.synchronize(1)
    with torch.simdev.op_delay(DELAY_US):
        src.fill_(7)  # queued on simdev:1
        copied = src.to(d0, non_blocking=True)  # on simdev:0, after the fill
        src.fill_(9)  # on simdev:1, after the copy
        assert torch.equal(copied.cpu(), torch.full((N,), 7.0))
        assert torch.equal(src.cpu(), torch.full((N,), 9.0))
