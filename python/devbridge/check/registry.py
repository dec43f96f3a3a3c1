"""The ordered list of checks that `devbridge check` runs.

A check is a function ``(backend, result)`` that fills ``result``; it fails
by raising CheckFailed(detail, fix). Checks register themselves with ``@check``
in the order they should run.

A check names the checks it depends on (``depends_on``, each registered
before it): the capabilities it uses without checking them itself. When one
of them failed or was skipped, the check is not run but skipped, naming that
dependency, so one root cause is reported once, with its fix, rather than
again by every check it breaks. Name only dependencies whose failure makes
this check fail for the same reason, or whose skip makes it inapplicable too.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Callable, Iterable

from .plugin import Backend
from .result import FAIL, CheckFailed, CheckResult


@dataclass
class _Check:
    name: str
    capability: str
    body: Callable[[Backend, CheckResult], None]
    depends_on: tuple[str, ...] = ()


CHECKS: list[_Check] = []


def check(name: str, capability: str, *, depends_on: Iterable[str] = ()):
    """Register a check body ``(backend, result)`` that fills ``result``,
    run only where every check in ``depends_on`` passed."""
    depends_on = tuple(depends_on)
    known = {entry.name for entry in CHECKS}
    if name in known:
        raise ValueError(f"check {name!r} is registered twice")
    unknown = [dependency for dependency in depends_on if dependency not in known]
    if unknown:
        raise ValueError(f"check {name!r} depends on {', '.join(map(repr, unknown))}, which must be "
                         "registered before it")

    def register(body: Callable[[Backend, CheckResult], None]):
        CHECKS.append(_Check(name, capability, body, depends_on))
        return body

    return register


def blocked(entry: _Check, done: dict[str, CheckResult]) -> CheckResult | None:
    """``entry`` skipped because of a dependency that failed (the first such),
    else one that was skipped; None when every dependency that ran passed."""
    ran = [done[name] for name in entry.depends_on if name in done]
    culprit = (next((r for r in ran if r.failed), None)
               or next((r for r in ran if r.skipped), None))
    if culprit is None:
        return None
    result = CheckResult(name=entry.name, capability=entry.capability, depends_on=entry.depends_on)
    outcome = "failed" if culprit.failed else "was skipped"
    result.skip(f'skipped: depends on {culprit.name} ("{culprit.capability}"), which {outcome}',
                blocked_by=culprit.name)
    return result


def run_all(backend: Backend, checks: Iterable[_Check] | None = None) -> list[CheckResult]:
    """Run ``checks`` (default: every registered one) in order, skipping each
    whose dependencies did not pass."""
    done: dict[str, CheckResult] = {}
    for entry in CHECKS if checks is None else checks:
        done[entry.name] = blocked(entry, done) or run_one(entry, backend)
    return list(done.values())


def run_one(entry: _Check, backend: Backend) -> CheckResult:
    """Run one check, whatever its dependencies did."""
    result = CheckResult(name=entry.name, capability=entry.capability, depends_on=entry.depends_on)
    try:
        entry.body(backend, result)
    except CheckFailed as failure:
        result.fail(failure.detail, failure.fix, failure.notes)
    except Exception as exc:  # an unexpected error is a failure with its traceback
        result.fail(f"{type(exc).__name__}: {exc}",
                    "unexpected error while checking; the traceback above names the failing call",
                    traceback.format_exc(limit=4).splitlines())
    return result
