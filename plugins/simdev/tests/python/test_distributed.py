"""simdev's collective backend, sdgloo (torch_simdev/distributed.py,
csrc/distributed/): every collective's result, its place in stream order,
its Work handle and future, and a clear error for what it refuses.

Results across ranks are checked with 2 ranks as 2 processes
(simdev_ranks.py); ordering, handles and refusals with a 1-rank group in
this process, created once per module."""

import datetime
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_simdev", reason="build simdev first: pip install --no-build-isolation plugins/simdev")
dist = pytest.importorskip("torch.distributed")

import torch_simdev  # noqa: E402
import torch_simdev.distributed as simdev_distributed  # noqa: E402

from simdev_ranks import assert_all_passed, describe, run_ranks  # noqa: E402

pytestmark = pytest.mark.skipif(not simdev_distributed.is_available(),
                                reason="this torch has no torch.distributed")


# ---------------------------------------------------------------- 2 ranks

EVERY_COLLECTIVE = '''
init_group(backend="sdgloo")
assert dist.get_backend() == "sdgloo", dist.get_backend()
r, n = RANK, WORLD_SIZE
def on(values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype, device=DEVICE)
def check(name, tensor, expected):
    got = tensor.cpu().tolist()
    assert got == expected, f"{name} on rank {r}: got {got}, expected {expected}"

# Delayed work before and after each collective: a collective that did not
# wait for the work before it, or that later work did not wait for, reads or
# leaves the wrong values.
torch.simdev.set_op_delay_us(2000)

x = on([r + 1.0] * 3) * 1.0
dist.all_reduce(x)
check("all_reduce SUM", x + 0, [3.0] * 3)
for op, expected in [(dist.ReduceOp.AVG, 1.5), (dist.ReduceOp.MAX, 2.0), (dist.ReduceOp.MIN, 1.0),
                     (dist.ReduceOp.PRODUCT, 2.0)]:
    x = on([r + 1.0] * 2) * 1.0
    dist.all_reduce(x, op=op)
    check(f"all_reduce {op}", x, [expected] * 2)
x = on([r + 1.0])
dist.all_reduce(x, op=dist._make_nccl_premul_sum(0.5))
check("all_reduce PREMUL_SUM(0.5)", x, [1.5])
x = on([r + 1.0])
dist.all_reduce(x, op=dist._make_nccl_premul_sum(on([2.0])))
check("all_reduce PREMUL_SUM(tensor 2.0)", x, [6.0])
i = on([r + 1, 7], dtype=torch.int64)
dist.all_reduce(i)
check("all_reduce int64", i, [3, 14])

b = on([10.0 * (r + 1)] * 2)
dist.broadcast(b, src=1)
check("broadcast", b, [20.0] * 2)
x = on([r + 1.0])
dist.reduce(x, dst=0)
check("reduce", x, [3.0] if r == 0 else [2.0])

outs = [torch.empty(2, device=DEVICE) for _ in range(n)]
dist.all_gather(outs, on([r, r]) + 0)
check("all_gather", torch.cat(outs), [0.0, 0.0, 1.0, 1.0])
out = torch.empty(2 * n, device=DEVICE)
dist.all_gather_into_tensor(out, on([r, -r]) * 1)
check("all_gather_into_tensor", out, [0.0, 0.0, 1.0, -1.0])
gathered = [torch.empty(1, device=DEVICE) for _ in range(n)] if r == 0 else None
dist.gather(on([r + 5.0]), gathered, dst=0)
if r == 0:
    check("gather", torch.cat(gathered), [5.0, 6.0])
part = torch.empty(1, device=DEVICE)
dist.scatter(part, [on([7.0]), on([8.0])] if r == 1 else None, src=1)
check("scatter", part, [7.0 + r])

rs = torch.empty(2, device=DEVICE)
dist.reduce_scatter_tensor(rs, on([1.0, 2.0, 3.0, 4.0]) * (r + 1))
check("reduce_scatter_tensor SUM", rs, [[3.0, 6.0], [9.0, 12.0]][r])
dist.reduce_scatter_tensor(rs, on([1.0, 2.0, 3.0, 4.0]) * (r + 1), op=dist.ReduceOp.AVG)
check("reduce_scatter_tensor AVG", rs, [[1.5, 3.0], [4.5, 6.0]][r])
source = on([1.0, 2.0, 3.0, 4.0]) * (r + 1)
dist.reduce_scatter_tensor(rs, source, op=dist._make_nccl_premul_sum(0.25))
check("reduce_scatter_tensor PREMUL_SUM", rs, [[0.75, 1.5], [2.25, 3.0]][r])
check("PREMUL_SUM leaves the input alone", source, [float(v * (r + 1)) for v in (1, 2, 3, 4)])
one = torch.empty(1, device=DEVICE)
dist.reduce_scatter(one, [on([1.0]) * (r + 1), on([10.0]) * (r + 1)])
check("reduce_scatter", one, [[3.0], [30.0]][r])

a2a = torch.empty(2, device=DEVICE)
dist.all_to_all_single(a2a, on([10.0 * r, 10.0 * r + 1]))
check("all_to_all_single", a2a, [[0.0, 10.0], [1.0, 11.0]][r])
a2a_out = [torch.empty(1, device=DEVICE) for _ in range(n)]
dist.all_to_all(a2a_out, [on([100.0 * r + k]) for k in range(n)])
check("all_to_all", torch.cat(a2a_out), [[0.0, 100.0], [1.0, 101.0]][r])
uneven_out = [torch.empty(r + 1, device=DEVICE) for _ in range(n)]  # rank k sends rank r r+1 values
dist.all_to_all(uneven_out, [on([10.0 * r + k] * (k + 1)) for k in range(n)])
check("all_to_all, uneven", torch.cat(uneven_out), [[0.0, 10.0], [1.0, 1.0, 11.0, 11.0]][r])

if r == 0:
    dist.send(on([42.0]) + 0, dst=1)
else:
    got = torch.empty(1, device=DEVICE)
    dist.recv(got, src=0)
    check("send/recv", got, [42.0])

# CPU tensors go to Gloo directly (the group was made with backend="sdgloo").
objects = [None] * n
dist.all_gather_object(objects, {"rank": r})
assert objects == [{"rank": 0}, {"rank": 1}], objects
c = torch.tensor([r + 1.0])
dist.all_reduce(c)
assert c.tolist() == [3.0], c
dist.barrier()
dist.destroy_process_group()
print("ok")
'''


def test_every_collective_gives_the_right_result_in_stream_order(tmp_path):
    ranks = run_ranks(EVERY_COLLECTIVE, 2, tmp_path)
    assert_all_passed(ranks)
    assert all("ok" in rank.stdout for rank in ranks), describe(ranks)


STREAMS_IN_ANOTHER_ORDER = '''
init_group(timeout_s=30)
# Two collectives issued on two streams. On rank 1 the first stream is kept
# busy, so its worker reaches its collective long after the second stream's
# worker reaches the second: Gloo must still see them in program order on
# both ranks, or the ranks would pair the first with the second.
first, second = torch.Stream(device=DEVICE), torch.Stream(device=DEVICE)
a = torch.full((4,), float(RANK + 1), device=DEVICE)
b = torch.full((4,), 10.0 * (RANK + 1), device=DEVICE)
torch.simdev.synchronize()
with first:
    if RANK == 1:
        torch_simdev._C._enqueue_sleep(300_000, 0)
    dist.all_reduce(a)
with second:
    dist.all_reduce(b)
torch.simdev.synchronize()
assert a.cpu().tolist() == [3.0] * 4, a
assert b.cpu().tolist() == [30.0] * 4, b
print("issued", dist.distributed_c10d._get_default_group()._get_backend(DEVICE).collectives_issued)
dist.destroy_process_group()
'''


def test_collectives_on_two_streams_reach_gloo_in_program_order(tmp_path):
    ranks = run_ranks(STREAMS_IN_ANOTHER_ORDER, 2, tmp_path)
    assert_all_passed(ranks)


# Both ranks run one collective, then rank 1 dies (exit status 3) and rank 0
# goes on alone after half a second.
AFTER_A_PEER_DIED = '''
init_group(timeout_s=10)
x = torch.ones(1000, device=DEVICE)
dist.all_reduce(x)
torch.simdev.synchronize()
if RANK == 1:
    os._exit(3)
import time
time.sleep(0.5)
'''

A_PEER_DIES_DURING_A_SIDE_STREAM_COLLECTIVE = AFTER_A_PEER_DIED + '''
# FSDP2's pattern: the collective on a side stream, the default stream waits
# for it through an event. The failure must reach the default stream.
side = torch.simdev.Stream()
side.wait_stream(torch.simdev.current_stream())
with torch.simdev.stream(side):
    dist.all_reduce(x)
torch.simdev.current_stream().wait_stream(side)
try:
    value = (x * 1).sum().item()
except torch.AcceleratorError as error:
    assert "sdgloo allreduce" in str(error) and "after work that failed" in str(error), error
    print("raised")
else:
    raise AssertionError(f"the failed all_reduce went unnoticed: sum {value}")
'''


def test_a_failed_collective_on_a_side_stream_fails_the_stream_that_waits_for_it(tmp_path):
    rank0, rank1 = run_ranks(A_PEER_DIES_DURING_A_SIDE_STREAM_COLLECTIVE, 2, tmp_path, deadline_s=60)
    assert rank1.returncode == 3, describe([rank0, rank1])
    assert "raised" in rank0.stdout, describe([rank0, rank1])


THE_HANDLE_OF_A_FAILED_COLLECTIVE = AFTER_A_PEER_DIED + '''
work = dist.all_reduce(x, async_op=True)
deadline = time.monotonic() + 10
while not work.is_completed() and time.monotonic() < deadline:
    time.sleep(0.05)  # the peer is gone: Gloo fails the collective at once
time.sleep(0.2)
try:
    work.wait()
except dist.DistBackendError as error:
    assert str(error).startswith("sdgloo allreduce failed: ") and "by peer" in str(error), error
    print("raised")
'''


def test_the_handle_of_a_collective_that_failed_raises_a_dist_backend_error_naming_it(tmp_path):
    # It raised Gloo's own RuntimeError, naming no collective, where the same
    # failure is AcceleratorError at the stream's synchronization and
    # DistBackendError at the next collective.
    rank0, rank1 = run_ranks(THE_HANDLE_OF_A_FAILED_COLLECTIVE, 2, tmp_path, deadline_s=60)
    assert rank1.returncode == 3, describe([rank0, rank1])
    assert "raised" in rank0.stdout, describe([rank0, rank1])


def test_a_bare_init_process_group_makes_an_sdgloo_group_that_says_so(tmp_path):
    # torch 2.11 and 2.13 set such a group's default backend type to Gloo's
    # (torch_simdev.distributed._name_the_default_backend_custom).
    ranks = run_ranks('''
dist.init_process_group(init_method="file://" + os.environ["STORE"], rank=0, world_size=1)
group = dist.group.WORLD
assert group._get_backend(DEVICE).name() == "sdgloo"
assert group.name() != "gloo", group.name()
x = torch.ones(2, device=DEVICE)
dist.all_reduce(x)
assert x.cpu().tolist() == [1.0, 1.0]
dist.destroy_process_group()
print("ok")
''', 1, tmp_path)
    assert_all_passed(ranks)
    assert "No backend of type" not in ranks[0].stderr, ranks[0].stderr


# ---------------------------------------------------------------- 1 rank, in this process
# With one rank most collectives leave their data as it is; a PREMUL_SUM
# all_reduce multiplies it, so it shows when (in stream order) it ran.


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    store = tmp_path_factory.mktemp("sdgloo") / "store"
    dist.init_process_group(backend="sdgloo", init_method=f"file://{store}", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=30))
    yield dist.distributed_c10d._get_default_group()
    torch.simdev.synchronize()
    dist.destroy_process_group()


def test_the_backend_is_registered_for_simdev_and_chosen_by_default():
    from torch.distributed import Backend

    assert "sdgloo" in Backend.backend_list
    assert Backend.default_device_backend_map["simdev"] == "sdgloo"
    assert Backend.default_device_backend_map["cpu"] == "gloo"  # untouched


def test_a_collective_runs_after_the_work_before_it_and_before_the_work_after_it(group):
    x = torch.ones(256, device="simdev")
    with torch.simdev.op_delay(20_000):
        y = x * 3.0
        dist.all_reduce(y, op=dist._make_nccl_premul_sum(0.5))
        z = y + 1.0
    assert z.cpu().tolist() == [2.5] * 256


def test_the_handle_of_an_async_collective_orders_the_stream_without_blocking_the_host(group):
    x = torch.ones(64, device="simdev")
    torch.simdev.synchronize()
    torch_simdev._C._enqueue_sleep(300_000, 0)
    work = dist.all_reduce(x, op=dist._make_nccl_premul_sum(2.0), async_op=True)
    assert not work.is_completed()
    started = time.perf_counter()
    work.wait()  # the current stream waits; the host does not
    assert time.perf_counter() - started < 0.2
    assert not work.is_completed()
    future = work.get_future()
    assert future.done()  # completed at issue, in stream order (as NCCL's)
    value = future.wait()
    assert value[0].device == torch.device("simdev:0")
    assert (x + 1).cpu().tolist() == [3.0] * 64
    assert work.is_completed()
    assert work.is_success()
    assert [t.data_ptr() for t in work.result()] == [x.data_ptr()]


def test_a_side_stream_waits_for_the_collective_through_its_handle(group):
    x = torch.ones(64, device="simdev")
    side = torch.Stream(device="simdev")
    with torch.simdev.op_delay(10_000):
        work = dist.all_reduce(x * 2.0 + 0.0, op=dist._make_nccl_premul_sum(0.5), async_op=True)
        out = work.result()[0]
        with side:
            work.wait()
            y = out + 1.0
    side.synchronize()
    assert y.cpu().tolist() == [2.0] * 64


def test_a_comm_hook_style_future_callback_sees_the_reduced_tensor(group):
    x = torch.full((8,), 2.0, device="simdev")
    with torch.simdev.op_delay(10_000):
        x = x * 1.0
        future = dist.all_reduce(x, op=dist._make_nccl_premul_sum(3.0), async_op=True).get_future()
        halved = future.then(lambda f: f.value()[0] / 2)
        result = halved.wait()
    assert result.cpu().tolist() == [3.0] * 8


def test_ddp_times_its_steps_on_the_simdev_stream(group, recwarn):
    """DDP's Reducer times forward, backward computation and gradient
    communication with the timer registered for the device type
    (csrc/distributed/ReducerTimer.cpp); without one it warned and logged no
    times. The delay makes every operator take at least 2 ms of stream time."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).to("simdev"))
    x = torch.randn(4, 8).to("simdev")
    with torch.simdev.op_delay(2_000):
        for _ in range(3):  # the Reducer logs the previous step's times when a forward starts
            model(x).sum().backward()
    torch.simdev.synchronize()
    data = model._get_ddp_logging_data()
    assert not [w for w in recwarn if "Time stats" in str(w.message)], [str(w.message) for w in recwarn]
    # nanoseconds; each phase has several delayed operators on the stream
    assert data["avg_forward_compute_time"] >= 2_000_000, data
    assert data["avg_backward_compute_time"] >= 2_000_000, data
    assert data["avg_backward_comm_time"] > 0 and data["avg_backward_compute_comm_overlap_time"] >= 0, data


def test_functional_collectives_and_wait_tensor(group):
    import torch.distributed._functional_collectives as funcol

    x = torch.arange(6, dtype=torch.float32, device="simdev")
    with torch.simdev.op_delay(5_000):
        y = funcol.all_reduce(x * 2, "sum", group)
        z = funcol.all_gather_tensor(y, 0, group)
        w = (z + 1).cpu()
    assert w.tolist() == [2.0 * v + 1 for v in range(6)]


def test_tensors_on_two_devices_are_refused_clearly(group):
    if torch.simdev.device_count() < 2:
        pytest.skip("needs 2 simdev devices (SIMDEV_DEVICE_COUNT>=2)")
    outs = [torch.empty(2, device="simdev:1")]
    with pytest.raises(ValueError, match=r"sdgloo allgather: tensors on simdev:0 and simdev:1; pass the tensors "
                                         r"of one collective on one device"):
        dist.all_gather(outs, torch.ones(2, device="simdev:0"))


def test_a_non_contiguous_tensor_is_refused_clearly(group):
    x = torch.ones(4, 4, device="simdev").t()
    with pytest.raises(ValueError, match=r"sdgloo allreduce: tensor 0 .* is not contiguous; .*pass \.contiguous\(\)"):
        dist.all_reduce(x)


def test_all_to_all_lists_of_uneven_tensors_and_wrong_lists(group):
    # One alltoall_base over the tensors laid end to end, on every torch
    # (torch 2.11's Gloo has no list-form alltoall): shapes are kept per tensor.
    out = [torch.zeros(2, 3, device="simdev")]
    dist.all_to_all(out, [torch.arange(6.0, device="simdev").reshape(2, 3)])
    assert out[0].cpu().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    with pytest.raises(ValueError, match=r"sdgloo alltoall: 2 input and 1 output tensors for a group of 1 ranks; "
                                         r"pass one tensor per rank in each list"):
        dist.all_to_all([torch.zeros(2, device="simdev")], [torch.ones(2, device="simdev")] * 2)


def test_a_collective_is_refused_while_its_stream_captures_a_graph(group):
    graphs = pytest.importorskip("devbridge.graphs", reason="graph capture is driven through devbridge.graphs")
    x = torch.ones(4, device="simdev")
    g = graphs.Graph()
    with pytest.raises(RuntimeError, match="sdgloo allreduce: the current stream of simdev:0 is capturing a graph, "
                                           "and a collective cannot be captured"):
        with graphs.graph(g):
            dist.all_reduce(x)
    assert not graphs.is_current_stream_capturing()
    dist.all_reduce(x)  # the group still works
    assert x.cpu().tolist() == [1.0] * 4


def test_the_backend_refuses_a_missing_gloo_group_clearly():
    from torch_simdev import _C

    with pytest.raises(ValueError, match="SimdevBackend needs a Gloo process group"):
        _C._distributed.SimdevBackend(None, 1000)
