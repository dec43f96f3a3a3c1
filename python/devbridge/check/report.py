"""Render check results as a table for people or JSON for machines."""

from __future__ import annotations

import json

from .result import FAIL, PASS, SKIP, CheckResult, one_line

_LABEL = {PASS: "pass", FAIL: "FAIL", SKIP: "skip"}
# Notes and fixes start under the capability column: a line of its own each,
# never wrapped, so that grep and a terminal both see it whole.
_INDENT = " " * 10


def _format_cost(costs: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:,.0f} ns" for name, value in costs.items())


def counts(results: list[CheckResult]) -> dict[str, int]:
    return {status: sum(1 for r in results if r.status == status) for status in (PASS, FAIL, SKIP)}


def render_text(header: str, results: list[CheckResult]) -> str:
    width = max(len(r.capability) for r in results) if results else 10
    lines = [header, ""]
    lines.append(f"  {'status':6}  {'capability':{width}}  measured cost / detail")
    lines.append(f"  {'-' * 6}  {'-' * width}  {'-' * 40}")
    fixed_by: dict[str, str] = {}  # each fix printed, and the check it was printed for
    for r in results:
        detail = "; ".join(part for part in (_format_cost(r.costs_ns), r.detail) if part)
        lines.append(f"  {_LABEL[r.status]:6}  {r.capability:{width}}  {detail}".rstrip())
        lines.extend(_INDENT + note for note in r.notes)
        if r.failed and r.fix:
            fix = one_line(r.fix)
            if fix in fixed_by:  # one root cause, one fix: printed once
                lines.append(_INDENT + f'fix: the same as for "{fixed_by[fix]}" above')
            else:
                fixed_by[fix] = r.capability
                lines.append(_INDENT + "fix: " + fix)
    n = counts(results)
    lines.append("")
    summary = f"{n[PASS]} passed, {n[FAIL]} failed, {n[SKIP]} skipped"
    lines.append(summary if not n[FAIL] else summary + "  -- see 'fix:' lines above")
    return "\n".join(lines)


def render_json(environment: dict, results: list[CheckResult]) -> str:
    """The report as JSON. Top level: "passed" is true when no check failed
    (the exit status is 0: skips do not fail the run), "counts" holds the
    number of checks of each status. Each check: see CheckResult.to_json."""
    return json.dumps(
        {
            "environment": environment,
            "passed": not any(r.failed for r in results),
            "counts": counts(results),
            "checks": [r.to_json() for r in results],
        },
        indent=2,
    )
