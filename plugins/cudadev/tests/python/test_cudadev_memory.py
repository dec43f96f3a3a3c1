"""cudadev's allocator: accounting, caching, out-of-memory errors."""

import gc

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
