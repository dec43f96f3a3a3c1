"""torch.cuda and cudadev in one process, each with its own current stream."""

import pytest
import torch

pytestmark = pytest.mark.gpu

N = 1 << 22
CUDA_SLEEP_CYCLES = 400_000_000  # a few hundred ms on an H200


def warm_up():
    a = torch.zeros(N, device="cuda")
    b = torch.zeros(N, device="cudadev")
    a.add_(1)
    b.add_(1)
    a.to("cudadev").cpu()
    b.to("cuda").cpu()
    torch.cuda._sleep(1)
    torch.cudadev._sleep_on_current_stream(0)
    torch.cuda.synchronize()


def test_both_backends_work_with_their_own_current_streams():
    cuda_stream = torch.cuda.Stream()
    cudadev_stream = torch.Stream(device="cudadev")
    with torch.cuda.stream(cuda_stream), cudadev_stream:
        assert torch.cuda.current_stream() == cuda_stream
        assert torch.cudadev._current_stream_handle() == cudadev_stream.native_handle
        assert cudadev_stream.native_handle != cuda_stream.cuda_stream
        a = torch.full((1000,), 2.0, device="cuda") * 3
        b = torch.full((1000,), 5.0, device="cudadev") * 7
        # Neither backend's operators disturb the other's current stream.
        assert torch.cuda.current_stream() == cuda_stream
        assert torch.cudadev._current_stream_handle() == cudadev_stream.native_handle
        c = a.to("cudadev") + b
        d = b.to("cuda") + a
    cuda_stream.synchronize()
    cudadev_stream.synchronize()
    assert torch.all(c.cpu() == 41.0)
    assert torch.all(d.cpu() == 41.0)


def test_copy_from_cuda_waits_for_the_cuda_stream():
    warm_up()
    cuda_stream = torch.cuda.Stream()
    cudadev_stream = torch.Stream(device="cudadev")
    a = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(cuda_stream):
        torch.cuda._sleep(CUDA_SLEEP_CYCLES)
        a.add_(1)
        with cudadev_stream:
            b = a.to("cudadev")  # must wait for the add on the torch.cuda stream
            host = b.cpu()
    assert torch.all(host == 1)


def test_copy_to_cuda_makes_the_cuda_stream_wait():
    warm_up()
    cuda_stream = torch.cuda.Stream()
    cudadev_stream = torch.Stream(device="cudadev")
    b = torch.zeros(N, device="cudadev")
    torch.cudadev.synchronize()
    with cudadev_stream:
        torch.cudadev._sleep_on_current_stream(200)
        b.add_(1)
    host = torch.empty(N, pin_memory=True)
    with torch.cuda.stream(cuda_stream), cudadev_stream:
        a = b.to("cuda")  # copied on the cudadev stream, after the add
        host.copy_(a, non_blocking=True)  # torch.cuda reads on its own stream
    cuda_stream.synchronize()  # waits for that stream only
    assert torch.all(host == 1), "the torch.cuda stream did not wait for the copy"
