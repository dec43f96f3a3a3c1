"""The Ascend parameter layout on simdev: devbridge's launcher packs the
argument block triton-ascend's kernels take ([ffts] [lock, workspace], the
arguments at their 4/8-byte alignments, the int32 grid; a 1-D launch of
blocks), and simdev kernels that declare that block as triton-ascend's
generated launcher does check every field, bit for bit.

The kernels are tests/python/kernels/simdev_ascend_kernels.cc. The same
packing, lock fill and workspace code serve the CANN kernel runtime, which
only differs in handing the block to aclrtLaunchKernelWithHostArgs.
"""

from __future__ import annotations

import functools
import struct

import pytest
import torch

import devbridge
from devbridge import _C, launch

from launch_support import compile_library, run, simdev_runtime, skip_without_simdev, sync

pytestmark = skip_without_simdev

PROBE = {"out": "*i64", "a": "i1", "b": "i8", "c": "i16", "d": "i32", "e": "i64", "f": "fp16", "g": "bf16",
         "h": "fp32", "k": "fp64", "u": "u32", "p": "*fp32", "BLOCK": "constexpr"}
PLAIN = {"out": "*i64", "x": "i32"}
LOCKS = {"out": "*i64", "lock_num": "i32", "tag": "i64", "wait_ms": "i32"}


@functools.lru_cache(maxsize=None)
def ascend_kernels() -> bytes:
    import pathlib

    import torch_simdev

    source = pathlib.Path(__file__).parent / "kernels" / "simdev_ascend_kernels.cc"
    return compile_library(source, f"-I{torch_simdev.get_include()}").read_bytes()


def load(name, device="simdev:0"):
    return launch.load_binary(ascend_kernels(), name, device=device, runtime=simdev_runtime())


def ascend_launcher(signature, name, **metadata):
    return launch.launcher(signature, name=name, layout="ascend", **metadata)


def bits(fmt, value):
    return struct.unpack("<Q", struct.pack(fmt, value).ljust(8, b"\0"))[0]


def test_every_field_of_the_block_is_where_triton_ascend_puts_it():
    kernel = load("ascend_probe")
    launcher = ascend_launcher(PROBE, "probe", ffts=True, workspace_size=64, lock_num=2)
    out = torch.zeros(32, dtype=torch.int64, device="simdev:0")
    p = torch.zeros(4, device="simdev:0")
    run(launcher, (3, 2, 1), kernel, out, True, -5, -300, -70000, -(2**40), 1.5, -2.25, 3.125, -1e300, 2**32 - 1,
        p, 64)
    sync()
    record = [v & (2**64 - 1) for v in out.cpu().tolist()]
    size, ffts, lock, workspace = record[:4]
    # The kernel refuses a block whose size is not sizeof its packed struct:
    # 3 leading pointers, out, a b c d in 4-byte slots, e at 48, f g h, k at 72,
    # u, p at 88, the grid at 96..108, rounded up to 8.
    assert size == 112
    assert ffts == _C.kernel_runtime_hardware_sync_address(simdev_runtime(), 0) != 0
    assert lock != 0 and workspace != 0 and lock % 8 == 0 and workspace % 8 == 0 and lock != workspace
    assert record[4:15] == [1, bits("<b", -5), bits("<h", -300), bits("<i", -70000), bits("<q", -(2**40)),
                            bits("<f", 1.5), bits("<f", -2.25), bits("<f", 3.125), bits("<d", -1e300),
                            2**32 - 1, p.data_ptr()]
    assert record[15:19] == [3, 2, 1, 6]  # gridX, gridY, gridZ; 6 blocks, 1-D
    assert launcher.param_sizes == (8, 8, 8, 8, 4, 1, 2, 4, 8, 4, 4, 4, 8, 4, 8, 4, 4, 4)


def test_fp16_and_bf16_travel_as_fp32_values():
    """triton-ascend passes half-precision scalars as float: the kernel sees the fp32 bits, not fp16's."""
    kernel = load("ascend_probe")
    launcher = ascend_launcher(PROBE, "probe", ffts=True)
    out = torch.zeros(32, dtype=torch.int64, device="simdev:0")
    run(launcher, (1,), kernel, out, 0, 0, 0, 0, 0, 65504.0, 1e30, 0.0, 0.0, 0, None, 64)
    sync()
    record = out.cpu().tolist()
    assert record[2] == 0 and record[3] == 0  # no lock, no workspace: NULL, but their slots are there
    assert record[9] == bits("<f", 65504.0) and record[10] == bits("<f", 1e30)
    with pytest.raises(ValueError, match=r"argument 6 \('f'\) of kernel 'probe' is an fp16 parameter, and 1e\+39 "
                                         r"is too large"):
        run(launcher, (1,), kernel, out, 0, 0, 0, 0, 0, 1e39, 0.0, 0.0, 0.0, 0, None, 64)


@pytest.mark.parametrize("grid", [(5,), (3, 4), (2, 3, 4)], ids=["1d", "2d", "3d"])
def test_a_one_dimensional_launch_of_every_program_the_kernel_maps_back(grid):
    kernel = load("ascend_plain")
    launcher = ascend_launcher(PLAIN, "plain", simt_only=True)
    assert launcher.param_sizes == (8, 4, 4, 4, 4)  # no leading slots at all
    gx, gy, gz = (tuple(grid) + (1, 1))[:3]
    total = gx * gy * gz
    out = torch.zeros(total + 1, dtype=torch.int64, device="simdev:0")
    run(launcher, grid, kernel, out, 77)
    sync()
    expected = [1 + x + 1000 * y + 1000000 * z for z in range(gz) for y in range(gy) for x in range(gx)]
    assert out.cpu().tolist() == expected + [77]


@pytest.mark.parametrize("vector_cores, blocks", [(False, 1), (True, 2)])
def test_cap_blocks_launches_at_most_the_core_count(vector_cores, blocks):
    """simdev has one AI core (its stream worker); a vector-core kernel gets twice as many, as on an NPU."""
    kernel = load("ascend_locks")
    launcher = ascend_launcher(LOCKS, "locks", cap_blocks=True, vector_cores=vector_cores, workspace_size=8)
    out = torch.full((128,), -7, dtype=torch.int64, device="simdev:0")
    run(launcher, (6,), kernel, out, 0, 40, 0)
    sync()
    record = out.cpu().tolist()
    assert record[0] == blocks
    assert record[100:100 + blocks] == [40 + b for b in range(blocks)] and record[100 + blocks] == -7


@pytest.mark.parametrize("init", [0, 1, -1, 0x123456789])
def test_the_lock_is_initialised_in_stream_order(init):
    """The first kernel, delayed, leaves 999 in its lock words; the block is
    reused by the second launch at once (stream-ordered reuse), so a lock
    initialised at launch time instead of on the stream (triton-ascend's
    synchronous rtMemcpy) would be overwritten before the second kernel runs."""
    kernel = load("ascend_locks")
    launcher = ascend_launcher(LOCKS, "locks", lock_num=4, lock_init_value=init, workspace_size=8)
    first = torch.zeros(128, dtype=torch.int64, device="simdev:0")
    second = torch.zeros(128, dtype=torch.int64, device="simdev:0")
    sync()
    torch.simdev.set_op_delay_us(30_000)
    try:
        run(launcher, (2,), kernel, first, 4, 10, 100)
        run(launcher, (2,), kernel, second, 4, 20, 0)
    finally:
        torch.simdev.set_op_delay_us(0)
    sync()
    assert first.cpu().tolist()[:5] == [2] + [init] * 4
    assert second.cpu().tolist()[:5] == [2] + [init] * 4
    assert second.cpu().tolist()[100:102] == [20, 21]  # each block's workspace slot, intact


def test_the_launch_does_not_synchronize():
    kernel = load("ascend_locks")
    launcher = ascend_launcher(LOCKS, "locks", lock_num=1, workspace_size=8)
    out = torch.zeros(128, dtype=torch.int64, device="simdev:0")
    side = torch.Stream(device="simdev:0")
    sync()
    with side:
        run(launcher, (1,), kernel, out, 1, 0, 200, stream=side.native_handle)
        assert not side.query(), "the launch waited for the kernel"
    side.synchronize()
    assert out.cpu().tolist()[100] == 0


def test_workspace_and_lock_need_the_launch_stream_to_be_current():
    kernel = load("ascend_locks")
    launcher = ascend_launcher(LOCKS, "locks", lock_num=1)
    side = torch.Stream(device="simdev:0")
    out = torch.zeros(128, dtype=torch.int64, device="simdev:0")
    with pytest.raises(ValueError, match="needs scratch memory, which comes from the framework allocator on the "
                                         "current stream"):
        run(launcher, (1,), kernel, out, 1, 0, 0, stream=side.native_handle)


def test_bad_ascend_metadata_names_the_problem():
    with pytest.raises(ValueError, match="'layout' must be 'triton' or 'ascend', got 'npu'"):
        launch.launcher(PLAIN, layout="npu")
    with pytest.raises(ValueError, match="'lock_num' belongs to the Ascend layout; pass layout='ascend'"):
        launch.launcher(PLAIN, lock_num=1)
    with pytest.raises(ValueError, match="simt_only Ascend kernel has no lock and workspace slots"):
        ascend_launcher(PLAIN, "plain", simt_only=True, workspace_size=8)
    with pytest.raises(ValueError, match="has no global/profile scratch"):
        ascend_launcher(PLAIN, "plain", global_scratch_size=8)
    with pytest.raises(ValueError, match="'workspace_size' must be a non-negative int"):
        ascend_launcher(PLAIN, "plain", workspace_size=-1)


def test_a_runtime_without_the_layout_refuses_it():
    """simdev's interpreter target launches the Triton layout only."""
    import torch_simdev

    interpreter = launch.kernel_runtime("simdev-interpreter", library=torch_simdev.runtime_library_path())
    assert _C.kernel_runtime_layouts(interpreter) == 1
    assert _C.kernel_runtime_layouts(simdev_runtime()) == 3
    assert _C.kernel_runtime_layouts(launch.kernel_runtime("ascend")) == 2


def test_the_ascend_runtime_names_cann_when_it_is_missing():
    """No CANN here: the first call that needs libascendcl says so and names the fix."""
    runtime = launch.kernel_runtime("ascend")
    with pytest.raises(RuntimeError, match=r"cannot open libascendcl.so \(CANN's AscendCL runtime\).*source "
                                           r"<ascend-toolkit>/set_env.sh"):
        launch.load_binary(b"\x7fELF", "kernel aiv", device="simdev:0", runtime=runtime)
    with pytest.raises(RuntimeError, match="CANN"):
        _C.kernel_runtime_device_properties(runtime, 0)
    with pytest.raises(RuntimeError, match="CANN"):
        _C.ascend_soc_name()
    with pytest.raises(ValueError, match="the ascend kernel runtime takes no library"):
        launch.kernel_runtime("ascend", library="x")
