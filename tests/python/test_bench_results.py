"""bench/results holds one current result per benchmark and machine, and the
docs cite files that exist (bench/README.md). Older runs live in git history;
the docs cite one as `<commit>:bench/results/<file>`. Pure Python, no GPU."""

from __future__ import annotations

import fnmatch
import json
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
# A benchmark is a script of bench/; its results are <script>_<machine>.*
BENCHMARKS = sorted(
    p.stem for p in (ROOT / "bench").glob("*.py") if p.stem != "machine_info"
)
# Diagnoses, not benchmarks: their JSON holds measurements without rows or targets.
DIAGNOSES = ("compile_profile", "train_profile")
REPORT_SUFFIXES = {".json", ".md", ".png", ".txt"}
PER_COMMIT = re.compile(r"_[0-9a-f]{7,40}(-dirty)?$")
# Files whose bench/results paths must resolve.
CITING = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md")),
          *sorted((ROOT / "bench").glob("*.py"))]  # fmt: skip
# `bench/results/...`, optionally preceded by `<commit>:` (a run in git history).
CITATION = re.compile(r"(?:\b([0-9a-f]{7,40}):)?\bbench/results/([A-Za-z0-9_.*/-]*[A-Za-z0-9_*/])")


def result_files() -> list[pathlib.Path]:
    return sorted(p for p in RESULTS.iterdir() if p.is_file() and p.suffix in REPORT_SUFFIXES)


def benchmark_of(path: pathlib.Path) -> str | None:
    # the longest script name that prefixes the stem (compile_profile before compile)
    names = [b for b in BENCHMARKS if path.stem.startswith(b + "_")]
    return max(names, key=len) if names else None


def json_results() -> list[pathlib.Path]:
    return [p for p in result_files() if p.suffix == ".json"]


def test_there_are_results():
    assert json_results(), RESULTS


@pytest.mark.parametrize("path", result_files(), ids=lambda p: p.name)
def test_one_current_result_per_benchmark_and_machine(path):
    """<benchmark>_<machine>.<ext>: named after a script of bench/, no commit in the name."""
    assert benchmark_of(path), f"{path.name}: not <benchmark>_<machine> for a script in bench/ ({BENCHMARKS})"
    assert not PER_COMMIT.search(path.stem), (
        f"{path.name}: a per-commit name; the current run takes the canonical name, "
        "older runs stay in git history")


def test_subfolders_hold_no_benchmark_results():
    """bench/results/h200/ and the like: the GPU suite's reports and logs only."""
    misplaced = [str(p.relative_to(RESULTS)) for p in RESULTS.rglob("*")
                 if p.is_file() and p.parent != RESULTS and benchmark_of(p)]  # fmt: skip
    assert not misplaced, f"benchmark results outside bench/results/: {misplaced}"


@pytest.mark.parametrize("path", [p for p in result_files() if p.suffix in (".md", ".png")],
                         ids=lambda p: p.name)  # fmt: skip
def test_tables_and_plots_have_their_json(path):
    assert path.with_suffix(".json").is_file(), f"{path.name} without {path.stem}.json (the run's numbers)"


def commit_and_rows(data) -> tuple[list[str], list | None]:
    """The commits recorded (top level, `meta`, or in every row of a bare list)
    and the rows (None where the file has none)."""
    if isinstance(data, list):
        return [row.get("commit") for row in data], data
    commit = data.get("commit") or (data.get("meta") or {}).get("commit")
    return [commit], data.get("rows")


@pytest.mark.parametrize("path", json_results(), ids=lambda p: p.name)
def test_json_has_commit_and_rows_with_targets(path):
    data = json.loads(path.read_text())
    commits, rows = commit_and_rows(data)
    assert commits and all(isinstance(c, str) and re.match(r"[0-9a-f]{7,40}", c) for c in commits), (
        f"{path.name}: no commit recorded ({commits})")
    assert len(set(commits)) == 1, f"{path.name}: rows from several commits {sorted(set(commits))}"
    if rows is None:
        assert benchmark_of(path) in DIAGNOSES, f"{path.name}: no rows"
        return
    assert rows, f"{path.name}: empty rows"
    for row in rows:
        assert "target" in row and "target_met" in row, f"{path.name}: a row without target/target_met: {row}"
        if row["target"] is None:
            assert row["target_met"] is None, f"{path.name}: target_met without a target: {row.get('name')}"
        else:
            assert isinstance(row["target_met"], bool), f"{path.name}: target {row['target']!r} not judged"


def citations() -> list[tuple[str, str | None, str]]:
    found = []
    for source in CITING:
        text = source.read_text()
        for match in CITATION.finditer(text):
            commit, rest = match.groups()
            if text[match.end():match.end() + 1] == "<" or rest in ("", "/"):
                continue  # a pattern (dlpack_exchange_<machine>, <file>) or the folder itself
            found.append((str(source.relative_to(ROOT)), commit, "bench/results/" + rest))
    return found


def test_docs_cite_results():
    assert any(commit is None for _, commit, _ in citations())


@pytest.mark.parametrize("source,commit,path", [c for c in citations() if c[1] is None],
                         ids=lambda v: v if isinstance(v, str) else "")  # fmt: skip
def test_cited_current_results_exist(source, commit, path):
    # a file, a glob, or a stem the script writes its files under (--out bench/results/x)
    matches = list(ROOT.glob(path)) + list(ROOT.glob(path + ".*"))
    assert matches, (
        f"{source} cites {path}, which is not in the tree; a run in git history is cited "
        f"as <commit>:{path}")


def git(*args: str) -> str | None:
    """git's output, None where git or the repository is absent or the command fails."""
    if not shutil.which("git") or not (ROOT / ".git").exists():
        return None
    done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


@pytest.mark.parametrize("source,commit,path", [c for c in citations() if c[1] is not None],
                         ids=lambda v: v if isinstance(v, str) else "")  # fmt: skip
def test_cited_runs_in_history_exist(source, commit, path):
    if git("cat-file", "-e", f"{commit}^{{commit}}") is None:  # a shallow clone lacks it
        pytest.skip(f"no git checkout, or {commit} not fetched")
    listing = git("ls-tree", "-r", "--name-only", commit, "--", path.rsplit("/", 1)[0]) or ""
    assert any(fnmatch.fnmatch(name, path) for name in listing.split()), (
        f"{source} cites {commit}:{path}, which that commit does not have")
