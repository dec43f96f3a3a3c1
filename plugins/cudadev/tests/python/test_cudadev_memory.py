"""cudadev's allocator: accounting, caching, out-of-memory errors."""

import gc
import os
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.gpu

MiB = 1 << 20


def test_memory_allocated_counts_own_and_adopted_memory():
    gc.collect()  # tensors of earlier tests must not be freed halfway through
    torch.cudadev.synchronize()
    before = torch.cudadev.memory_allocated()
    x = torch.empty(MiB, device="cudadev")  # 4 MiB from cudadev's allocator
    assert torch.cudadev.memory_allocated() == before + 4 * MiB
    y = x + 1  # 4 MiB adopted from torch.cuda's caching allocator
    assert torch.cudadev.memory_allocated() == before + 8 * MiB
    assert torch.accelerator.memory_allocated(0) == torch.cudadev.memory_allocated(0)
    assert torch.cudadev.max_memory_allocated() >= before + 8 * MiB
    del x, y
    assert torch.cudadev.memory_allocated() == before


def test_empty_cache_returns_pool_memory():
    x = torch.empty(64 * MiB, dtype=torch.uint8, device="cudadev")
    del x
    torch.cudadev.synchronize()
    cached = torch.accelerator.memory_reserved(0)
    assert cached >= 64 * MiB
    torch.cudadev.empty_cache()
    assert torch.accelerator.memory_reserved(0) < cached


def test_out_of_memory_names_device_size_and_fix():
    total = torch.cuda.mem_get_info()[1]
    with pytest.raises(
        torch.OutOfMemoryError,
        match=r"out of memory on cudadev:0 allocating .* torch\.cudadev\.empty_cache\(\)",
    ):
        torch.empty(2 * total, dtype=torch.uint8, device="cudadev")
    # The failed allocation left nothing behind.
    assert torch.ones(4, device="cudadev").sum().item() == 4.0


# ------------------------------------------------------- the caching front

SLEEP_MS = 200


@pytest.fixture
def empty_cache():
    """Blocks cached by earlier tests would serve these tests' requests (a
    cached block serves requests up to a quarter smaller than itself)."""
    torch.cudadev.empty_cache()


def device_allocations():
    return torch.accelerator.memory_stats(0)["num_device_alloc"]


def device_frees():
    return torch.accelerator.memory_stats(0)["num_device_free"]


def test_freed_block_serves_the_next_request_of_its_size_on_its_stream(empty_cache):
    x = torch.empty(3 * MiB + 100, dtype=torch.uint8, device="cudadev")
    address = x.data_ptr()
    del x
    before = device_allocations()
    y = torch.empty(3 * MiB + 50, dtype=torch.uint8, device="cudadev")  # the same 512-byte rounding
    assert y.data_ptr() == address
    assert device_allocations() == before  # no CUDA call
    z = torch.empty(6 * MiB, dtype=torch.uint8, device="cudadev")  # nothing cached that size
    assert device_allocations() == before + 1
    del y, z


def test_cached_block_is_not_handed_to_another_stream(empty_cache):
    side = torch.Stream(device="cudadev")
    with side:
        x = torch.empty(5 * MiB, dtype=torch.uint8, device="cudadev")
        address = x.data_ptr()
        del x  # waits in the side stream's free list
    before = device_allocations()
    y = torch.empty(5 * MiB, dtype=torch.uint8, device="cudadev")  # default stream
    assert y.data_ptr() != address
    assert device_allocations() == before + 1
    with side:
        z = torch.empty(5 * MiB, dtype=torch.uint8, device="cudadev")
        assert z.data_ptr() == address
    del y, z


def test_block_used_on_another_stream_goes_back_to_the_pool(empty_cache):
    side = torch.Stream(device="cudadev")
    x = torch.empty(7 * MiB, dtype=torch.uint8, device="cudadev")
    x.record_stream(side)
    frees = device_frees()
    del x  # freed to the pool after the side stream's work, never cached
    assert device_frees() == frees + 1
    before = device_allocations()
    y = torch.empty(7 * MiB, dtype=torch.uint8, device="cudadev")
    assert device_allocations() == before + 1
    del y


def test_reused_block_is_written_only_after_its_old_readers_ran(empty_cache):
    side = torch.Stream(device="cudadev")
    n = 1 << 20
    with side:
        torch.cudadev._sleep_on_current_stream(0)
        side.synchronize()
        torch.cudadev._sleep_on_current_stream(SLEEP_MS)
        a = torch.full((n,), 1.0, device="cudadev")
        address = a.data_ptr()
        total = a.sum()  # reads `a` after the sleep
        del a
        b = torch.empty(n, device="cudadev")  # `a`'s block, queued behind the sum
        assert b.data_ptr() == address
        b.fill_(5.0)
        assert total.item() == n
        assert b.sum().item() == 5.0 * n


def test_empty_cache_gives_cached_blocks_back(empty_cache):
    x = torch.empty(9 * MiB, dtype=torch.uint8, device="cudadev")
    del x  # cached
    frees = device_frees()
    torch.cudadev.empty_cache()
    assert device_frees() >= frees + 1
    before = device_allocations()
    y = torch.empty(9 * MiB, dtype=torch.uint8, device="cudadev")
    assert device_allocations() == before + 1
    del y


def test_cache_off_with_the_environment_knob():
    script = (
        "import torch, torch_cudadev\n"
        "stats = lambda: torch.accelerator.memory_stats(0)['num_device_alloc']\n"
        "x = torch.empty(1 << 20, device='cudadev'); del x\n"
        "before = stats()\n"
        "y = torch.empty(1 << 20, device='cudadev')\n"
        "print(stats() - before)\n"
    )
    env = {**os.environ, "CUDADEV_ALLOCATOR_CACHE": "0", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "1"
