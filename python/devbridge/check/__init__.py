"""``devbridge check``: a conformance report for the PrivateUse1 backend in the process."""

from __future__ import annotations

import platform
import sys

from .plugin import Backend, load_backend
from .registry import run_all
from .report import render_json, render_text
from .result import FAIL, CheckFailed, CheckResult

# Importing a check module registers its checks, in this order.
from . import backend_checks  # noqa: F401,E402  (registration side effect)
from . import dlpack_checks  # noqa: F401,E402
from . import triton_checks  # noqa: F401,E402
from . import compile_checks  # noqa: F401,E402
from . import distributed_checks  # noqa: F401,E402

__all__ = ["CheckResult", "run_checks", "run_check_command"]


def run_checks(backend: Backend) -> list[CheckResult]:
    """Every registered check, in order; one whose dependency failed or was
    skipped is skipped, naming it."""
    return run_all(backend)


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


def _versions() -> dict:
    """The releases devbridge is checked on, and whether the running ones are
    among them (an unchecked one is refused unless the opt-in is set)."""
    from .. import _versions as versions

    running = {"torch": versions._installed("torch")}
    try:
        running["triton"] = versions._installed("triton")
    except Exception:  # not installed, or broken: the Triton checks say which
        running["triton"] = None
    report = {
        "checked": {"torch": list(versions.TORCH_CHECKED), "torch_accepted": list(versions.TORCH_ACCEPTED),
                    "triton": list(versions.TRITON_CHECKED)},
        "allow_unchecked": versions.allow_unchecked(),
    }
    for package, version in running.items():
        report[package] = {"version": version,
                           "checked": None if version is None else versions.is_checked(package, version)}
    return report


def _versions_line(report: dict) -> str:
    from .. import _versions as versions

    def state(package: str, name: str) -> str:
        entry = report[package]
        if entry["version"] is None:
            return f"{name} not installed"
        if entry["checked"]:
            return f"{name} {entry['version']} checked"
        opt_in = "allowed by " if report["allow_unchecked"] else "refused without "
        return f"{name} {entry['version']} NOT checked ({opt_in}{versions.ALLOW_UNCHECKED_ENV}=1)"

    return (f"versions: {state('torch', 'torch')}, {state('triton', 'Triton')}; "
            f"devbridge is checked on {versions.checked_summary()}")


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
                               status=FAIL, detail=failure.detail, fix=failure.fix, notes=failure.notes)]
    env = _environment(backend)
    versions = _versions()
    if as_json:
        print(render_json(dict(env, versions=versions), results))
    else:
        header = "devbridge check: " + ", ".join(f"{k} {v}" for k, v in env.items())
        print(render_text(header + "\n" + _versions_line(versions), results))
    sys.stdout.flush()
    return 1 if any(r.failed for r in results) else 0  # a skip does not fail the run
