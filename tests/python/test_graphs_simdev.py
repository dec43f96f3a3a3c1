"""Graph capture on simdev through devbridge.graphs, for real: simdev's
runtime records the work its capturing stream would run and replays copies
of it (plugins/simdev/runtime/src/Graph.cpp), its allocator serves the
capture from the graph's pool, devbridge's launcher launches Triton and
DLPack-style kernels into the capture. Every replay is compared with eager
execution on the same inputs."""

from __future__ import annotations

import ctypes
import math

import pytest
import torch

import devbridge
import devbridge.triton
from devbridge import _C, graphs

from launch_support import KERNEL_SOURCE, compile_library, load, run, skip_without_simdev

pytestmark = skip_without_simdev


@pytest.fixture(autouse=True)
def clean_delay():
    yield
    torch.simdev.set_op_delay_us(0)
    assert not graphs.is_current_stream_capturing()


def eager_ops(x, y):
    # Only simdev's asynchronous operators (ops/*.cpp): its CPU fallback
    # synchronises, which no capture allows.
    a = x * 2.0 + y
    b = (a - 1.0).exp()
    return b / (y + 3.0)


def test_torch_ops_and_a_triton_kernel_replay_like_eager_with_new_inputs():
    triton = pytest.importorskip("triton")
    import triton_test_kernels as kernels

    n, block = 300, 128
    static_x = torch.randn(n, device="simdev")
    static_y = torch.randn(n, device="simdev")

    def step(x, y):
        summed = torch.empty_like(x)
        with devbridge.triton.activate():
            kernels.add_kernel[(triton.cdiv(n, block),)](x, y, summed, n, BLOCK=block)
        return eager_ops(summed, y) * x

    step(static_x, static_y)  # warm-up: Triton compiles outside the capture
    g = graphs.Graph()
    with graphs.graph(g):
        static_out = step(static_x, static_y)
    assert g.device == torch.device("simdev:0")
    for seed in range(3):
        generator = torch.Generator().manual_seed(seed)
        x, y = torch.randn(n, generator=generator), torch.randn(n, generator=generator)
        static_x.copy_(x)
        static_y.copy_(y)
        g.replay()
        torch.testing.assert_close(static_out.cpu(), step(x.to("simdev"), y.to("simdev")).cpu())
    g.reset()


def test_replays_run_in_order_on_a_non_default_stream_under_the_delay():
    # Each step reads the previous one's result in place: out of order,
    # (v * 2 + 1) * 3 would come out as another number.
    acc = torch.ones(64, device="simdev")
    start = torch.ones(64, device="simdev")
    g = graphs.Graph()
    with graphs.graph(g):
        acc.copy_(start)
        acc.mul_(2.0)
        acc.add_(1.0)
        acc.mul_(3.0)
    torch.simdev.set_op_delay_us(2000)
    side = torch.Stream(device="simdev:0")
    for value in (1.0, 5.0, -2.0):
        start.fill_(value)
        side.wait_stream(torch.accelerator.current_stream())
        g.replay(stream=side)
        torch.accelerator.current_stream().wait_stream(side)
        assert acc.cpu().tolist() == [(value * 2 + 1) * 3] * 64


def test_graphs_on_two_devices_and_the_wrong_device_stream():
    graphs_by_device, outs, ins = {}, {}, {}
    for index in (0, 1):
        device = f"simdev:{index}"
        ins[index] = torch.full((8,), float(index + 1), device=device)
        torch.accelerator.set_device_index(index)
        try:
            g = graphs.Graph()
            with graphs.graph(g):
                outs[index] = ins[index] * 10.0 + index
            graphs_by_device[index] = g
        finally:
            torch.accelerator.set_device_index(0)
    for index, g in graphs_by_device.items():
        assert g.device == torch.device(f"simdev:{index}")
        ins[index].fill_(7.0)
        torch.accelerator.set_device_index(index)
        try:
            g.replay()
        finally:
            torch.accelerator.set_device_index(0)
        assert outs[index].cpu().tolist() == [70.0 + index] * 8
    with pytest.raises(ValueError, match=r"the stream is on simdev:1, but the graph is for simdev:0; pass a stream "
                                         r"of simdev:0"):
        graphs_by_device[0].replay(stream=torch.Stream(device="simdev:1"))
    # The plugin refuses it as well, by name, when asked directly.
    with pytest.raises(RuntimeError, match="replay it on a stream of device 0"):
        _C._graph_replay("simdev", graphs_by_device[0]._exec, 1, devbridge.current_stream("simdev:1"))


@pytest.mark.parametrize("sync", ["tensor.cpu()", "stream.synchronize()", "torch.simdev.synchronize()",
                                  "event.synchronize()"])
def test_a_synchronisation_during_capture_fails_clearly_and_ends_the_capture(sync):
    x = torch.ones(16, device="simdev")
    event = torch.Event(device="simdev")
    g = graphs.Graph()
    with pytest.raises(RuntimeError, match="cannot be captured") as raised:
        with graphs.graph(g) as stream:
            y = x + 1.0
            eval(sync, {"tensor": y, "stream": stream, "torch": torch, "event": event})
            event.record(stream)
    if hasattr(raised.value, "__notes__"):
        assert "was invalidated by" in raised.value.__notes__[0]
    assert not graphs.is_current_stream_capturing()
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        g.replay()
    # The stream and the Graph work again.
    with graphs.graph(g):
        y = x + 2.0
    g.replay()
    assert y.cpu().tolist() == [3.0] * 16


def test_recording_an_event_on_the_capturing_stream_is_refused():
    g = graphs.Graph()
    with pytest.raises(RuntimeError, match="sdEventRecord cannot be captured"):
        with graphs.graph(g) as stream:
            torch.Event(device="simdev").record(stream)


def test_graph_states_are_checked_by_name():
    g = graphs.Graph()
    with pytest.raises(RuntimeError, match="replay\\(\\) without a preceding successful capture"):
        g.replay()
    with pytest.raises(RuntimeError, match="capture_end\\(\\) without capture_begin\\(\\)"):
        g.capture_end()
    with pytest.raises(RuntimeError, match="instantiate\\(\\) without a preceding successful capture"):
        g.instantiate()
    with pytest.raises(ValueError, match="pool=None"):
        g.capture_begin(pool=object())
    x = torch.ones(4, device="simdev")
    kept = graphs.Graph(keep_graph=True)
    with graphs.graph(kept):
        y = x * 5.0
    with pytest.raises(RuntimeError, match="already holds a capture; call reset\\(\\)"):
        kept.capture_begin()
    kept.replay()  # instantiates the kept graph first, as torch.cuda.CUDAGraph does
    assert y.cpu().tolist() == [5.0] * 4
    graph_handle, exec_handle = kept._graph, kept._exec
    kept.reset()
    kept.reset()  # idempotent
    # The handles are gone: destroying them again, or replaying a graph that is
    # not an executable, is the plugin's clear error, never a crash.
    with pytest.raises(RuntimeError, match="is not a live graph"):
        _C._graph_destroy("simdev", graph_handle)
    with pytest.raises(RuntimeError, match="is not a live executable graph"):
        _C._graph_exec_destroy("simdev", exec_handle)
    with graphs.graph(kept):
        y = x * 6.0
    with pytest.raises(RuntimeError, match="is a captured graph, not an executable one; instantiate it"):
        _C._graph_replay("simdev", kept._graph, 0, devbridge.current_stream("simdev:0"))
    with pytest.raises(TypeError, match="expected a devbridge.graphs.Graph"):
        graphs.graph(object())
    with pytest.raises(ValueError, match="torch.cuda.CUDAGraph"):
        graphs.register_graph_api(None, "cuda")


def test_memory_allocated_during_capture_stays_the_graphs():
    # A kernel captured writing an intermediate tensor writes the same address
    # on every replay; if that block went back to the allocator's cache when
    # the Python tensor died, eager tensors allocated after the capture would
    # be overwritten by the replays.
    n = 4096
    x = torch.ones(n, device="simdev")
    kernel, launcher = load("add_f32"), devbridge.launch.launcher(
        {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32", "alpha": "fp32", "BLOCK": "constexpr"},
        name="add", num_warps=4)
    g = graphs.Graph()
    with graphs.graph(g):
        scratch = torch.empty(n, device="simdev")
        out = torch.empty(n, device="simdev")
        # Only kernels touch `scratch` (raw pointers: no captured work holds its storage).
        run(launcher, (math.ceil(n / 128),), kernel, x, x, scratch, n, 0.5, 128)  # scratch = 1.5 x
        run(launcher, (math.ceil(n / 128),), kernel, scratch, scratch, out, n, 0.5, 128)  # out = 1.5 scratch
        del scratch
    bystanders = [torch.full((n,), 7.0, device="simdev") for _ in range(4)]
    for value in (1.0, 3.0):
        x.fill_(value)
        g.replay()
        assert out.cpu().tolist() == [value * 2.25] * n
    assert all(b.cpu().tolist() == [7.0] * n for b in bystanders)
    g.reset()
    del out
    # After reset the pool's memory is the allocator's again, and usable.
    assert torch.full((n,), 2.0, device="simdev").cpu().tolist() == [2.0] * n


def test_launch_scratch_under_capture_comes_from_the_pool():
    kernel = load("scratch_roundtrip")
    launcher = devbridge.launch.launcher({"out": "*i64", "tag": "i64", "wait_ms": "i32"}, name="scratch_roundtrip",
                                         global_scratch_size=8, global_scratch_align=8)
    outs = [torch.zeros(3, dtype=torch.int64, device="simdev") for _ in range(2)]
    g = graphs.Graph()
    with graphs.graph(g):
        for tag, out in enumerate(outs, start=1):
            run(launcher, (1,), kernel, out, tag, 0)
    before = torch.full((64,), 9, dtype=torch.int64, device="simdev")  # may take a block freed before the capture
    for _ in range(2):
        g.replay()
        assert [o.cpu().tolist()[0] for o in outs] == [1, 2]
    assert before.cpu().tolist() == [9] * 64


def _capsule(address: int, name: bytes):
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new_capsule(address, name, None)


def test_registration_refuses_bad_tables_and_the_missing_table_names_the_fix():
    import torch_simdev

    table = torch_simdev._C.graph_api()
    with pytest.raises(TypeError, match="must be a PyCapsule named 'devbridge_graph_api'"):
        graphs.register_graph_api(object(), "simdev")
    with pytest.raises(ValueError, match="named 'devbridge_graph_api', got one named 'something_else'"):
        graphs.register_graph_api(_capsule(1, b"something_else"), "simdev")
    # A table of another major version (a copy of simdev's with major 2).
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    address = get_pointer(table, b"devbridge_graph_api")
    size = ctypes.c_size_t.from_address(address + 8).value
    copy = (ctypes.c_char * size).from_buffer_copy(ctypes.string_at(address, size))
    ctypes.c_uint32.from_buffer(copy, 0).value = 2
    with pytest.raises(ValueError, match="was written for major 2 of the graph ABI, and this devbridge reads major 1"):
        graphs.register_graph_api(_capsule(ctypes.addressof(copy), b"devbridge_graph_api"), "simdev")
    ctypes.c_uint32.from_buffer(copy, 0).value = 1
    ctypes.c_size_t.from_buffer(copy, 8).value = 16
    with pytest.raises(ValueError, match="has header.size 16, smaller than the"):
        graphs.register_graph_api(_capsule(ctypes.addressof(copy), b"devbridge_graph_api"), "simdev")
    assert graphs.is_available("simdev"), "a refused table leaves the registered one in place"

    graphs.register_graph_api(None, "simdev")
    try:
        assert not graphs.is_available("simdev")
        assert not graphs.is_current_stream_capturing()
        with pytest.raises(NotImplementedError, match=r"registered no graph table.*"
                                                      r"devbridge.graphs.register_graph_api\(capsule, 'simdev'\)"):
            graphs.Graph().capture_begin()
    finally:
        graphs.register_graph_api(table, "simdev")
    assert graphs.is_available("simdev")


def test_a_launch_through_a_submit_hook_is_refused_while_its_stream_captures():
    library = ctypes.CDLL(str(compile_library(KERNEL_SOURCE.parent / "simdev_submit_hook.cc")))
    hook = _capsule(ctypes.cast(library.hook_submit, ctypes.c_void_p).value, b"devbridge_submit_hook")
    kernel = load("add_f32")
    launcher = devbridge.launch.launcher(
        {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32", "alpha": "fp32", "BLOCK": "constexpr"},
        name="add", num_warps=4)
    x = torch.ones(4, device="simdev")
    devbridge.register_submit_hook(hook, "simdev")
    try:
        g = graphs.Graph()
        with graphs.graph(g):
            with pytest.raises(RuntimeError, match="which is capturing, would go through the plugin's submit hook"
                                                   ".*DEVBRIDGE_GRAPH_SUBMIT_HOOK_CAPTURES"):
                run(launcher, (1,), kernel, x, x, x, 4, 1.0, 128)
        run(launcher, (1,), kernel, x, x, x, 4, 1.0, 128)  # outside the capture the hook takes it
    finally:
        library.hook_drain()
        devbridge.register_submit_hook(None, "simdev")
    torch.accelerator.synchronize()
    assert x.cpu().tolist() == [2.0] * 4


def test_the_runtime_table_reports_capture_to_kernel_side_code():
    from test_runtime_api import runtime_table

    table = runtime_table()
    status = ctypes.c_int32(-1)
    g = graphs.Graph()
    with graphs.graph(g) as stream:
        handle = stream.native_handle if hasattr(stream, "native_handle") else devbridge.current_stream("simdev:0")
        assert table.stream_capture_status(12, 0, handle, ctypes.byref(status)) == 0 and status.value == 1
        assert table.check_submit_hook(12, 0, handle) == -1
        assert b"DEVBRIDGE_GRAPH_SUBMIT_HOOK_CAPTURES" in table.get_last_error()
        assert graphs.is_current_stream_capturing()
    assert table.stream_capture_status(12, 0, handle, ctypes.byref(status)) == 0 and status.value == 0
    assert table.check_submit_hook(12, 0, handle) == 0
    assert table.stream_capture_status(12, 0, handle, None) == -1
    assert b"out_status is NULL" in table.get_last_error()
    assert table.stream_capture_status(1, 0, None, ctypes.byref(status)) == 0 and status.value == 0  # CPU: none


def test_beginning_a_capture_twice_is_refused_and_the_first_capture_keeps_going():
    x = torch.ones(4, device="simdev")
    g = graphs.Graph()
    with graphs.graph(g) as stream:
        with pytest.raises(RuntimeError, match="is already capturing"):
            graphs.Graph().capture_begin(stream)
        y = x * 4.0
    x.fill_(2.0)
    g.replay()
    assert y.cpu().tolist() == [8.0] * 4


class GraphAPI(ctypes.Structure):
    """Mirror of include/devbridge/c_graph_api.h (major 1, minor 0)."""

    _fields_ = [
        ("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("size", ctypes.c_size_t),
        ("flags", ctypes.c_uint64), ("self", ctypes.c_void_p), ("name", ctypes.c_char_p),
        ("capture_begin", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p)),
        ("capture_end", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p,
                                         ctypes.POINTER(ctypes.c_void_p))),
        ("instantiate", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                         ctypes.POINTER(ctypes.c_void_p))),
        ("replay", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p)),
        ("graph_destroy", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)),
        ("exec_destroy", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)),
        ("capture_status", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p,
                                            ctypes.POINTER(ctypes.c_int32))),
        ("get_last_error", ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)),
    ]


def test_simdevs_table_entry_points_return_errors_and_never_throw():
    import torch_simdev

    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    api = GraphAPI.from_address(get_pointer(torch_simdev._C.graph_api(), b"devbridge_graph_api"))
    assert (api.major, api.minor, api.size, api.flags, api.name) == (1, 0, ctypes.sizeof(GraphAPI), 0,
                                                                       b"simdev graphs")
    stream0, stream1 = devbridge.current_stream("simdev:0"), devbridge.current_stream("simdev:1")
    out, status = ctypes.c_void_p(), ctypes.c_int32()

    def error():
        return api.get_last_error(None).decode()

    assert api.capture_begin(None, 0, stream1) == -1 and "belongs to simdev:1, not simdev:0" in error()
    assert api.capture_begin(None, 0, None) == -1 and "stream is NULL" in error()
    assert api.capture_begin(None, 0, 12345) == -1 and "is not a live stream" in error()
    assert api.capture_end(None, 0, stream0, None) == -1 and "out_graph is NULL" in error()
    assert api.capture_end(None, 0, stream0, ctypes.byref(out)) == -1 and "is not capturing" in error()
    assert api.instantiate(None, None, ctypes.byref(out)) == -1 and "graph is NULL" in error()
    assert api.instantiate(None, 99, None) == -1 and "out_exec is NULL" in error()
    assert api.replay(None, 99, 0, stream0) == -1 and "is not a live executable graph" in error()
    assert api.graph_destroy(None, 99) == -1 and "is not a live graph" in error()
    assert api.exec_destroy(None, None) == -1 and "exec is NULL" in error()
    assert api.capture_status(None, 0, stream0, None) == -1 and "out_status is NULL" in error()
    assert api.capture_status(None, 1, stream1, ctypes.byref(status)) == 0 and status.value == 0
