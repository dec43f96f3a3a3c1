"""cudadev's collective backend, cdnccl (torch_cudadev/distributed.py,
csrc/distributed.cpp): NCCL on cudadev tensors, on cudadev's current stream.
World size 1 on one GPU, in a process of its own (a process group is
process-wide state). simdev's counterpart: plugins/simdev/tests/python/test_distributed.py."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

pytestmark = pytest.mark.gpu

SCRIPT = '''
import datetime, os, sys, tempfile, time
import torch
import torch_cudadev
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


store = os.path.join(tempfile.mkdtemp(), "store")
dist.init_process_group(init_method=f"file://{store}", rank=0, world_size=1,
                        device_id=torch.device("cudadev", 0), timeout=datetime.timedelta(seconds=60))
assert dist.get_backend() == "cdnccl", dist.get_backend()
dev = torch.device("cudadev", 0)
warm_up = torch.ones(1, device=dev)
dist.all_reduce(warm_up)  # the first collective makes NCCL's communicator (a host synchronization)
torch.cudadev.synchronize()

# In stream order, with no host synchronization: the stream is held back by a
# spin kernel; a PREMUL_SUM all_reduce (x * factor with one rank) shows when it
# ran. Each case runs twice and is checked the second time: a kernel's first
# launch loads its module, which synchronizes.
x = torch.ones(1 << 20, device=dev)

def after_queued_work():
    torch.cudadev.synchronize()
    torch.cudadev._sleep_on_current_stream(200)
    started = time.perf_counter()
    y = x * 3.0
    work = dist.all_reduce(y, op=dist._make_nccl_premul_sum(0.5), async_op=True)
    z = y + 1.0
    issued = time.perf_counter() - started
    completed_at_issue = work.is_completed()
    work.wait()
    return issued, completed_at_issue, work, z

def waited_for_on_a_side_stream():
    side = torch.cudadev.Stream()
    torch.cudadev._sleep_on_current_stream(100)
    y = x * 2.0
    work = dist.all_reduce(y, op=dist._make_nccl_premul_sum(0.25), async_op=True)
    with torch.cudadev.stream(side):
        work.wait()
        w = y + 1.0
    side.synchronize()
    return w

for attempt in range(2):
    issued, completed_at_issue, work, z = after_queued_work()
    w = waited_for_on_a_side_stream()
assert issued < 0.1, f"issuing took {issued:.3f} s: something synchronized the host"
assert not completed_at_issue
assert torch.equal(z.cpu(), torch.full((1 << 20,), 2.5)), z
assert work.is_completed()
assert work.get_future().wait()[0].device == dev
assert torch.equal(w.cpu(), torch.full((1 << 20,), 1.5))

out = torch.empty(4, device=dev)
dist.all_gather_into_tensor(out, torch.arange(4.0, device=dev))
rs = torch.empty(4, device=dev)
dist.reduce_scatter_tensor(rs, torch.arange(4.0, device=dev))
assert out.cpu().tolist() == [0, 1, 2, 3] and rs.cpu().tolist() == [0, 1, 2, 3]
# The list forms and the rooted collectives (one rank: each is a copy or the identity)
r = torch.arange(4.0, device=dev)
dist.reduce(r, dst=0, op=dist._make_nccl_premul_sum(2.0))
gathered = [torch.empty(3, device=dev)]
dist.gather(torch.arange(3.0, device=dev), gather_list=gathered, dst=0)
scattered = torch.empty(3, device=dev)
dist.scatter(scattered, scatter_list=[torch.arange(3.0, device=dev) + 1], src=0)
reduced = torch.empty(2, device=dev)
dist.reduce_scatter(reduced, [torch.arange(2.0, device=dev) + 7])
exchanged = [torch.empty(2, device=dev)]
dist.all_to_all(exchanged, [torch.arange(2.0, device=dev) + 5])
assert r.cpu().tolist() == [0, 2, 4, 6], r
assert gathered[0].cpu().tolist() == [0, 1, 2] and scattered.cpu().tolist() == [1, 2, 3]
assert reduced.cpu().tolist() == [7, 8] and exchanged[0].cpu().tolist() == [5, 6]
dist.barrier()

@torch.compile
def step(t):
    return funcol.all_reduce(t * 2, "sum", dist.group.WORLD).sin() + 1
t = torch.arange(8.0, device=dev)
assert torch.allclose(step(t).cpu(), (t.cpu() * 2).sin() + 1)

# A compiled DDP training step equals the same step without DDP.
from torch.nn.parallel import DistributedDataParallel as DDP
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).to(dev)
reference = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).to(dev)
reference.load_state_dict(model.state_dict())
ddp = torch.compile(DDP(model, device_ids=[0]))
batch = torch.randn(32, 64, device=dev)
for net in (ddp, reference):
    net(batch).square().mean().backward()
for a, b in zip(model.parameters(), reference.parameters()):
    assert torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-6), (a.grad - b.grad).abs().max()
# DDP's Reducer times its steps with cudadev's timer (csrc/reducer_timer.cpp)
timed = DDP(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).to(dev))
for _ in range(3):
    timed(batch).sum().backward()
torch.cudadev.synchronize()
stats = timed._get_ddp_logging_data()
assert stats.get("avg_forward_compute_time", 0) > 0 and stats.get("avg_backward_compute_time", 0) > 0, stats
dist.destroy_process_group()
print("cdnccl ok")
'''


def test_nccl_collectives_on_cudadev_streams_world_size_one():
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0 and "cdnccl ok" in result.stdout, result.stdout[-3000:] + result.stderr[-5000:]
