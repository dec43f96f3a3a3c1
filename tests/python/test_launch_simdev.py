"""devbridge's generic launcher on simdev: host-function kernels launched exactly
as Triton launches compiled kernels, through the same Launcher, argument
packing, scratch allocation, submit hook and stream handling a GPU uses.

The kernels are in tests/python/kernels/simdev_launch_kernels.cc (compiled
here, loaded from their bytes). simdev's debug delay makes every queued
operation sleep first, so an ordering or lifetime mistake shows up as wrong
data instead of by luck.
"""

from __future__ import annotations

import ctypes
import math
import struct
import threading

import pytest
import torch

import devbridge
import devbridge.triton
from devbridge import launch

from launch_support import (
    KERNEL_SOURCE,
    PACKED,
    compile_library,
    load,
    run,
    skip_without_simdev,
    stream_of,
    sync,
)

pytestmark = skip_without_simdev

ADD_SIGNATURE = {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32", "alpha": "fp32", "BLOCK": "constexpr"}
SCRATCH_SIGNATURE = {"out": "*i64", "tag": "i64", "wait_ms": "i32"}



def add_launcher():
    return launch.launcher(ADD_SIGNATURE, name="add", num_warps=4)


def simdev(tensor, device="simdev:0"):
    return tensor.to(device)


# ---------------------------------------------------------------- results


def test_vector_add_matches_torch():
    kernel = load("add_f32")
    n = 1000
    x = simdev(torch.randn(n))
    y = simdev(torch.randn(n))
    out = simdev(torch.zeros(n))
    run(add_launcher(), (math.ceil(n / 128),), kernel, x, y, out, n, 0.5, 128)
    sync()
    torch.testing.assert_close(out.cpu(), x.cpu() * 0.5 + y.cpu(), rtol=0, atol=0)


def test_pointer_arguments_honour_views_and_offsets():
    """A view's address is data + byte_offset: the kernel sees exactly the view."""
    kernel = load("add_f32")
    base = simdev(torch.arange(300, dtype=torch.float32))
    x = base[100:200]  # storage offset 100
    y = simdev(torch.ones(100))
    out_base = simdev(torch.zeros(300))
    out = out_base[50:150]
    run(add_launcher(), (1,), kernel, x, y, out, 100, 1.0, 128)
    sync()
    expected = torch.zeros(300)
    expected[50:150] = torch.arange(100, 200, dtype=torch.float32) + 1
    assert torch.equal(out_base.cpu(), expected)


@pytest.mark.parametrize("grid", [(5,), (3, 4), (2, 3, 4)], ids=["1d", "2d", "3d"])
def test_every_program_of_the_grid_runs_once(grid):
    kernel = load("record_programs")
    launcher = launch.launcher({"out": "*i64"}, name="record_programs")
    total = math.prod(grid)
    out = simdev(torch.zeros(total + 1, dtype=torch.int64))
    run(launcher, grid, kernel, out)
    sync()
    gx, gy, gz = (tuple(grid) + (1, 1))[:3]
    expected = [1 + x + 1000 * y + 1000000 * z for z in range(gz) for y in range(gy) for x in range(gx)]
    assert out.cpu().tolist() == expected + [0]


@pytest.mark.parametrize("grid", [(0, 1, 1), (4, 0, 1), (4, 2, 0)])
def test_an_empty_grid_launches_nothing_but_still_checks_arguments(grid):
    kernel = load("record_programs")
    launcher = launch.launcher({"out": "*i64"}, name="record_programs")
    out = simdev(torch.zeros(8, dtype=torch.int64))
    run(launcher, grid, kernel, out)
    sync()
    assert out.cpu().tolist() == [0] * 8
    with pytest.raises(ValueError, match="is a tensor on cpu"):
        run(launcher, grid, kernel, torch.zeros(8, dtype=torch.int64))


def test_constexpr_positions_are_dropped_wherever_they_are():
    """Constexprs (tl.constexpr, None, ints equal to 1) are passed by Triton but absent from the ABI."""
    kernel = load("probe_args")
    launcher = launch.launcher(["constexpr", "*i64", "constexpr", "i32", "constexpr", ("constexpr", "i16")],
                               name="probe")
    out = simdev(torch.zeros(16, dtype=torch.int64))
    run(launcher, (1,), kernel, None, out, 1, -7, 64, (None, 300))
    sync()
    record = out.cpu().tolist()
    assert record[0] == 5  # out, i32, i16 and the two scratch pointers
    sizes = record[1:11:2]
    values = record[2:11:2]
    assert sizes == [8, 4, 2, 8, 8]
    assert values[1:] == [struct.unpack("<I", struct.pack("<i", -7))[0], 300, 0, 0]


def test_raw_int_addresses_and_none_are_passed_through():
    kernel = load("probe_args")
    launcher = launch.launcher(["*i64", "*fp32", "*fp32"], name="probe")
    out = simdev(torch.zeros(16, dtype=torch.int64))
    run(launcher, (1,), kernel, out, 0xDEADBEEF000, None)
    sync()
    record = out.cpu().tolist()
    assert record[4] == 0xDEADBEEF000 and record[6] == 0


class DataPtrOnly:
    """A non-tensor pointer argument: anything with data_ptr(), as Triton accepts."""

    def __init__(self, address):
        self.address = address

    def data_ptr(self):
        return self.address


def test_objects_with_only_data_ptr_are_checked_by_the_kernel_runtime():
    kernel = load("probe_args")
    launcher = launch.launcher(["*i64", "*fp32"], name="probe")
    out = simdev(torch.zeros(8, dtype=torch.int64))
    target = simdev(torch.zeros(4))
    run(launcher, (1,), kernel, out, DataPtrOnly(target.data_ptr()))
    sync()
    assert out.cpu().tolist()[4] == target.data_ptr()
    host = torch.zeros(4)
    with pytest.raises(ValueError, match=r"argument 1 \('arg1'\) of kernel 'probe' points to host memory"):
        run(launcher, (1,), kernel, out, DataPtrOnly(host.data_ptr()))
    other = simdev(torch.zeros(4), "simdev:1")
    with pytest.raises(ValueError, match="points to simdev device 1, but the kernel launches on simdev:0"):
        run(launcher, (1,), kernel, out, DataPtrOnly(other.data_ptr()))


# ---------------------------------------------------------------- streams


def test_the_launch_returns_before_the_kernel_ran_and_is_ordered_on_its_stream():
    """No per-launch synchronize: with the delay on, the stream still has the
    kernel queued when the call returns; work queued after it on the same
    stream sees its result."""
    kernel = load("slow_increment")
    launcher = launch.launcher({"inp": "*i64", "out": "*i64", "wait_ms": "i32"}, name="slow_increment")
    side = torch.Stream(device="simdev:0")
    a = simdev(torch.tensor([41], dtype=torch.int64))
    b = simdev(torch.zeros(1, dtype=torch.int64))
    c = simdev(torch.zeros(1, dtype=torch.int64))
    sync()
    with torch.simdev.op_delay(200_000):
        run(launcher, (1,), kernel, a, b, 0, stream=side.native_handle)
        assert not side.query(), "the launch waited for the kernel"
        run(launcher, (1,), kernel, b, c, 0, stream=side.native_handle)
    side.synchronize()
    assert b.cpu().item() == 42 and c.cpu().item() == 43


def test_a_consumer_on_another_stream_needs_an_event():
    """Stream semantics as on a GPU: without an event the other stream reads stale data."""
    kernel = load("slow_increment")
    launcher = launch.launcher({"inp": "*i64", "out": "*i64", "wait_ms": "i32"}, name="slow_increment")
    producer = torch.Stream(device="simdev:0")
    consumer = torch.Stream(device="simdev:0")
    a = simdev(torch.tensor([1], dtype=torch.int64))
    stale_out = simdev(torch.zeros(1, dtype=torch.int64))
    ordered_out = simdev(torch.zeros(1, dtype=torch.int64))
    b = simdev(torch.tensor([100], dtype=torch.int64))
    sync()
    with torch.simdev.op_delay(50_000):
        run(launcher, (1,), kernel, a, b, 200, stream=producer.native_handle)  # b = 2, late
        run(launcher, (1,), kernel, b, stale_out, 0, stream=consumer.native_handle)  # reads b = 100
        event = torch.Event()
        event.record(producer)
        consumer.wait_event(event)
        run(launcher, (1,), kernel, b, ordered_out, 0, stream=consumer.native_handle)
    torch.accelerator.synchronize()
    assert stale_out.cpu().item() == 101
    assert ordered_out.cpu().item() == 3


def test_kernels_run_on_the_device_they_were_loaded_on():
    kernel = load("add_f32", device="simdev:1")
    x = simdev(torch.ones(10), "simdev:1")
    out = simdev(torch.zeros(10), "simdev:1")
    run(add_launcher(), (1,), kernel, x, x, out, 10, 3.0, 128, device="simdev:1")
    sync("simdev:1")
    assert out.cpu().tolist() == [4.0] * 10
    with pytest.raises(ValueError, match=r"argument 0 \('x'\) of kernel 'add' is a tensor on simdev:0, but "
                                         r"the kernel launches on simdev:1"):
        run(add_launcher(), (1,), kernel, simdev(torch.ones(10)), x, out, 10, 3.0, 128, device="simdev:1")


# ---------------------------------------------------------------- scratch


def scratch_launcher(**metadata):
    metadata.setdefault("global_scratch_size", 8)
    metadata.setdefault("global_scratch_align", 8)
    return launch.launcher(SCRATCH_SIGNATURE, name="scratch_roundtrip", **metadata)


def test_scratch_is_sized_per_program_aligned_and_always_passed():
    kernel = load("scratch_roundtrip")
    out = simdev(torch.zeros(3 * 6, dtype=torch.int64))
    launcher = scratch_launcher(global_scratch_size=8, global_scratch_align=256, profile_scratch_size=16,
                                profile_scratch_align=128)
    run(launcher, (3, 2), kernel, out, 7, 0)
    sync()
    record = out.cpu().view(6, 3)
    assert record[:, 0].tolist() == [7] * 6  # each program its own slot, read back intact
    assert record[0, 1].item() % 256 == 0 and record[0, 1].item() != 0
    assert record[0, 2].item() % 128 == 0 and record[0, 2].item() != 0
    # Without scratch in the metadata both pointers are NULL, but present.
    run(scratch_launcher(global_scratch_size=0), (1,), load("probe_args"),
        out, 0, 0)
    sync()
    assert out.cpu().tolist()[:1] == [5]  # out, tag, wait_ms, 2 scratch pointers
    assert out.cpu().tolist()[8] == 0 and out.cpu().tolist()[10] == 0


def test_scratch_reused_on_the_same_stream_is_not_clobbered_before_the_kernel_read_it():
    """The block goes back to the allocator as soon as the launch is enqueued;
    the next launch on the same stream gets it again, but runs after the first."""
    kernel = load("scratch_roundtrip")
    # A size no other test allocates, so the allocator's cache holds exactly
    # this block when the second launch asks for one.
    launcher = scratch_launcher(global_scratch_size=3 * 2**20 + 8 * 1024)
    first = simdev(torch.zeros(3, dtype=torch.int64))
    second = simdev(torch.zeros(3, dtype=torch.int64))
    sync()
    with torch.simdev.op_delay(30_000):
        run(launcher, (1,), kernel, first, 111, 100)   # writes 111, waits 100 ms, reads back
        run(launcher, (1,), kernel, second, 222, 0)
    sync()
    a, b = first.cpu().tolist(), second.cpu().tolist()
    assert a[0] == 111 and b[0] == 222
    assert a[1] == b[1], "the same stream should reuse the block (stream-ordered caching allocator)"


def test_scratch_of_a_launch_is_not_handed_to_another_stream_while_in_use():
    kernel = load("scratch_roundtrip")
    launcher = scratch_launcher(global_scratch_size=3 * 2**20 + 16 * 1024)  # a size of its own, as above
    first = simdev(torch.zeros(3, dtype=torch.int64))
    second = simdev(torch.zeros(3, dtype=torch.int64))
    other = torch.Stream(device="simdev:0")
    sync()
    with torch.simdev.op_delay(30_000):
        run(launcher, (1,), kernel, first, 111, 150)
        with other:
            run(launcher, (1,), kernel, second, 222, 0, stream=other.native_handle)
    torch.accelerator.synchronize()
    a, b = first.cpu().tolist(), second.cpu().tolist()
    assert a[0] == 111 and b[0] == 222, "the other stream's launch clobbered the first kernel's scratch"
    assert a[1] != b[1]


def test_scratch_needs_the_launch_stream_to_be_current():
    kernel = load("scratch_roundtrip")
    side = torch.Stream(device="simdev:0")
    out = simdev(torch.zeros(3, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"needs scratch memory, which comes from the framework allocator on "
                                         r"the current stream of simdev:0 .* make the launch stream current"):
        run(scratch_launcher(), (1,), kernel, out, 1, 0, stream=side.native_handle)


# ---------------------------------------------------------------- hooks


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, metadata):
        self.calls.append(metadata)


def test_hooks_are_called_with_the_launch_metadata_as_triton_calls_them():
    kernel = load("record_programs")
    launcher = launch.launcher({"out": "*i64"}, name="record_programs")
    out = simdev(torch.zeros(2, dtype=torch.int64))
    enter, exit_ = Recorder(), Recorder()
    marker = {"name": "record_programs"}
    run(launcher, (1,), kernel, out, launch_metadata=marker, enter=enter, exit=exit_)
    assert enter.calls == [marker] and exit_.calls == [marker]


def test_an_empty_hook_chain_costs_no_python_call(monkeypatch):
    triton_knobs = pytest.importorskip("triton.knobs", reason="triton is not installed")
    HookChain = triton_knobs.HookChain
    calls = []
    monkeypatch.setattr(HookChain, "__call__", lambda self, *a: calls.append(a))
    kernel = load("record_programs")
    launcher = launch.launcher({"out": "*i64"}, name="record_programs")
    out = simdev(torch.zeros(2, dtype=torch.int64))
    empty = HookChain()
    run(launcher, (1,), kernel, out, enter=empty, exit=empty)
    assert calls == []
    chain = HookChain()
    chain.add(lambda metadata: None)
    run(launcher, (1,), kernel, out, launch_metadata="md", enter=chain, exit=chain)
    assert calls == [("md",), ("md",)]


def test_an_enter_hook_that_raises_stops_the_launch():
    kernel = load("record_programs")
    launcher = launch.launcher({"out": "*i64"}, name="record_programs")
    out = simdev(torch.zeros(2, dtype=torch.int64))

    def enter(metadata):
        raise KeyError("from the hook")

    with pytest.raises(KeyError, match="from the hook"):
        run(launcher, (1,), kernel, out, enter=enter)
    sync()
    assert out.cpu().tolist() == [0, 0]


# ---------------------------------------------------------------- submit hook


@pytest.fixture(scope="module")
def submit_hook():
    library = ctypes.CDLL(str(compile_library(KERNEL_SOURCE.parent / "simdev_submit_hook.cc")))
    for name in ("hook_submitted", "hook_ran", "hook_failed"):
        getattr(library, name).restype = ctypes.c_long
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    address = ctypes.cast(library.hook_submit, ctypes.c_void_p).value
    capsule = new_capsule(address, b"devbridge_submit_hook", None)
    return library, capsule


@pytest.fixture
def hooked(submit_hook):
    library, capsule = submit_hook
    devbridge.register_submit_hook(capsule, "simdev")
    try:
        yield library
    finally:
        library.hook_hold(0)
        library.hook_refuse(0)
        library.hook_drain()
        devbridge.register_submit_hook(None, "simdev")


def test_the_submit_hook_takes_the_launch_and_runs_it_on_its_own_worker(hooked):
    kernel = load("add_f32")
    x = simdev(torch.ones(64))
    out = simdev(torch.zeros(64))
    sync()
    before = hooked.hook_submitted()
    hooked.hook_hold(1)
    run(add_launcher(), (1,), kernel, x, x, out, 64, 2.0, 128)
    assert hooked.hook_submitted() == before + 1
    sync()
    assert out.cpu().tolist() == [0.0] * 64, "the launch ran before the hook's queue released it"
    hooked.hook_hold(0)
    hooked.hook_drain()
    sync()
    assert out.cpu().tolist() == [3.0] * 64
    assert hooked.hook_ran_on_worker() == 1 and hooked.hook_failed() == 0


def test_scratch_handed_to_the_submit_hook_lives_until_the_hook_ran_it(hooked):
    kernel = load("scratch_roundtrip")
    outs = [simdev(torch.zeros(3, dtype=torch.int64)) for _ in range(4)]
    sync()
    hooked.hook_hold(1)
    for tag, out in enumerate(outs, start=1):
        run(scratch_launcher(), (1,), kernel, out, tag, 0)
    hooked.hook_hold(0)
    hooked.hook_drain()
    sync()
    assert [o.cpu().tolist()[0] for o in outs] == [1, 2, 3, 4]
    assert len({o.cpu().tolist()[1] for o in outs}) == 4, "scratch of queued launches must not be reused"


def test_a_submit_hook_that_refuses_is_an_error(hooked):
    kernel = load("add_f32")
    x = simdev(torch.ones(4))
    hooked.hook_refuse(1)
    with pytest.raises(RuntimeError, match="the submit hook of simdev:0 refused the launch of kernel 'add_f32'"):
        run(add_launcher(), (1,), kernel, x, x, x, 4, 1.0, 128)


# ---------------------------------------------------------------- threads


def test_many_host_threads_launching_on_their_own_streams_and_devices():
    kernels = {d: load("add_f32", device=d) for d in ("simdev:0", "simdev:1")}
    launcher = add_launcher()
    errors = []
    wrong = []

    def worker(index):
        device = f"simdev:{index % 2}"
        try:
            torch.accelerator.set_device_index(index % 2)
            stream = torch.Stream(device=device)
            with stream:
                x = simdev(torch.full((256,), float(index)), device)
                y = simdev(torch.ones(256), device)
                outs = [simdev(torch.zeros(256), device) for _ in range(20)]
                for i, out in enumerate(outs):
                    run(launcher, (2,), kernels[device], x, y, out, 256, float(i), 128, device=device)
                stream.synchronize()
                for i, out in enumerate(outs):
                    if not torch.equal(out.cpu(), torch.full((256,), index * i + 1.0)):
                        wrong.append((index, i))
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and wrong == []


# ---------------------------------------------------------------- bad input


@pytest.fixture
def add_call():
    kernel = load("add_f32")
    x = simdev(torch.ones(8))

    def call(*kernel_args, **overrides):
        args = list(kernel_args) if kernel_args else [x, x, x, 8, 1.0, 128]
        return run(add_launcher(), overrides.pop("grid", (1,)), overrides.pop("kernel", kernel), *args,
                   **overrides)

    call.x = x
    return call


@pytest.mark.parametrize("position, value, error, message", [
    (0, "not a tensor", TypeError, r"argument 0 \('x'\) of kernel 'add' is a pointer parameter; pass a tensor"),
    (1, torch.ones(8), ValueError, r"argument 1 \('y'\) of kernel 'add' is a tensor on cpu"),
    (3, 2**31, ValueError, r"argument 3 \('n'\) of kernel 'add' is an i32 parameter, and 2147483648 is outside"),
    (3, -2**31 - 1, ValueError, r"is outside its range \[-2\*\*31, 2\*\*31 - 1\]"),
    (3, 2.5, TypeError, r"argument 3 \('n'\) of kernel 'add' is an i32 parameter; pass an int, got float 2.5"),
    (3, "8", TypeError, r"is an i32 parameter; pass an int, got str"),
    (4, "1.0", TypeError, r"argument 4 \('alpha'\) of kernel 'add' is an fp32 parameter; pass a float"),
    (2, -1, ValueError, r"argument 2 \('out'\) of kernel 'add' is the integer -1, which is not a 64-bit"),
])
def test_bad_arguments_name_the_argument_and_the_fix(add_call, position, value, error, message):
    args = [add_call.x, add_call.x, add_call.x, 8, 1.0, 128]
    args[position] = value
    with pytest.raises(error, match=message):
        add_call(*args)


def test_a_tensor_on_the_other_device_is_refused(add_call):
    other = simdev(torch.ones(8), "simdev:1")
    with pytest.raises(ValueError, match=r"argument 2 \('out'\) of kernel 'add' is a tensor on simdev:1, but "
                                         r"the kernel launches on simdev:0; move it there first"):
        add_call(add_call.x, add_call.x, other, 8, 1.0, 128)


def test_the_wrong_number_of_arguments_lists_the_kernels_parameters(add_call):
    with pytest.raises(TypeError, match=r"kernel 'add' takes 6 arguments \(x, y, out, n, alpha, BLOCK\), got 5"):
        add_call(add_call.x, add_call.x, add_call.x, 8, 1.0)
    launcher = add_launcher()
    with pytest.raises(TypeError, match=r"is called as \(gx, gy, gz, stream, function, packed_metadata"):
        launcher(1, 1, 1)
    with pytest.raises(TypeError, match="positional arguments only"):
        launcher(1, 1, 1, 0, 0, PACKED, None, None, None, *([0] * 6), stream=0)


@pytest.mark.parametrize("scalar_type, value, message", [
    ("u8", 256, r"is a u8 parameter, and 256 is outside its range \[0, 255\]"),
    ("u8", -1, r"is a u8 parameter, and -1 is outside its range \[0, 255\]"),
    ("i8", -129, r"is an i8 parameter, and -129 is outside its range \[-128, 127\]"),
    ("u64", 2**64, r"is a u64 parameter, and 18446744073709551616 is outside its range"),
    ("fp32", 1e39, r"is an fp32 parameter, and 1e\+39 is too large for it"),
    ("bf16", -1e39, r"is a bf16 parameter, and -1e\+39 is too large for it"),
    ("fp64", 10**400, r"is an fp64 parameter, and 1000.* is outside the range of a float"),
    ("i1", 2, r"is an i1 parameter, and 2 is outside its range \{0, 1\} \(or a bool\)"),
    ("fp16", 1e6, r"is an fp16 parameter, and 1000000.0 is too large for fp16"),
    ("fp16", "x", r"is an fp16 parameter; pass a float, got str"),
])
def test_scalars_out_of_range_are_refused_not_truncated(scalar_type, value, message):
    launcher = launch.launcher({"out": "*i64", "v": scalar_type}, name="probe")
    out = simdev(torch.zeros(8, dtype=torch.int64))
    with pytest.raises((ValueError, TypeError), match=message):
        run(launcher, (1,), load("probe_args"), out, value)


def test_fp16_nan_and_inf_are_fp16_values():
    """Packed exactly as Triton packs them (IEEE binary16, round to nearest)."""
    launcher = launch.launcher(["*i64", "fp16", "fp16", "fp16", "fp16"], name="probe")
    out = simdev(torch.zeros(16, dtype=torch.int64))
    values = [math.nan, math.inf, -math.inf, 65504.0]
    run(launcher, (1,), load("probe_args"), out, *values)
    sync()
    packed = out.cpu().tolist()[4:12:2]
    assert packed == [struct.unpack("<H", struct.pack("<e", v))[0] for v in values]


@pytest.mark.parametrize("grid, stream, function, message, error", [
    ((-1, 1, 1), None, None, r"grid x of kernel 'add' is -1; it must be in \[0, 2\*\*31 - 1\]", ValueError),
    ((1, 2**31, 1), None, None, r"grid y of kernel 'add' is 2147483648", ValueError),
    (("1", 1, 1), None, None, r"grid x of kernel 'add' must be an int, got str", TypeError),
    ((1, 1, 1), "s", None, r"the stream passed to kernel 'add' must be a non-negative int", TypeError),
    ((1, 1, 1), None, 987654321, r"function handle 987654321 passed to kernel 'add' is not a kernel loaded by "
                                 r"devbridge", ValueError),
])
def test_bad_launch_geometry_stream_or_handle(add_call, grid, stream, function, message, error):
    launcher = add_launcher()
    x = add_call.x
    with pytest.raises(error, match=message):
        launcher(*grid, stream if stream is not None else stream_of("simdev:0"),
                 function if function is not None else load("add_f32").function,
                 PACKED, None, None, None, x, x, x, 8, 1.0, 128)


def test_bad_packed_metadata(add_call):
    x = add_call.x
    kernel = load("add_f32")
    with pytest.raises(TypeError, match=r"packed_metadata of kernel 'add' must be the tuple \(num_warps, "):
        add_launcher()(1, 1, 1, stream_of("simdev:0"), kernel.function, [4, 1, 0], None, None, None,
                       x, x, x, 8, 1.0, 128)


def test_an_unloaded_kernel_is_refused_and_a_queued_launch_still_runs():
    kernel = load("add_f32")
    x = simdev(torch.ones(16))
    out = simdev(torch.zeros(16))
    sync()
    with torch.simdev.op_delay(50_000):
        run(add_launcher(), (1,), kernel, x, x, out, 16, 1.0, 128)
        launch.unload(kernel.function)
    sync()
    assert out.cpu().tolist() == [2.0] * 16
    with pytest.raises(ValueError, match="is not a kernel loaded by devbridge"):
        run(add_launcher(), (1,), kernel, x, x, out, 16, 1.0, 128)
    with pytest.raises(ValueError, match="no loaded kernel has handle"):
        launch.unload(kernel.function)


def test_loading_bad_binaries_names_the_problem():
    with pytest.raises(RuntimeError, match=r"loading kernel 'add_f32' on simdev:0 failed on the simdev kernel "
                                           r"runtime: sdModuleLoad failed"):
        launch.load_binary(b"not a shared library", "add_f32", device="simdev:0",
                           runtime=launch_support_runtime())
    from launch_support import simdev_kernels

    with pytest.raises(RuntimeError, match=r"sdModuleGetFunction\('no_such_kernel'\) failed"):
        launch.load_binary(simdev_kernels(), "no_such_kernel", device="simdev:0", runtime=launch_support_runtime())
    with pytest.raises(TypeError, match="a kernel image must be bytes"):
        launch.load_binary("text", "add_f32", device="simdev:0", runtime=launch_support_runtime())
    with pytest.raises(ValueError, match="unknown kernel runtime 'rocm'"):
        launch.kernel_runtime("rocm")


def launch_support_runtime():
    from launch_support import simdev_runtime

    return simdev_runtime()


def test_bad_plans_and_signatures_are_refused_at_construction():
    with pytest.raises(ValueError, match="has the unknown Triton type 'int33'"):
        launch.launcher(["*fp32", "int33"])
    with pytest.raises(NotImplementedError, match="nvTmaDesc"):
        launch.launcher(["nvTmaDesc"])
    with pytest.raises(ValueError, match="global_scratch_align' must be a power of two"):
        launch.launcher(["*fp32"], global_scratch_size=8, global_scratch_align=3)
    with pytest.raises(ValueError, match="not a DevbridgeArgType value"):
        devbridge.triton.Launcher._from_plan("k", (99,), ["a"], {})
    with pytest.raises(ValueError, match="1 entries but 2 names"):
        devbridge.triton.Launcher._from_plan("k", (1,), ["a", "b"], {})


def test_the_launcher_describes_itself():
    launcher = launch.launcher({"x": "*fp16", "pair": ("i32", "constexpr", "fp64"), "B": "constexpr"},
                               name="k", num_warps=8, shared=1024)
    assert launcher.kernel_name == "k"
    assert launcher.signature == ("*", "i32", "fp64")
    assert launcher.param_sizes == (8, 4, 8, 8, 8)
    assert launcher.metadata["num_warps"] == 8 and launcher.metadata["shared"] == 1024
    assert isinstance(launcher, devbridge.triton.Launcher)


# ---------------------------------------------------------------- bound launches (static-launch shape)

BOUND_SIGNATURE = {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32", "alpha": "fp32"}


def bound_add(kernel):
    return launch.launcher(BOUND_SIGNATURE, name="add", num_warps=4).bind(kernel.function)


def test_a_bound_launch_takes_the_grid_stream_and_the_kernels_own_parameters():
    kernel = load("add_f32")
    n = 1000
    x, y, out = simdev(torch.randn(n)), simdev(torch.randn(n)), simdev(torch.zeros(n))
    bound = bound_add(kernel)
    assert bound.function == kernel.function and bound.launcher.kernel_name == "add"
    bound(math.ceil(n / 128), 1, 1, stream_of("simdev:0"), x, y, out, n, 0.5)
    sync()
    torch.testing.assert_close(out.cpu(), x.cpu() * 0.5 + y.cpu(), rtol=0, atol=0)


def test_a_bound_launch_is_ordered_on_the_stream_it_is_given():
    kernel = load("add_f32")
    n = 4096
    x, y = simdev(torch.ones(n)), simdev(torch.ones(n))
    side = torch.Stream(device="simdev:0")
    with torch.simdev.op_delay(20_000), side:
        out = simdev(torch.zeros(n))
        x.add_(1)  # queued on `side` before the kernel, slowed down
        bound_add(kernel)(math.ceil(n / 128), 1, 1, side.native_handle, x, y, out, n, 1.0)
        result = out.cpu()  # a copy on `side`: after the kernel
    assert torch.all(result == 3)


def test_a_bound_launch_refuses_a_handle_devbridge_did_not_load_and_bad_calls():
    kernel = load("add_f32")
    launcher = launch.launcher(BOUND_SIGNATURE, name="add")
    with pytest.raises(ValueError, match="not a kernel loaded by devbridge"):
        launcher.bind(123456789)
    with pytest.raises(TypeError, match="non-negative int"):
        launcher.bind("kernel")
    bound = launcher.bind(kernel.function)
    x = simdev(torch.ones(8))
    with pytest.raises(TypeError, match=r"called as \(gx, gy, gz, stream, x, y, out, n, alpha\); got 6"):
        bound(1, 1, 1, stream_of("simdev:0"), x, x)
    with pytest.raises(TypeError, match="positional arguments only"):
        bound(1, 1, 1, stream_of("simdev:0"), x, x, x, 8, alpha=1.0)
    with pytest.raises(ValueError, match="grid x of kernel 'add' is -1"):
        bound(-1, 1, 1, stream_of("simdev:0"), x, x, x, 8, 1.0)
    with pytest.raises(ValueError, match="simdev:0"):
        bound(1, 1, 1, stream_of("simdev:0"), x, torch.ones(8), x, 8, 1.0)


def test_a_bound_launch_of_an_unloaded_kernel_is_refused():
    kernel = load("add_f32")
    bound = bound_add(kernel)
    launch.unload(kernel.module)
    x = simdev(torch.ones(8))
    with pytest.raises(ValueError, match="not a kernel loaded by devbridge"):
        bound(1, 1, 1, stream_of("simdev:0"), x, x, x, 8, 1.0)
