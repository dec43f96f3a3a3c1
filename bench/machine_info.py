"""What the benchmarks record of the machine and the commit they ran at."""

from __future__ import annotations

import os
import pathlib
import platform
import subprocess

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent


def git_commit() -> str:
    """The commit measured: $GIT_COMMIT first (scripts/gpu_suite.sh sets it: the
    GPU machine's copy of .git may lag behind the working tree it was sent),
    else `git rev-parse --short HEAD` with "-dirty" for uncommitted changes to
    tracked files, else "unknown"."""
    if os.environ.get("GIT_COMMIT"):
        return os.environ["GIT_COMMIT"]

    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return "unknown"
    return commit + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def cpu_model() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
