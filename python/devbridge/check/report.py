"""Render check results as a table for people or JSON for machines."""

from __future__ import annotations

import json
import textwrap

from .result import CheckResult


def _format_cost(costs: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:,.0f} ns" for name, value in costs.items())


def render_text(header: str, results: list[CheckResult]) -> str:
    width = max(len(r.capability) for r in results) if results else 10
    lines = [header, ""]
    lines.append(f"  {'status':6}  {'capability':{width}}  measured cost / detail")
    lines.append(f"  {'-' * 6}  {'-' * width}  {'-' * 40}")
    for r in results:
        detail = "; ".join(part for part in (_format_cost(r.costs_ns), r.detail) if part)
        lines.append(f"  {r.status:6}  {r.capability:{width}}  {detail}")
        if not r.passed and r.fix:
            for fix_line in textwrap.wrap("fix: " + r.fix, width=100):
                lines.append(f"  {'':6}  {'':{width}}  {fix_line}")
    failed = [r for r in results if not r.passed]
    passed = sum(1 for r in results if r.passed and not r.skipped)
    skipped = sum(1 for r in results if r.skipped)
    lines.append("")
    summary = f"{passed} passed, {len(failed)} failed, {skipped} skipped"
    lines.append(summary if not failed else summary + "  -- see 'fix:' lines above")
    return "\n".join(lines)


def render_json(environment: dict, results: list[CheckResult]) -> str:
    return json.dumps(
        {
            "environment": environment,
            "passed": all(r.passed for r in results),
            "checks": [r.to_json() for r in results],
        },
        indent=2,
    )
