"""The caching allocator's statistics, cache, and out-of-memory errors."""

import pytest
import torch
from simdev_subprocess import run_python  # a fresh process: the capacity is fixed per process

torch_simdev = pytest.importorskip(
    "torch_simdev", reason="torch_simdev is not installed; build it with: pip install --no-build-isolation plugins/simdev"
)

MIB = 1 << 20


def test_allocated_and_reserved_bytes():
    torch.simdev.synchronize()
    torch.simdev.empty_cache()
    base_allocated = torch.simdev.memory_allocated()
    base_reserved = torch.simdev.memory_reserved()
    torch.simdev.reset_peak_memory_stats()
    x = torch.empty(MIB, dtype=torch.uint8, device="simdev")
    assert torch.simdev.memory_allocated() == base_allocated + MIB
    assert torch.simdev.memory_reserved() == base_reserved + MIB
    assert torch.simdev.max_memory_allocated() >= base_allocated + MIB
    assert torch.accelerator.memory_allocated() == torch.simdev.memory_allocated()
    del x
    assert torch.simdev.memory_allocated() == base_allocated
    assert torch.simdev.memory_reserved() == base_reserved + MIB  # cached, not returned
    assert torch.simdev.max_memory_allocated() >= base_allocated + MIB
    torch.simdev.empty_cache()
    assert torch.simdev.memory_reserved() == base_reserved


def test_sizes_are_rounded_to_512_bytes():
    torch.simdev.empty_cache()
    base = torch.simdev.memory_allocated()
    x = torch.empty(3, dtype=torch.uint8, device="simdev")
    assert torch.simdev.memory_allocated() == base + 512
    del x


def test_mem_get_info_tracks_the_runtime():
    # (free, total), like torch.cuda.mem_get_info
    torch.simdev.empty_cache()
    free_before, total = torch.simdev.mem_get_info()
    assert total > 0 and 0 < free_before <= total
    x = torch.empty(4 * MIB, dtype=torch.uint8, device="simdev")
    free_after, _ = torch.simdev.mem_get_info()
    assert free_before - free_after == 4 * MIB
    del x


def test_accelerator_memory_stats():
    x = torch.empty(MIB, dtype=torch.uint8, device="simdev")
    stats = torch.accelerator.memory_stats(0)
    assert stats["allocated_bytes.all.current"] >= MIB
    assert stats["reserved_bytes.all.current"] >= MIB
    del x
    torch.accelerator.empty_cache()


def test_allocation_beyond_capacity_raises_out_of_memory():
    _, total = torch.simdev.mem_get_info()
    with pytest.raises(torch.OutOfMemoryError) as info:
        torch.empty(total + MIB, dtype=torch.uint8, device="simdev")
    message = str(info.value)
    assert "simdev out of memory on simdev:0" in message
    assert "torch.simdev.empty_cache()" in message
    assert "SIMDEV_MEMORY_CAPACITY" in message
    assert torch.simdev.memory_stats()["num_ooms"] >= 1


def test_out_of_memory_with_a_small_capacity():
    result = run_python(
        """
        import torch
        keep = [torch.empty(1 << 20, dtype=torch.uint8, device="simdev") for _ in range(3)]
        try:
            torch.empty(2 << 20, dtype=torch.uint8, device="simdev")
        except torch.OutOfMemoryError as error:
            print("OOM:", error)
        else:
            print("no error")
        """,
        SIMDEV_MEMORY_CAPACITY=str(4 * MIB),
    )
    assert result.returncode == 0, result.stderr
    assert "OOM: simdev out of memory on simdev:0: tried to allocate 2.00 MiB" in result.stdout
    assert "3.00 MiB in use of its 4.00 MiB capacity" in result.stdout
    assert "Free tensors you no longer need" in result.stdout


def test_out_of_memory_releases_the_cache_and_retries():
    result = run_python(
        """
        import torch
        x = torch.empty(3 << 20, dtype=torch.uint8, device="simdev")
        del x  # cached: 3 MiB stay reserved
        y = torch.empty((3 << 20) + (512 << 10), dtype=torch.uint8, device="simdev")  # too big for the cached block
        stats = torch.simdev.memory_stats()
        print("retries", stats["num_alloc_retries"], "ooms", stats["num_ooms"], "reserved", stats["reserved_bytes"])
        """,
        SIMDEV_MEMORY_CAPACITY=str(4 * MIB),
    )
    assert result.returncode == 0, result.stderr
    assert f"retries 1 ooms 0 reserved {(3 << 20) + (512 << 10)}" in result.stdout
