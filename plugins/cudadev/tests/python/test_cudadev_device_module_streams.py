"""torch.cudadev's torch.cuda-style names (Stream, Event, stream,
StreamContext, set_stream, current_stream, default_stream, get_rng_state,
set_rng_state): what device-generic torch code such as FSDP2's fully_shard,
DeviceMesh and DTensor's random-number tracker calls on
getattr(torch, device_type). simdev's counterpart:
plugins/simdev/tests/python/test_device_module_streams.py."""

import threading

import pytest
import torch

pytestmark = pytest.mark.gpu

two_gpus = pytest.mark.skipif(
    torch.cuda.device_count() < 2, reason="needs two GPUs (cudadev:0 and cudadev:1)"
)


def test_stream_is_a_torch_stream_with_its_methods():
    s = torch.cudadev.Stream()
    assert isinstance(s, torch.Stream) and isinstance(s, torch.cudadev.Stream)
    assert s.device == torch.device("cudadev:0")
    assert s.stream_id != 0 and s.native_handle != 0
    assert s.query()
    s.synchronize()
    s.wait_stream(torch.cudadev.current_stream())
    event = s.record_event()
    assert isinstance(event, torch.Event) and isinstance(event, torch.cudadev.Event)
    s.wait_event(event)
    event.synchronize()
    assert event.query()
    with torch.cudadev.stream(s):
        plain = torch.accelerator.current_stream()
    assert type(plain) is torch.Stream
    assert plain == s and hash(plain) == hash(s)


def test_priorities_pick_distinct_streams():
    high = torch.cudadev.Stream(priority=-1)  # what FSDP2 asks for
    low = torch.cudadev.Stream()
    assert high.native_handle != low.native_handle
    assert torch.cudadev.Stream(-1).device_index == 0  # negative: the current device


def test_current_and_default_stream_are_cudadev_streams():
    current = torch.cudadev.current_stream()
    assert isinstance(current, torch.cudadev.Stream)
    assert current == torch.accelerator.current_stream() == torch.cudadev.default_stream()
    assert current.native_handle == torch.cudadev._current_stream_handle()


def test_stream_context_makes_the_stream_current_and_restores():
    default = torch.cudadev.current_stream()
    a, b = torch.cudadev.Stream(), torch.cudadev.Stream()
    with torch.cudadev.stream(a) as entered:
        assert entered is a
        assert torch.cudadev._current_stream_handle() == a.native_handle
        with torch.cudadev.stream(b):
            assert torch.cudadev.current_stream() == b
        assert torch.cudadev.current_stream() == a
    assert torch.cudadev.current_stream() == default
    with torch.cudadev.stream(None) as entered:
        assert entered is None and torch.cudadev.current_stream() == default
    with a:
        assert torch.cudadev.current_stream() == a
        with a:
            assert torch.cudadev.current_stream() == a
        assert torch.cudadev.current_stream() == a
    assert torch.cudadev.current_stream() == default
    torch.cudadev.set_stream(b)
    assert torch.cudadev.current_stream() == b
    torch.cudadev.set_stream(default)


@two_gpus
def test_stream_context_across_devices_restores_both():
    side1 = torch.cudadev.Stream(1)
    torch.cudadev.set_stream(side1)
    torch.cudadev.set_device(0)
    default0 = torch.cudadev.current_stream(0)
    s1 = torch.cudadev.Stream(1)
    with torch.cudadev.stream(s1):
        assert torch.cudadev.current_device() == 1
        assert torch.cudadev.current_stream(1) == s1
        assert torch.cudadev.current_stream(0) == default0
    assert torch.cudadev.current_device() == 0
    assert torch.cudadev.current_stream(0) == default0
    assert torch.cudadev.current_stream(1) == side1
    torch.cudadev.set_stream(torch.cudadev.default_stream(1))
    torch.cudadev.set_device(0)


@pytest.mark.parametrize("how", ["stream()", "with stream"])
def test_threads_entering_one_stream_each_restore_their_own(how):
    shared = torch.cudadev.Stream()
    entered, leaving = threading.Barrier(2), threading.Barrier(2)
    errors = []

    def worker(thread_index):
        try:
            own = torch.cudadev.Stream()
            torch.cudadev.set_stream(own)
            context = torch.cudadev.stream(shared) if how == "stream()" else shared
            with context:
                entered.wait()
                assert torch.cudadev.current_stream() == shared
                if thread_index == 1:
                    leaving.wait()  # thread 0 leaves first
            if thread_index == 0:
                leaving.wait()
            assert torch.cudadev.current_stream() == own, f"thread {thread_index} got another thread's stream back"
        except BaseException as error:
            errors.append((thread_index, error))
            entered.abort()
            leaving.abort()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_event_timing_and_ordering():
    torch.cudadev._sleep_on_current_stream(0)  # load the spin kernel outside the timed part
    x = torch.zeros(1 << 20, device="cudadev")
    torch.cudadev.synchronize()
    s = torch.cudadev.Stream(priority=-1)
    start, end = torch.cudadev.Event(enable_timing=True), torch.cudadev.Event(enable_timing=True)
    with torch.cudadev.stream(s):
        start.record()
        torch.cudadev._sleep_on_current_stream(100)
        x.add_(1)
        end.record()
    assert not end.query()
    torch.cudadev.current_stream().wait_event(end)
    seen = x.to("cpu")  # queued on the default stream, after the wait
    assert torch.equal(seen, torch.ones(1 << 20))
    end.synchronize()
    assert end.query()
    assert 50.0 < start.elapsed_time(end) < 10_000.0


def test_rng_state_is_torch_cudas_of_the_same_gpu():
    state = torch.cudadev.get_rng_state()
    assert torch.equal(state, torch.cuda.get_rng_state(0))
    first = torch.rand(8, device="cudadev").cpu()
    torch.cudadev.set_rng_state(state)
    assert torch.equal(torch.rand(8, device="cudadev").cpu(), first)
    assert torch.equal(torch.cudadev.get_rng_state("cudadev:0"), torch.cuda.get_rng_state(0))


def test_bad_arguments_are_refused_naming_what_to_pass():
    with pytest.raises(ValueError, match="expected a cudadev device, got cuda.*cudadev:0"):
        torch.cudadev.Stream("cuda")
    with pytest.raises((ValueError, TypeError), match="expected a cudadev stream"):
        torch.cudadev.stream(torch.cuda.current_stream())
    with pytest.raises(TypeError, match="expected a cudadev stream, got str"):
        torch.cudadev.set_stream("cudadev:0")
    with pytest.raises(NotImplementedError, match="interprocess=True"):
        torch.cudadev.Event(interprocess=True)
