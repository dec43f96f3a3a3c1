"""cudadev's own streams and events, through PyTorch's generic stream API."""

import threading

import pytest
import torch

pytestmark = pytest.mark.gpu


def test_current_stream_native_handle_is_the_plugin_stream():
    stream = torch.accelerator.current_stream()
    assert stream.device == torch.device("cudadev:0")
    assert stream.native_handle == torch.cudadev._current_stream_handle()
    if not torch.cudadev._default_stream_is_null_stream():
        # cudadev never uses CUDA's legacy default stream unless asked to
        # (CUDADEV_USE_NULL_STREAM=1), so it is not torch.cuda's default either.
        assert stream.native_handle != 0
        assert stream.native_handle != torch.cuda.current_stream().cuda_stream


def test_new_streams_are_distinct_and_become_current():
    default = torch.cudadev.default_stream()
    a = torch.Stream(device="cudadev")
    b = torch.Stream(device="cudadev")
    high = torch.Stream(device="cudadev", priority=-1)
    handles = [default.native_handle, a.native_handle, b.native_handle, high.native_handle]
    assert len(set(handles)) == 4
    assert all(h != 0 for h in handles[1:])
    with a:
        assert torch.accelerator.current_stream() == a
        assert torch.cudadev._current_stream_handle() == a.native_handle
    assert torch.cudadev._current_stream_handle() == default.native_handle


def test_current_stream_is_per_thread():
    stream = torch.Stream(device="cudadev")
    torch.accelerator.set_stream(stream)
    seen = {}

    def other_thread():
        seen["handle"] = torch.cudadev._current_stream_handle(0)

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    assert seen["handle"] == torch.cudadev.default_stream(0).native_handle
    assert torch.cudadev._current_stream_handle(0) == stream.native_handle


def test_stream_query_and_synchronize():
    stream = torch.Stream(device="cudadev")
    torch.cudadev._sleep_on_current_stream(0)  # load the spin kernel outside the timed part
    with stream:
        torch.cudadev._sleep_on_current_stream(150)
    assert not stream.query()
    stream.synchronize()
    assert stream.query()


def test_timed_events_measure_a_sleep():
    stream = torch.Stream(device="cudadev")
    start = torch.Event(device="cudadev", enable_timing=True)
    end = torch.Event(device="cudadev", enable_timing=True)
    torch.cudadev._sleep_on_current_stream(0)
    with stream:
        start.record(stream)
        torch.cudadev._sleep_on_current_stream(100)
        end.record(stream)
    assert not end.query()
    end.synchronize()
    assert end.query()
    assert 50.0 < start.elapsed_time(end) < 10_000.0


def test_elapsed_time_needs_timing_events():
    a = torch.Event(device="cudadev")
    b = torch.Event(device="cudadev")
    stream = torch.accelerator.current_stream()
    a.record(stream)
    b.record(stream)
    b.synchronize()
    with pytest.raises((RuntimeError, ValueError), match="enable_timing=True"):
        a.elapsed_time(b)


def test_foreign_stream_ids_are_rejected_with_the_fix():
    bogus = torch.Stream(
        stream_id=12345,
        device_index=0,
        device_type=torch.cudadev.default_stream().device_type,
    )
    with pytest.raises(RuntimeError, match="not a cudadev stream"):
        bogus.native_handle
