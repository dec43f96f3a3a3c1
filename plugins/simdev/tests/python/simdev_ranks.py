"""Runs a script as N ranks of one process group, each in its own process.

Each rank is a fresh interpreter started with subprocess, never
torch.multiprocessing.spawn: spawn's join ends the surviving ranks as soon as
one fails, which hides what a failure does to the others. The ranks meet
through a FileStore in `directory` (no ports) and use simdev:0 of their own
process. A rank reads its rank, the world size and the store from the
environment (RANK, WORLD_SIZE, STORE) and starts with `init_group()` below.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
import time

PRELUDE = '''
import datetime, os, sys
import torch
import torch.distributed as dist

RANK = int(os.environ["RANK"])
WORLD_SIZE = int(os.environ["WORLD_SIZE"])
DEVICE = torch.device("simdev", 0)


def init_group(timeout_s=20.0, **kwargs):
    kwargs.setdefault("device_id", DEVICE)
    dist.init_process_group(init_method="file://" + os.environ["STORE"], rank=RANK, world_size=WORLD_SIZE,
                            timeout=datetime.timedelta(seconds=timeout_s), **kwargs)
'''


@dataclasses.dataclass
class Rank:
    rank: int
    returncode: int | None  # None: killed at the deadline
    stdout: str
    stderr: str

    def describe(self) -> str:
        return (f"--- rank {self.rank}: exit code {self.returncode}\nstdout:\n{self.stdout[-3000:]}\n"
                f"stderr:\n{self.stderr[-3000:]}")


def run_ranks(script: str, world_size: int, directory, deadline_s: float = 120.0, **env: str) -> list[Rank]:
    """Runs `script` (after PRELUDE) as `world_size` processes; each is killed
    if it has not ended `deadline_s` seconds after the start."""
    code = PRELUDE + textwrap.dedent(script)
    processes = []
    for rank in range(world_size):
        rank_env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world_size),
                    "STORE": os.path.join(str(directory), "store"), "SIMDEV_DEVICE_COUNT": "1",
                    "OMP_NUM_THREADS": "1", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", **env}
        processes.append(subprocess.Popen([sys.executable, "-c", "import torch_simdev\n" + code], env=rank_env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    end = time.monotonic() + deadline_s
    ranks = []
    for rank, process in enumerate(processes):
        try:
            stdout, stderr = process.communicate(timeout=max(0.1, end - time.monotonic()))
            ranks.append(Rank(rank, process.returncode, stdout, stderr))
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
            ranks.append(Rank(rank, None, stdout, stderr))
    return ranks


def describe(ranks: list[Rank]) -> str:
    return "\n".join(rank.describe() for rank in ranks)


def assert_all_passed(ranks: list[Rank]) -> None:
    assert all(rank.returncode == 0 for rank in ranks), describe(ranks)
