"""``devbridge check``: a conformance report for the PrivateUse1 backend in the process."""

from __future__ import annotations

import platform
import sys

from .plugin import Backend, load_backend
from .registry import CHECKS, run_one
from .report import render_json, render_text
from .result import CheckFailed, CheckResult

# Importing a check module registers its checks, in this order.
from . import backend_checks  # noqa: F401,E402  (registration side effect)
from . import dlpack_checks  # noqa: F401,E402
from . import triton_checks  # noqa: F401,E402
from . import compile_checks  # noqa: F401,E402

__all__ = ["CheckResult", "run_checks", "run_check_command"]


def run_checks(backend: Backend) -> list[CheckResult]:
    return [run_one(entry, backend) for entry in CHECKS]


def _environment(backend: Backend | None) -> dict:
    import torch

    env = {"python": platform.python_version(), "torch": torch.__version__}
    try:
        import devbridge

        env["devbridge"] = devbridge.__version__
    except Exception as exc:  # report, do not hide: the checks below will fail too
        env["devbridge"] = f"unavailable ({exc})"
    if backend is not None:
        env["backend"] = backend.name
        env["loaded_from"] = backend.loaded_from
    return env


def run_check_command(*, device: str | None, plugin: str | None, as_json: bool) -> int:
    """Run all checks; print the report; return the process exit code."""
    backend = None
    try:
        backend = load_backend(plugin)
        if device is not None and backend.name != device:
            raise CheckFailed(
                f"the loaded PrivateUse1 backend is '{backend.name}', not '{device}'",
                f"load the {device} plugin (it must be the only one claiming PrivateUse1 in "
                "this process), or drop --device",
            )
        results = run_checks(backend)
    except CheckFailed as failure:
        results = [CheckResult(name="backend", capability="PrivateUse1 backend loaded",
                               passed=False, detail=failure.detail, fix=failure.fix)]
    env = _environment(backend)
    if as_json:
        print(render_json(env, results))
    else:
        header = "devbridge check: " + ", ".join(f"{k} {v}" for k, v in env.items())
        print(render_text(header, results))
    sys.stdout.flush()
    return 0 if all(r.passed for r in results) else 1
