"""What one conformance check reports."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class CheckResult:
    """Outcome of one capability check.

    ``fix`` is written for the plugin author: what to change in the plugin so
    the check passes. It is empty when the check passed.
    """

    name: str
    capability: str
    passed: bool
    detail: str = ""
    fix: str = ""
    costs_ns: dict[str, float] = field(default_factory=dict)
    skipped: bool = False

    def skip(self, why: str) -> None:
        """Mark the check skipped (it could not apply here), saying why."""
        self.skipped = True
        self.detail = why

    @property
    def status(self) -> str:
        if self.skipped:
            return "skip"
        return "pass" if self.passed else "FAIL"

    def to_json(self) -> dict:
        out = asdict(self)
        out["status"] = self.status
        return out


class CheckFailed(Exception):
    """Raised inside a check body: the check fails with this detail and fix."""

    def __init__(self, detail: str, fix: str):
        super().__init__(detail)
        self.detail = detail
        self.fix = fix
