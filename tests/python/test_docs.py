"""Every ```python block of README.md and docs/*.md runs as written.

The convention the documents follow (docs/gpu.md, "Python blocks in the docs"):

* A ```python block runs on simdev. A document's blocks run in order in one
  fresh interpreter, as a reader pasting them one after the other would, with
  the plugin autoloaded (TORCH_DEVICE_BACKEND_AUTOLOAD unset).
* `<!-- gpu -->` on the line directly before the fence: the block needs a CUDA
  GPU and cudadev. A document's GPU blocks run in order in an interpreter of
  their own, with TORCH_DEVICE_BACKEND_AUTOLOAD=0 (simdev may be installed
  too; the blocks import torch_cudadev), as a test marked `gpu`: skipped,
  saying why, without a CUDA GPU and torch_cudadev.
* `<!-- skip: <why> -->` directly before the fence: the block cannot run
  anywhere; it is reported as a skipped test with that reason. Only for what
  truly cannot run: a fragment that merely needs a name defined is rewritten
  to define it.

Each document's blocks are written to one script whose lines keep their line
numbers in the markdown (everything else is blank), so a traceback names the
document's line; a last line reports that the end was reached. The scripts of
all documents run concurrently, one process per document, started once for the
module, with caches of their own and torch.compile compiling in-process.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TIMEOUT_S = 300
END = "devbridge-docs: every block ran"

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)[ \t]*(?P<info>[^\s`]*)")
MARKER = re.compile(r"^[ \t]*<!--\s*(?P<kind>gpu|skip)\s*(?::\s*(?P<why>.*?))?\s*-->[ \t]*$")
# Info strings a reader's renderer shows as Python but the runner would not run.
PYTHON_LOOKALIKES = {"py", "py3", "python3", "pycon", "ipython", "Python"}


@dataclass(frozen=True)
class Block:
    document: str
    line: int  # the markdown line of the first code line
    kind: str  # "simdev", "gpu" or "skip"
    why: str
    code: tuple[str, ...]  # dedented code lines, from `line` on


def parse(text: str, document: str) -> tuple[list[Block], list[str]]:
    """The document's ```python blocks, and a problem for each fence or marker
    the runner would misread (a Python lookalike info string, a marker not
    directly before a python fence, an unclosed fence)."""
    lines = text.splitlines()
    blocks, problems = [], []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            marker = MARKER.match(lines[i])
            if marker and not (i + 1 < len(lines) and (nxt := FENCE.match(lines[i + 1]))
                               and nxt.group("info") == "python"):
                problems.append(f"{document}:{i + 1}: a <!-- {marker.group('kind')} --> marker must be on the "
                                "line directly before a ```python fence")
            i += 1
            continue
        indent, fence, info = opening.group("indent"), opening.group("fence"), opening.group("info")
        end = i + 1
        while end < len(lines) and not (lines[end].strip().startswith(fence[0] * len(fence))
                                        and lines[end].strip().strip(fence[0]) == ""):
            end += 1
        if end == len(lines):
            problems.append(f"{document}:{i + 1}: the fence {fence}{info} is never closed")
        if info in PYTHON_LOOKALIKES:
            problems.append(f"{document}:{i + 1}: fence info {info!r}: write ```python, the only one that runs")
        if info == "python":
            marker = MARKER.match(lines[i - 1]) if i else None
            kind = marker.group("kind") if marker else "simdev"
            why = (marker.group("why") or "") if marker else ""
            if kind == "skip" and not why:
                problems.append(f"{document}:{i}: <!-- skip --> needs a reason: <!-- skip: why it cannot run -->")
            body = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[i + 1:end]]
            blocks.append(Block(document, i + 2, kind, why, tuple(textwrap.dedent("\n".join(body)).split("\n"))))
        i = end + 1
    return blocks, problems


def script(blocks: list[Block], total_lines: int) -> str:
    """The blocks at their own markdown line numbers, blank lines between,
    then a line that says the end was reached."""
    out = [""] * (total_lines + 1)
    for block in blocks:
        for offset, code in enumerate(block.code):
            out[block.line - 1 + offset] = code
    return "\n".join(out) + f"\nprint({END!r})\n"


def _documents():
    parsed = {}
    for path in DOCUMENTS:
        text, name = path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix()
        parsed[name] = (text.count("\n") + 1, *parse(text, name))
    return parsed


PARSED = _documents()
SIMDEV_DOCS = [d for d, (_, blocks, _) in PARSED.items() if any(b.kind == "simdev" for b in blocks)]
GPU_DOCS = [d for d, (_, blocks, _) in PARSED.items() if any(b.kind == "gpu" for b in blocks)]
SKIPPED = [b for _, (_, blocks, _) in PARSED.items() for b in blocks if b.kind == "skip"]


def _why_gpu_blocks_cannot_run() -> str | None:
    import torch

    if torch.version.cuda is None or not torch.cuda.is_available():
        return "the block needs a CUDA GPU and a CUDA build of torch; not available here"
    if importlib.util.find_spec("torch_cudadev") is None:
        return "the block needs cudadev: pip install --no-build-isolation plugins/cudadev"
    return None


def _start(document: str, kind: str, directory: Path) -> subprocess.Popen:
    total, blocks, _ = PARSED[document]
    path = directory / (Path(document).name + ".py")
    path.write_text(script([b for b in blocks if b.kind == kind], total), encoding="utf-8")
    env = dict(os.environ)
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    if kind == "gpu":
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # simdev may be installed too: one PrivateUse1 plugin per process
    else:
        # The simdev blocks read as on a machine whose only accelerator is
        # simdev (the README's tour): on a CUDA machine Triton's nvidia driver
        # would be active and the blocks would need activate().
        env["CUDA_VISIBLE_DEVICES"] = ""
    # Caches of their own: a document's compiles neither reuse nor leave another run's kernels.
    env["TORCHINDUCTOR_CACHE_DIR"] = str(directory / "inductor")
    env["TRITON_CACHE_DIR"] = str(directory / "triton")
    # Compiled in-process: a pool of compile workers costs each compiling document
    # seconds of CPU; test_inductor_simdev.py covers the workers.
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    return subprocess.Popen([sys.executable, str(path)], cwd=directory, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _finish(process: subprocess.Popen, document: str) -> None:
    try:
        output, _ = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        pytest.fail(f"{document}'s python blocks did not finish in {TIMEOUT_S} s; output:\n{output[-6000:]}")
    assert process.returncode == 0 and output.rstrip().endswith(END), (
        f"{document}'s python blocks failed (exit status {process.returncode}); the traceback's line numbers are "
        f"the document's:\n{output[-6000:]}")


class _Runs:
    """The documents' processes: started ahead of their tests, or at their test."""

    def __init__(self, tmp_path_factory):
        self.tmp_path_factory = tmp_path_factory
        self.processes: dict[str, subprocess.Popen] = {}

    def start(self, document: str) -> None:
        if document not in self.processes:
            directory = self.tmp_path_factory.mktemp(Path(document).stem)
            self.processes[document] = _start(document, "simdev", directory)

    def finish(self, document: str) -> None:
        self.start(document)
        _finish(self.processes.pop(document), document)


@pytest.fixture(scope="module")
def simdev_runs(request, tmp_path_factory):
    """Every selected document's process, all started at once; under xdist a
    worker runs only some of them, so each starts at its own test there."""
    runs = _Runs(tmp_path_factory)
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        for item in request.session.items:
            if getattr(item, "originalname", None) == "test_python_blocks_run_on_simdev":
                runs.start(item.callspec.params["document"])
    yield runs
    for process in runs.processes.values():
        if process.poll() is None:
            process.kill()
        process.communicate()


@pytest.mark.skipif(importlib.util.find_spec("torch_simdev") is None,
                    reason="torch_simdev is not installed: pip install --no-build-isolation plugins/simdev")
@pytest.mark.parametrize("document", SIMDEV_DOCS)
def test_python_blocks_run_on_simdev(document, simdev_runs):
    simdev_runs.finish(document)


@pytest.mark.gpu
@pytest.mark.parametrize("document", GPU_DOCS)
def test_gpu_blocks_run_on_cudadev(document, tmp_path):
    why = _why_gpu_blocks_cannot_run()
    if why:
        pytest.skip(why)
    _finish(_start(document, "gpu", tmp_path), document)


if SKIPPED:  # reported one by one, as skips
    @pytest.mark.parametrize("block", SKIPPED, ids=[f"{b.document}:{b.line}" for b in SKIPPED])
    def test_block_marked_not_runnable(block):
        pytest.skip(f"{block.document}:{block.line} is marked not runnable: {block.why}")


def test_every_fence_and_marker_is_read_as_written():
    problems = [p for _, (_, _, found) in PARSED.items() for p in found]
    assert not problems, "\n".join(problems)


def test_the_runner_reads_the_convention():
    text = textwrap.dedent("""\
        # Title
        ```python
        a = 1
        ```
        1. a list item:

           <!-- gpu -->
           ```python
           if a:
               b = 2
           ```
        <!-- skip: an API signature -->
        ```python
        def f(x) -> int: ...
        ```
        ```bash
        echo not python
        ```
        <!-- gpu -->
        text, not a fence
        ```py
        c = 3
        ```
        """)
    blocks, problems = parse(text, "t.md")
    assert [(b.line, b.kind, b.why) for b in blocks] == [(3, "simdev", ""), (9, "gpu", ""),
                                                        (14, "skip", "an API signature")]
    assert blocks[1].code == ("if a:", "    b = 2")
    assert [p.split(":")[1] for p in problems] == ["19", "21"]
    lines = script([b for b in blocks if b.kind == "gpu"], text.count("\n") + 1).split("\n")
    assert lines[8:10] == ["if a:", "    b = 2"] and not any(lines[:8])
    assert lines[-2] == f"print({END!r})"
