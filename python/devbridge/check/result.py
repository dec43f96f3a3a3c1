"""What one conformance check reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

PASS, FAIL, SKIP = "pass", "fail", "skip"
STATUSES = (PASS, FAIL, SKIP)


def one_line(text: str) -> str:
    """``text`` with its line breaks and runs of blanks made single spaces."""
    return " ".join(text.split())


@dataclass
class CheckResult:
    """Outcome of one capability check.

    ``status`` is "pass", "fail" or "skip" (the check could not apply here:
    nothing it needs is available, or a check it depends on failed or was
    skipped, then ``blocked_by`` names that check). ``detail`` is one line;
    ``notes`` are further lines under it (what was measured, an error's later
    lines). ``fix`` is one line written for the plugin author: what to change
    in the plugin so the check passes; it is empty unless the check failed.
    """

    name: str
    capability: str
    status: str = PASS
    detail: str = ""
    fix: str = ""
    notes: list[str] = field(default_factory=list)
    costs_ns: dict[str, float] = field(default_factory=dict)
    depends_on: tuple[str, ...] = ()
    blocked_by: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"check status {self.status!r} is not one of {STATUSES}")
        self.detail, self.notes = split_detail(self.detail, self.notes)
        self.fix = one_line(self.fix)

    @property
    def passed(self) -> bool:
        """True only for "pass": a skipped check did not pass."""
        return self.status == PASS

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    @property
    def skipped(self) -> bool:
        return self.status == SKIP

    def skip(self, why: str, notes: Iterable[str] = (), *, blocked_by: str | None = None) -> None:
        """Mark the check skipped (it could not apply here), saying why in one
        line; ``notes`` are further lines (how to enable it)."""
        self.status = SKIP
        self.detail, self.notes = split_detail(why, notes)
        self.blocked_by = blocked_by

    def fail(self, detail: str, fix: str, notes: Iterable[str] = ()) -> None:
        self.status = FAIL
        self.detail, self.notes = split_detail(detail, notes)
        self.fix = one_line(fix)

    def to_json(self) -> dict:
        """The check's JSON object. "status" is the outcome; "passed" (true only
        for "pass") and "skipped" are derived from it, kept for readers of the
        earlier schema, where a skip also had "passed": true."""
        return {
            "name": self.name,
            "capability": self.capability,
            "status": self.status,
            "passed": self.passed,
            "skipped": self.skipped,
            "detail": self.detail,
            "notes": list(self.notes),
            "fix": self.fix,
            "costs_ns": dict(self.costs_ns),
            "depends_on": list(self.depends_on),
            "blocked_by": self.blocked_by,
        }


def split_detail(detail: str, notes: Iterable[str] = ()) -> tuple[str, list[str]]:
    """A detail's first line stays the detail; its later lines (an error's
    message running over several lines) go first among the notes."""
    lines = [line.rstrip() for line in detail.strip().splitlines()]
    head = lines[0] if lines else ""
    rest = [line for line in lines[1:] if line.strip()]
    return head, rest + [line.rstrip() for line in notes if line.strip()]


class CheckFailed(Exception):
    """Raised inside a check body: the check fails with this detail (one
    line), these notes (further lines) and this fix (one line)."""

    def __init__(self, detail: str, fix: str, notes: Iterable[str] = ()):
        super().__init__(detail)
        self.detail = detail
        self.fix = fix
        self.notes = list(notes)
