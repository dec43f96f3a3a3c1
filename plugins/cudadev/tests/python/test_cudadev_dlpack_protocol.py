"""devbridge on cudadev (issue #12): the Python DLPack protocol on cudadev
tensors, `__dlpack__(stream=...)` ordering a consumer's CUDA stream after the
producer's work with a GPU event (cudadev's own streams and a torch.cuda
stream of the same GPU, through cudadev's external-stream hook), cudadev's
fast current-stream query, and torch.cuda tensors behaving exactly as with
torch alone.

Ordering is proven with a GPU spin on the producer's stream: without the wait,
the consumer's copy reads the old values.
"""

import ctypes
import itertools

import pytest
import torch

pytestmark = pytest.mark.gpu

devbridge = pytest.importorskip("devbridge", reason="devbridge is not installed")

N = 1 << 22
SPIN_MS = 200
kDLExtDev = 12


@pytest.fixture(autouse=True)
def _installed():
    devbridge.install()
    yield


def warm_up(x):
    torch.cudadev._sleep_on_current_stream(0)
    x.add_(0).clone()
    torch.cudadev.synchronize()


def produce_behind_a_spin(x, producer, value):
    with producer:
        torch.cudadev._sleep_on_current_stream(SPIN_MS)
        x.fill_(value)


def value_on(stream, x):
    """min(x) as read by a copy queued on `stream` now."""
    with stream:
        copy = x.clone()
    stream.synchronize()
    return float(copy.cpu().min())


def cuda_stream_as_torch_stream(cuda_stream):
    """A torch.cuda stream of GPU 0, named as a cudadev stream (cudadev's
    external stream ids)."""
    stream_id = torch_cudadev()._C._stream_id_of(0, cuda_stream.cuda_stream)
    return torch.Stream(stream_id=stream_id, device_index=0,
                        device_type=torch_cudadev()._C._privateuse1_device_type())


def torch_cudadev():
    import torch_cudadev as module

    return module


def test_dlpack_device_and_round_trips_share_memory():
    x = torch.arange(12.0, device="cudadev:0").reshape(3, 4)[:, 1:]
    assert x.__dlpack_device__() == (kDLExtDev, 0)
    for source in (x, x.__dlpack__(), x.__dlpack__(max_version=(1, 3))):
        y = torch.from_dlpack(source)
        assert y.device == x.device and y.data_ptr() == x.data_ptr() and y.stride() == x.stride()
    torch.from_dlpack(x).fill_(7.0)
    assert torch.all(x.cpu() == 7.0)


def test_a_cudadev_stream_waits_for_the_producer_on_the_gpu():
    x = torch.zeros(N, device="cudadev")
    warm_up(x)
    producer, consumer = torch.Stream(device="cudadev"), torch.Stream(device="cudadev")
    produce_behind_a_spin(x, producer, 1.0)
    with producer:
        x.__dlpack__(stream=consumer.native_handle, max_version=(1, 3))
    assert value_on(consumer, x) == 1.0
    producer.synchronize()
    produce_behind_a_spin(x, producer, 2.0)
    with producer:
        x.__dlpack__(stream=-1, max_version=(1, 3))
    assert value_on(consumer, x) == 1.0  # not 2.0: no wait, so the read came first
    producer.synchronize()


def test_a_torch_cuda_stream_of_the_gpu_waits_through_the_external_stream_hook():
    x = torch.zeros(N, device="cudadev")
    warm_up(x)
    producer = torch.Stream(device="cudadev")
    cuda_consumer = torch.cuda.Stream(0)
    produce_behind_a_spin(x, producer, 3.0)
    with producer:
        x.__dlpack__(stream=cuda_consumer.cuda_stream, max_version=(1, 3))
    assert value_on(cuda_stream_as_torch_stream(cuda_consumer), x) == 3.0


def test_none_orders_cudadevs_default_stream():
    x = torch.zeros(N, device="cudadev")
    warm_up(x)
    producer = torch.Stream(device="cudadev")
    produce_behind_a_spin(x, producer, 4.0)
    with producer:
        x.__dlpack__(stream=None, max_version=(1, 3))
    assert value_on(torch.cudadev.default_stream(0), x) == 4.0


def test_copy_on_the_consumer_stream_after_the_producer():
    x = torch.zeros(N, device="cudadev")
    warm_up(x)
    producer, consumer = torch.Stream(device="cudadev"), torch.Stream(device="cudadev")
    produce_behind_a_spin(x, producer, 5.0)
    with producer:
        copy = torch.from_dlpack(x.__dlpack__(stream=consumer.native_handle, max_version=(1, 3), copy=True))
    assert copy.data_ptr() != x.data_ptr()
    assert value_on(consumer, copy) == 5.0


def test_cudadev_registers_its_fast_query_and_it_answers_the_live_stream():
    assert devbridge._C.native_stream_source("cudadev", 0) == "current-stream-query"
    assert devbridge._C._has_external_stream_hook("cudadev")
    side = torch.Stream(device="cudadev")
    with side:
        assert devbridge.current_stream("cudadev:0") == side.native_handle
        query = devbridge._C._current_stream_query("cudadev")
        devbridge.register_current_stream_query(None, "cudadev")
        try:
            assert devbridge._C.native_stream_source("cudadev", 0) == "guard"
            assert devbridge.current_stream("cudadev:0") == side.native_handle
        finally:
            devbridge.register_current_stream_query(query, "cudadev")
    assert devbridge.current_stream("cudadev:0") == torch.cudadev._current_stream_handle()


def test_external_cuda_streams_work_as_torch_streams():
    cuda_stream = torch.cuda.Stream(0)
    stream = cuda_stream_as_torch_stream(cuda_stream)
    assert stream.native_handle == cuda_stream.cuda_stream
    with stream:
        assert devbridge.current_stream("cudadev:0") == cuda_stream.cuda_stream
        y = torch.ones(4, device="cudadev") * 2  # runs on the torch.cuda stream
    cuda_stream.synchronize()
    assert y.cpu().tolist() == [2.0] * 4


# ---------------------------------------------------------------- torch.cuda tensors: torch's own behaviour


def outcome(call):
    try:
        capsule = call()
        get_name = ctypes.pythonapi.PyCapsule_GetName
        get_name.restype = ctypes.c_char_p
        get_name.argtypes = [ctypes.py_object]
        return ("capsule", get_name(capsule))
    except Exception as error:  # noqa: BLE001 - the comparison is the test
        return ("error", type(error), str(error))


@pytest.mark.parametrize("stream,max_version,copy", list(itertools.product(
    ["none", -1, 1, 2, 0, "external"], [None, (1, 0)], [None, True])))
def test_cuda_tensors_behave_exactly_as_with_torch_alone(stream, max_version, copy):
    from devbridge import _torch_dlpack_api

    x = torch.arange(8.0, device="cuda:0")
    side = torch.cuda.Stream(0)
    value = {"none": None, "external": side.cuda_stream}.get(stream, stream)
    kwargs = dict(stream=value, max_version=max_version, copy=copy)
    ours = outcome(lambda: x.__dlpack__(**kwargs))
    torchs = outcome(lambda: _torch_dlpack_api.original_dlpack()(x, **kwargs))
    assert ours == torchs
    assert x.__dlpack_device__() == _torch_dlpack_api.original_dlpack_device()(x)
    assert torch.from_dlpack(x).data_ptr() == x.data_ptr()
