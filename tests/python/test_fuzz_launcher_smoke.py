"""The launcher fuzz target (tests/fuzz/fuzz_launcher.py) on a fixed corpus, so
every CI run exercises it without a fuzzing engine: the default, all-valid
call of every launcher/device pair, then random byte strings from a fixed
seed, 300 inputs in all (fuzz_launcher.smoke_corpus). tests/fuzz/run.sh is
the open-ended version.

Each input is one call of a launcher built from a real Triton compile (or a
random signature) on simdev's probe_args kernel; the target itself checks it
(a return or an exception with a message, never SystemError; nothing launched
when it raised; the parameter layout the kernel saw; unchanged refcounts of
everything it was given; simdev memory back at the baseline). The corpus is
replayed in a child process: a launcher that crashes takes only the child
down, the test names the input, and the replay resumes after it.

A second child replays the corpus three times and compares Python's allocated
blocks after the last two passes: a launcher that leaks new objects grows
them by about one block per affected input.

REGRESSIONS are the launcher bugs the fuzzer found, fixed; their reproducers
must keep running cleanly.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

pytest.importorskip("triton", reason="Triton is not installed: the launcher fuzz target compiles real kernels "
                                     "(pip install triton==3.7.1)")
pytestmark = pytest.mark.skipif(
    torch._C._get_privateuse1_backend_name() != "simdev",
    reason="torch_simdev is not installed (the launcher fuzz target launches on simdev): "
    "pip install --no-build-isolation plugins/simdev",
)

FUZZ_DIR = pathlib.Path(__file__).resolve().parents[1] / "fuzz"
TARGET = FUZZ_DIR / "fuzz_launcher.py"
sys.path.insert(0, str(FUZZ_DIR))

from fuzz_launcher import REGRESSIONS, smoke_corpus  # noqa: E402

CORPUS_SIZE = 300
MAX_BLOCK_GROWTH = 10  # per pass of 300 inputs; the fuzzer's own counters account for a few


def child(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TARGET), *args], capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def replay() -> dict[str, dict]:
    """label -> result record; a crashed input gets outcome "crashed"."""
    results: dict[str, dict] = {}
    corpus = None
    start = 0
    while True:
        run = child("--smoke-replay", "--start", str(start))
        last_started = None
        for line in run.stdout.splitlines():
            record = json.loads(line)
            if "corpus" in record:
                corpus = smoke_corpus(len(record["targets"]))
                assert len(corpus) == record["corpus"] == CORPUS_SIZE, record
            elif "start" in record:
                last_started = record["start"]
            else:
                results[record["label"]] = record
        if run.returncode == 0:
            return results
        if corpus is None or last_started is None or corpus[last_started][0] in results:
            raise RuntimeError(f"the replay failed before any input (exit {run.returncode}):\n{run.stderr[-3000:]}")
        label, data = corpus[last_started]
        detail = "\n".join(line for line in run.stderr.splitlines() if not line.startswith("frame #"))
        results[label] = {"label": label, "outcome": "crashed",
                          "detail": f"input {data.hex()}: exit status {run.returncode}:\n{detail[-2000:]}"}
        start = last_started + 1


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    return replay()


def describe(records: list[dict]) -> str:
    return "\n\n".join(f"{r['label']}: {r['outcome']}\n{r['detail']}" for r in records[:5])


def test_the_whole_corpus_ran(results):
    assert len(results) == CORPUS_SIZE


def test_no_input_crashes_or_breaks_the_contract(results):
    """0 crashes, and no violation: SystemError or a message-less exception,
    a launch after a refusal, a wrong parameter layout, a changed refcount,
    simdev memory not back at the baseline."""
    bad = [r for r in results.values() if r["outcome"] in ("crashed", "violated")]
    assert not bad, f"{len(bad)} of {len(results)} inputs failed:\n\n{describe(bad)}"


def test_every_launcher_launches_with_valid_arguments(results):
    """The all-valid call of each launcher (real Triton descriptors and random
    signatures, on simdev:0 and simdev:1) reaches the kernel."""
    defaults = [r for label, r in results.items() if label.startswith("target:")]
    assert defaults and all(r["outcome"] == "launched" for r in defaults), describe(
        [r for r in defaults if r["outcome"] != "launched"])


def test_random_inputs_reach_both_paths(results):
    """Not degenerate: many inputs launch, many are refused, with several exception types."""
    records = [r for label, r in results.items() if label.startswith("random:")]
    launched = sum(r["outcome"] == "launched" for r in records)
    raised = {r["outcome"] for r in records if r["outcome"].startswith("raised")}
    assert launched >= 40 and len(records) - launched >= 100, f"{launched} of {len(records)} launched"
    assert {"raised TypeError", "raised ValueError"} <= raised, raised


def test_no_python_or_device_memory_growth():
    run = child("--leak-check", "3")
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.splitlines()[-1])
    blocks = report["blocks"]
    assert blocks[2] - blocks[1] <= MAX_BLOCK_GROWTH, (
        f"Python's allocated blocks grew by {blocks[2] - blocks[1]} over one more pass of the "
        f"corpus ({blocks}): the launcher leaks objects")
    assert report["objects"][2] <= report["objects"][1], report["objects"]
    assert report["memory"] == report["baseline"], report


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_launcher_bugs_the_fuzzer_found_stay_fixed(name):
    """Each reproducer of a bug the fuzzer found (user code mutating a list or
    descriptor the launcher is packing: a NULL read, a use-after-free) runs in
    a child and must end normally, printing "no crash"."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(FUZZ_DIR.parent / "python"), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", REGRESSIONS[name]], capture_output=True, text=True,
                         timeout=120, env=env)  # fmt: skip
    assert run.returncode == 0 and "no crash" in run.stdout, (
        f"{name}: exit status {run.returncode}: {run.stderr.strip()[-1000:]}")
