"""torch.simdev's torch.cuda-style stream names (Stream, Event, stream,
StreamContext, set_stream, current_stream, default_stream): what
device-generic torch code such as FSDP2's fully_shard and DeviceMesh calls
on getattr(torch, device_type). Real simdev, no mocks."""

import threading

import pytest
import torch

torch_simdev = pytest.importorskip(
    "torch_simdev", reason="torch_simdev is not installed; build it with: pip install --no-build-isolation plugins/simdev"
)


# ---------------------------------------------------------------- Stream


def test_stream_is_a_torch_stream_with_its_methods():
    s = torch.simdev.Stream()
    assert isinstance(s, torch.Stream) and isinstance(s, torch.simdev.Stream)
    assert s.device == torch.device("simdev:0")
    assert s.stream_id != 0, "a new stream comes from the pool, not the default stream"
    assert s.native_handle != 0
    assert s.query()
    s.synchronize()
    s.wait_stream(torch.simdev.current_stream())
    event = s.record_event()
    assert isinstance(event, torch.simdev.Event) and isinstance(event, torch.Event)
    s.wait_event(event)
    event.synchronize()
    assert event.query()
    assert s.record_event(torch.simdev.Event()).query() is not None  # torch.Stream.record_event(event)
    plain = torch.Stream(device="simdev")
    plain.wait_stream(s)  # a plain torch.Stream takes a torch.simdev.Stream too
    s.wait_stream(plain)
    # Equal (and hashed alike) to the plain torch.Stream of the same stream.
    with torch.simdev.stream(s):
        plain = torch.accelerator.current_stream()
    assert type(plain) is torch.Stream
    assert plain == s and s == plain and hash(plain) == hash(s)


def test_stream_devices_and_priority(two_devices):
    high = torch.simdev.Stream(priority=-1)  # what FSDP2 asks for; simdev ignores priorities
    low = torch.simdev.Stream(priority=3)
    assert high.device_index == 0 and low.device_index == 0
    assert torch.simdev.Stream(1).device == torch.device("simdev:1")
    assert torch.simdev.Stream("simdev:1").device_index == 1
    assert torch.simdev.Stream(torch.device("simdev", 1)).device_index == 1
    assert torch.simdev.Stream(-1).device_index == 0  # negative: the current device, as torch.cuda
    with torch.simdev.device(1):
        assert torch.simdev.Stream().device_index == 1
        assert torch.simdev.Stream("simdev").device_index == 1


def test_stream_wraps_an_existing_stream():
    s = torch.Stream(device="simdev")
    wrapped = torch.simdev.Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
    assert isinstance(wrapped, torch.simdev.Stream)
    assert wrapped == s and wrapped.native_handle == s.native_handle


def test_current_and_default_stream_are_simdev_streams(two_devices):
    current = torch.simdev.current_stream()
    assert isinstance(current, torch.simdev.Stream)
    assert current == torch.accelerator.current_stream() == torch.simdev.default_stream()
    assert current.stream_id == 0
    assert torch.simdev.default_stream(1).device_index == 1
    assert torch.simdev.current_stream("simdev:1") == torch.accelerator.current_stream(1)


# ---------------------------------------------------------------- stream(), StreamContext, set_stream


def test_stream_context_makes_the_stream_current_and_restores():
    default = torch.simdev.current_stream()
    s = torch.simdev.Stream()
    context = torch.simdev.stream(s)
    assert isinstance(context, torch.simdev.StreamContext)
    with context as entered:
        assert entered is s
        assert torch.simdev.current_stream() == s
        assert torch.accelerator.current_stream() == s
        assert torch_simdev._C.current_stream_handle(0) == s.native_handle
    assert torch.simdev.current_stream() == default


def test_stream_context_accepts_a_plain_torch_stream():
    s = torch.Stream(device="simdev")
    with torch.simdev.stream(s):
        assert torch.simdev.current_stream() == s
    assert torch.simdev.current_stream().stream_id == 0


def test_stream_none_is_a_no_op():
    before = torch.simdev.current_stream()
    with torch.simdev.stream(None) as entered:
        assert entered is None
        assert torch.simdev.current_stream() == before
    assert torch.simdev.current_stream() == before
    torch.simdev.set_stream(None)
    assert torch.simdev.current_stream() == before


def test_nested_stream_contexts():
    default = torch.simdev.current_stream()
    a, b = torch.simdev.Stream(), torch.simdev.Stream()
    with torch.simdev.stream(a):
        assert torch.simdev.current_stream() == a
        with torch.simdev.stream(b):
            assert torch.simdev.current_stream() == b
            with torch.simdev.stream(a):
                assert torch.simdev.current_stream() == a
            assert torch.simdev.current_stream() == b
        assert torch.simdev.current_stream() == a
    assert torch.simdev.current_stream() == default


def test_with_stream_object_nested_and_reentered():
    default = torch.simdev.current_stream()
    a, b = torch.simdev.Stream(), torch.simdev.Stream()
    with a:
        assert torch.simdev.current_stream() == a
        with b:
            assert torch.simdev.current_stream() == b
            with a:  # the same stream again, inside itself
                assert torch.simdev.current_stream() == a
            assert torch.simdev.current_stream() == b
        assert torch.simdev.current_stream() == a
    assert torch.simdev.current_stream() == default


def test_stream_context_across_devices_restores_both(two_devices):
    # simdev:1 starts on a side stream, so restoring it is not just "back to the default".
    side1 = torch.simdev.Stream(1)
    torch.simdev.set_stream(side1)
    assert torch.simdev.current_device() == 1, "set_stream makes the stream's device current, as on CUDA"
    torch.simdev.set_device(0)
    default0 = torch.simdev.current_stream(0)
    s1 = torch.simdev.Stream(1)
    with torch.simdev.stream(s1):
        assert torch.simdev.current_device() == 1
        assert torch.simdev.current_stream() == s1
        assert torch.simdev.current_stream(1) == s1
        assert torch.simdev.current_stream(0) == default0  # device 0 untouched
        y = torch.ones(3, device="simdev") + 1  # queued on s1, on simdev:1
        with torch.simdev.stream(torch.simdev.default_stream(0)):  # back to device 0 and out again
            assert torch.simdev.current_device() == 0
        assert torch.simdev.current_device() == 1
        assert torch.simdev.current_stream(1) == s1
    assert torch.simdev.current_device() == 0
    assert torch.simdev.current_stream(0) == default0
    assert torch.simdev.current_stream(1) == side1
    assert y.device == torch.device("simdev:1")
    s1.synchronize()
    assert y.cpu().tolist() == [2.0, 2.0, 2.0]


def test_with_stream_object_across_devices(two_devices):
    s1 = torch.simdev.Stream(1)
    with s1:
        assert torch.simdev.current_device() == 1
        assert torch.simdev.current_stream(1) == s1
    assert torch.simdev.current_device() == 0
    assert torch.simdev.current_stream(1).stream_id == 0


def test_set_stream():
    s = torch.simdev.Stream()
    torch.simdev.set_stream(s)
    assert torch.simdev.current_stream() == s
    torch.simdev.set_stream(torch.simdev.default_stream())
    assert torch.simdev.current_stream().stream_id == 0


@pytest.mark.parametrize("how", ["stream()", "with stream"])
def test_threads_entering_one_stream_each_restore_their_own(how):
    """torch.Stream.__enter__ keeps the previous stream on the stream object, so
    two threads in `with s:` of one stream could restore each other's; the
    previous stream must be kept per `with` block."""
    shared = torch.simdev.Stream()
    entered, leaving = threading.Barrier(2), threading.Barrier(2)
    errors = []

    def worker(thread_index):
        try:
            own = torch.simdev.Stream()  # this thread's current stream before the `with`
            torch.simdev.set_stream(own)
            context = torch.simdev.stream(shared) if how == "stream()" else shared
            with context:
                entered.wait()  # both threads are inside, each entered after saving its own
                assert torch.simdev.current_stream() == shared
                if thread_index == 1:
                    leaving.wait()  # thread 0 leaves first, thread 1 after it
            if thread_index == 0:
                leaving.wait()
            assert torch.simdev.current_stream() == own, f"thread {thread_index} got another thread's stream back"
        except BaseException as error:  # reported by the main thread
            errors.append((thread_index, error))
            entered.abort()
            leaving.abort()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert torch.simdev.current_stream().stream_id == 0  # the main thread was never touched


# ---------------------------------------------------------------- Event


def test_event_record_wait_synchronize_query():
    e = torch.simdev.Event()
    # A plain torch.Event (torch refuses subclass instances in elapsed_time and
    # Stream.record_event), which isinstance still recognizes as a simdev Event.
    assert type(e) is torch.Event and isinstance(e, torch.simdev.Event)
    assert not isinstance(torch.Event(device="cpu"), torch.simdev.Event)
    assert not isinstance(object(), torch.simdev.Event)
    assert e.query()  # never recorded: complete
    s = torch.simdev.Stream()
    with torch.simdev.stream(s):
        torch_simdev._C._enqueue_sleep(50_000)
        e.record()
    assert e.device == torch.device("simdev:0")
    assert not e.query()
    e.wait(torch.simdev.current_stream())  # queues a wait, returns at once
    e.synchronize()
    assert e.query()


def test_event_records_on_the_device_of_its_first_stream(two_devices):
    e = torch.simdev.Event()
    e.record(torch.simdev.Stream(1))
    assert e.device == torch.device("simdev:1")
    e.synchronize()


def test_event_elapsed_time():
    start, end = torch.simdev.Event(enable_timing=True), torch.simdev.Event(enable_timing=True)
    start.record()
    torch_simdev._C._enqueue_sleep(30_000)
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 25.0  # milliseconds; the sleep was 30 ms


def test_event_blocking_is_accepted():
    e = torch.simdev.Event(blocking=True)
    e.record()
    e.synchronize()
    assert e.query()


def test_interprocess_event_is_refused_clearly():
    with pytest.raises(NotImplementedError, match="interprocess=True.*simulated inside one process"):
        torch.simdev.Event(interprocess=True)


# ---------------------------------------------------------------- ordering


def _stream_then_default_stream(wait: bool) -> list:
    x = torch.zeros(1024, device="simdev")
    torch.simdev.synchronize()
    s = torch.simdev.Stream(priority=-1)
    with torch.simdev.op_delay(20_000):  # every queued item sleeps 20 ms when it starts
        with torch.simdev.stream(s):
            x.add_(1)
            x.add_(1)
            x.add_(1)
            done = torch.simdev.Event()
            done.record()  # on s
        assert torch.simdev.current_stream().stream_id == 0
        if wait:
            torch.simdev.current_stream().wait_event(done)
        seen = x.to("cpu", non_blocking=True)  # queued on the default stream
        torch.simdev.synchronize()  # inside the delay: everything above ran delayed
    return seen.tolist()


def test_work_under_stream_context_is_ordered_by_an_event():
    assert _stream_then_default_stream(wait=True) == [3.0] * 1024


def test_without_the_event_wait_the_default_stream_reads_stale_data():
    # The control: the test above passes because of the wait, not by luck.
    seen = _stream_then_default_stream(wait=False)
    assert seen != [3.0] * 1024


def test_stream_wait_stream_orders_fsdp_style_side_streams():
    # FSDP2's pattern: a side stream waits for the current one, works, and the
    # current stream waits for it through an event.
    x = torch.zeros(4096, device="simdev")
    side = torch.simdev.Stream(priority=-1)
    with torch.simdev.op_delay(10_000):
        x.add_(1)  # default stream
        side.wait_stream(torch.simdev.current_stream())
        with torch.simdev.stream(side):
            y = x * 2
            ready = side.record_event()
        torch.simdev.current_stream().wait_event(ready)
        y.record_stream(torch.simdev.current_stream())
        seen = (y + 1).to("cpu", non_blocking=True)
        torch.simdev.synchronize()
    assert seen.tolist() == [3.0] * 4096


# ---------------------------------------------------------------- bad arguments


def test_wrong_device_types_are_refused_naming_what_to_pass():
    with pytest.raises(ValueError, match="expected a simdev device, got cuda.*simdev:0"):
        torch.simdev.Stream("cuda")
    with pytest.raises(ValueError, match="expected a simdev device, got cpu"):
        torch.simdev.Stream(torch.device("cpu"))
    with pytest.raises(ValueError, match="expected a simdev device"):
        torch.simdev.current_stream("cpu")
    with pytest.raises(ValueError, match="expected a simdev device"):
        torch.simdev.default_stream("cuda:0")
    cpu_stream = torch.Stream(device="cpu")
    with pytest.raises(ValueError, match=r"expected a simdev stream, got a stream of cpu.*torch\.simdev\.Stream\(\)"):
        torch.simdev.stream(cpu_stream)
    with pytest.raises(ValueError, match="expected a simdev stream"):
        torch.simdev.set_stream(cpu_stream)
    with pytest.raises(ValueError, match="expected a simdev stream"):
        torch.simdev.Stream(stream_id=0, device_index=-1, device_type=cpu_stream.device_type)
    assert torch.simdev.current_stream().stream_id == 0  # nothing was changed


def test_non_streams_are_refused():
    with pytest.raises(TypeError, match="expected a simdev stream, got str"):
        torch.simdev.stream("simdev:0")
    with pytest.raises(TypeError, match="expected a simdev stream, got int"):
        torch.simdev.set_stream(0)
    with pytest.raises(TypeError, match="needs all three"):
        torch.simdev.Stream(stream_id=1)


def test_device_out_of_range_is_refused():
    with pytest.raises(RuntimeError, match="is not a valid device"):
        torch.simdev.Stream(torch.simdev.device_count())


# ---------------------------------------------------------------- what device-generic code sees


def test_device_handle_has_what_fsdp2_and_device_mesh_call():
    handle = torch.get_device_module("simdev")
    assert handle is torch.simdev
    for name in (
        "Stream", "Event", "stream", "StreamContext", "set_stream", "current_stream",
        "default_stream", "current_device", "set_device", "device_count", "is_available",
        "is_initialized", "synchronize",
    ):
        assert callable(getattr(handle, name)), name
    assert handle.is_initialized() and handle.is_available()
    # simdev has no per-device generator; see device_module.py for why these stay absent.
    assert not hasattr(handle, "get_rng_state") and not hasattr(handle, "set_rng_state")
