"""The ordered list of checks that `devbridge check` runs.

A check is a function ``(backend) -> CheckResult | None``; it fails by raising
CheckFailed(detail, fix). Checks register themselves with ``@check`` in the
order they should run (later checks may assume earlier capabilities).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Callable

from .plugin import Backend
from .result import CheckFailed, CheckResult


@dataclass
class _Check:
    name: str
    capability: str
    body: Callable[[Backend, CheckResult], None]


CHECKS: list[_Check] = []


def check(name: str, capability: str):
    """Register a check body ``(backend, result)`` that fills ``result``."""

    def register(body: Callable[[Backend, CheckResult], None]):
        CHECKS.append(_Check(name, capability, body))
        return body

    return register


def run_one(entry: _Check, backend: Backend) -> CheckResult:
    result = CheckResult(name=entry.name, capability=entry.capability, passed=True)
    try:
        entry.body(backend, result)
    except CheckFailed as failure:
        result.passed = False
        result.detail = failure.detail
        result.fix = failure.fix
    except Exception as exc:  # an unexpected error is a failure with its traceback
        result.passed = False
        result.detail = f"{type(exc).__name__}: {exc}"
        result.fix = ("unexpected error while checking; the traceback names the failing "
                      "call:\n" + traceback.format_exc(limit=4))
    return result
