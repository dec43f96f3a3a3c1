"""Streams and events through PyTorch's generic APIs (torch.Stream,
torch.Event, torch.accelerator) on simdev, including per-thread state."""

import threading

import pytest
import torch

torch_simdev = pytest.importorskip(
    "torch_simdev", reason="torch_simdev is not installed; build it with: pip install --no-build-isolation plugins/simdev"
)


def test_default_and_current_stream():
    current = torch.accelerator.current_stream()
    assert current.device_index == 0
    assert current.stream_id == 0  # the default stream
    assert current == torch.simdev.default_stream(0)
    assert current.native_handle == torch_simdev._C.current_stream_handle(0)
    assert current.native_handle != 0


def test_new_streams_come_from_a_pool_and_have_native_handles():
    streams = [torch.Stream(device="simdev") for _ in range(8)]
    handles = {s.native_handle for s in streams}
    assert len(handles) == 8, "the first 8 streams of a device are distinct pool streams"
    assert torch.accelerator.current_stream().native_handle not in handles
    ninth = torch.Stream(device="simdev")
    assert ninth.native_handle in handles, "the pool hands streams out round-robin"
    for s in streams:
        assert s.device == torch.device("simdev:0")


def test_stream_context_and_set_stream():
    s = torch.Stream(device="simdev")
    default = torch.accelerator.current_stream()
    with s:
        assert torch.accelerator.current_stream() == s
        assert torch_simdev._C.current_stream_handle() == s.native_handle
    assert torch.accelerator.current_stream() == default
    torch.accelerator.set_stream(s)
    try:
        assert torch.accelerator.current_stream() == s
        x = torch.ones(4, device="simdev") * 2  # runs on s
        s.synchronize()
        assert s.query()
    finally:
        torch.accelerator.set_stream(default)
    assert torch.equal(x.cpu(), torch.full((4,), 2.0))


def test_streams_of_device_one(two_devices):
    _, d1 = two_devices
    s = torch.Stream(device=d1)
    assert s.device_index == 1
    with s:
        assert torch.accelerator.current_stream(1) == s
        assert torch.accelerator.current_stream(0).stream_id == 0  # device 0 untouched
        y = torch.ones(3, device=d1) + 1
    # y was produced on s; reading it on simdev:1's default stream needs a
    # wait, exactly as on CUDA (without it this test read garbage under load).
    torch.accelerator.current_stream(1).wait_stream(s)
    assert torch.equal(y.cpu(), torch.full((3,), 2.0))


def test_bad_stream_ids_are_rejected():
    device_type = torch.accelerator.current_stream().device_type
    bogus = torch.Stream(stream_id=12345, device_index=0, device_type=device_type)
    with pytest.raises(RuntimeError, match="is not a simdev stream"):
        bogus.native_handle
    with pytest.raises(RuntimeError, match="is not a simdev stream"):
        torch.accelerator.set_stream(bogus)


def test_events_query_synchronize_wait():
    s = torch.Stream(device="simdev")
    e = torch.Event()
    assert e.query()  # never recorded: complete
    with torch.simdev.op_delay(20_000):
        with s:
            torch_simdev._C._enqueue_sleep(0)
            e.record()
        assert not e.query()
        e.synchronize()
        assert e.query()


def test_event_elapsed_time():
    start, end = torch.Event(enable_timing=True), torch.Event(enable_timing=True)
    start.record()
    torch_simdev._C._enqueue_sleep(30_000)
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 25.0  # milliseconds; the sleep was 30 ms


def test_elapsed_time_needs_completed_events():
    start, end = torch.Event(enable_timing=True), torch.Event(enable_timing=True)
    start.record()
    torch_simdev._C._enqueue_sleep(200_000)
    end.record()
    with pytest.raises(RuntimeError, match="completed"):
        start.elapsed_time(end)
    end.synchronize()
    assert start.elapsed_time(end) >= 150.0


def test_elapsed_time_needs_timing_events():
    start, end = torch.Event(), torch.Event()
    start.record()
    end.record()
    end.synchronize()
    with pytest.raises(ValueError, match="enable_timing=True"):  # torch checks before simdev does
        start.elapsed_time(end)


def test_elapsed_time_needs_recorded_events():
    with pytest.raises(ValueError, match="recorded"):
        torch.Event(enable_timing=True).elapsed_time(torch.Event(enable_timing=True))


def test_event_on_another_device_stream_is_rejected(two_devices):
    e = torch.Event()
    e.record(torch.accelerator.current_stream(0))
    with pytest.raises(RuntimeError):
        e.record(torch.accelerator.current_stream(1))


def test_accelerator_api():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("simdev")
    assert torch.accelerator.device_count() == torch.simdev.device_count()
    assert torch.accelerator.current_device_index() == 0
    if torch.simdev.device_count() > 1:
        with torch.accelerator.device_index(1):
            assert torch.accelerator.current_device_index() == 1
            assert torch.simdev.current_device() == 1
            assert torch.empty(1, device="simdev").device == torch.device("simdev:1")
        assert torch.accelerator.current_device_index() == 0
        torch.accelerator.set_device_index(1)
        assert torch.simdev.current_device() == 1
        torch.accelerator.set_device_index(0)
    torch.accelerator.synchronize()


def test_each_host_thread_has_its_own_device_and_streams(two_devices):
    count = torch.simdev.device_count()
    errors = []
    barrier = threading.Barrier(4)

    def worker(thread_index):
        try:
            device = thread_index % count
            torch.simdev.set_device(device)
            stream = torch.Stream(device=f"simdev:{device}")
            with stream:
                barrier.wait()  # all threads hold their own device and stream at once
                assert torch.simdev.current_device() == device
                assert torch.accelerator.current_stream(device) == stream
                x = torch.full((1000,), float(thread_index), device="simdev")
                for _ in range(20):
                    x = x + 1
                total = x.sum().item()
                assert x.device == torch.device(f"simdev:{device}")
                assert total == pytest.approx((thread_index + 20) * 1000)
        except BaseException as error:  # reported by the main thread
            errors.append((thread_index, error))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    # The main thread's state was never touched by the others.
    assert torch.simdev.current_device() == 0
    assert torch.accelerator.current_stream(0).stream_id == 0


def test_accelerator_synchronize_waits_for_side_streams():
    # torch 2.11 skips torch.accelerator.synchronize() for a device type it has
    # not marked initialized; simdev's device module must define _lazy_init for
    # torch to mark it. With the delay, a no-op synchronize leaves work queued.
    assert callable(torch.simdev._lazy_init)
    side = torch.Stream(device="simdev:0")
    work = torch.zeros(1024, device="simdev:0")
    torch.accelerator.synchronize("simdev:0")
    with torch.simdev.op_delay(20_000):
        with side:
            for _ in range(3):
                work.add_(1.0)
        torch.accelerator.synchronize("simdev:0")
        assert side.query(), "torch.accelerator.synchronize() returned with the side stream busy"
    assert torch.equal(work.cpu(), torch.full((1024,), 3.0))


def test_streams_created_outside_torch_are_torch_streams():
    import ctypes

    runtime = ctypes.CDLL(torch_simdev.runtime_library_path())
    handle = ctypes.c_void_p()
    assert runtime.sdStreamCreate(1, ctypes.byref(handle)) == 0
    stream = torch.simdev.external_stream(handle.value, 1)
    assert stream.native_handle == handle.value and stream.device_index == 1
    with stream:
        assert torch.simdev._current_stream_handle(1) == handle.value
        y = torch.full((4,), 3.0, device="simdev:1") * 2  # queued on the external stream
    stream.synchronize()
    assert y.cpu().tolist() == [6.0] * 4
    # A stream torch already knows keeps its own id.
    pool = torch.Stream(device="simdev:1")
    assert torch.simdev.external_stream(pool.native_handle, 1) == pool
    with pytest.raises(RuntimeError, match="is not a live stream of simdev:0"):
        torch.simdev.external_stream(handle.value, 0)  # another device's stream
    assert runtime.sdStreamDestroy(handle) == 0
    with pytest.raises(RuntimeError, match="not a live stream of simdev:1"):
        stream.native_handle  # destroyed: refused, never a dangling handle
