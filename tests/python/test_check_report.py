"""`devbridge check`'s report and registry, in process: the JSON status of
each check, one-line fixes, checks skipped because of a dependency, and the
delay-knob hint. (The command itself, run as a subprocess: test_check_cli.py.)"""

from __future__ import annotations

import json
import types

import pytest

from devbridge.check import registry
from devbridge.check.plugin import Backend
from devbridge.check.registry import CHECKS, _Check, run_all, run_one
from devbridge.check.report import render_json, render_text
from devbridge.check.result import CheckFailed
from test_check_cli import needs_simdev

FAKE = Backend(name="fakedev", module=types.SimpleNamespace(), loaded_from="test")
LONG_FIX = ("override getStreamNativeHandle(Stream) in the plugin's guard to return the backend's stream pointer; "
            "plugins that cannot do that register a resolver with devbridge.register_stream_resolver() instead, "
            "as section 3 of docs/plugin-authors.md shows")


def passes(backend, result):
    result.detail = "fine"
    result.costs_ns["call"] = 12.0


def fails(backend, result):
    raise CheckFailed("the device guard has no native stream\nsecond line of the error", LONG_FIX,
                      notes=["measured here: one thing", "measured here: another"])


def fails_the_same_way(backend, result):
    raise CheckFailed("no native stream for the launch", LONG_FIX)


def skips(backend, result):
    result.skip("needs two devices")


def crashes(backend, result):
    raise RuntimeError("boom\nmore of boom")


def never(backend, result):  # a dependent of a failed or skipped check is not run
    raise AssertionError("ran although a dependency did not pass")


def run(*entries: _Check):
    results = run_all(FAKE, entries)
    return results, json.loads(render_json({"backend": "fakedev"}, results))


def by_name(report: dict) -> dict:
    return {c["name"]: c for c in report["checks"]}


def test_json_status_is_pass_fail_or_skip_and_a_skip_never_passed():
    results, report = run(_Check("a", "passes", passes), _Check("b", "fails", fails),
                          _Check("c", "skips", skips))
    checks = by_name(report)
    assert [(c["status"], c["passed"], c["skipped"]) for c in checks.values()] == [
        ("pass", True, False), ("fail", False, False), ("skip", False, True)]
    assert report["passed"] is False and report["counts"] == {"pass": 1, "fail": 1, "skip": 1}
    assert checks["b"]["fix"] == LONG_FIX and checks["a"]["fix"] == checks["c"]["fix"] == ""


def test_skips_alone_do_not_fail_the_run_but_are_not_passed():
    _, report = run(_Check("a", "passes", passes), _Check("c", "skips", skips))
    assert report["passed"] is True  # the exit status stays 0 for skips
    assert by_name(report)["c"]["passed"] is False
    assert report["counts"] == {"pass": 1, "fail": 0, "skip": 1}


def test_a_dependent_of_a_failed_or_skipped_check_is_skipped_naming_it():
    results, report = run(
        _Check("a", "passes", passes), _Check("b", "fails", fails), _Check("c", "skips", skips),
        _Check("d", "needs b", never, ("a", "b")), _Check("e", "needs c", never, ("c",)),
        _Check("f", "needs c and b", never, ("c", "b")), _Check("g", "needs d", never, ("d",)),
        _Check("h", "needs a", passes, ("a",)))
    checks = by_name(report)
    assert checks["d"]["status"] == "skip" and checks["d"]["blocked_by"] == "b"
    assert checks["d"]["detail"] == 'skipped: depends on b ("fails"), which failed'
    assert checks["e"]["detail"] == 'skipped: depends on c ("skips"), which was skipped'
    assert checks["f"]["blocked_by"] == "b"  # a failure outranks a skip: it is the cause to fix
    assert checks["g"]["blocked_by"] == "d"
    assert checks["d"]["depends_on"] == ["a", "b"] and checks["d"]["fix"] == ""
    assert checks["h"]["status"] == "pass"
    assert report["counts"] == {"pass": 2, "fail": 1, "skip": 5}
    # Only the root cause carries a fix.
    text = render_text("header", results)
    assert text.count("fix: ") == 1, text
    assert 'skipped: depends on b ("fails"), which failed' in text


def test_fix_lines_are_one_line_and_details_keep_their_later_lines_as_notes():
    results, report = run(_Check("b", "fails", fails), _Check("b2", "fails the same way", fails_the_same_way),
                          _Check("x", "crashes", crashes))
    checks = by_name(report)
    assert checks["b"]["detail"] == "the device guard has no native stream"
    assert checks["b"]["notes"] == ["second line of the error", "measured here: one thing", "measured here: another"]
    text = render_text("header", results)
    lines = text.splitlines()
    fix_lines = [line for line in lines if line.lstrip().startswith("fix: ")]
    assert len(fix_lines) == 3, text
    assert fix_lines[0].strip() == "fix: " + LONG_FIX  # whole, on one line
    assert fix_lines[1].strip() == 'fix: the same as for "fails" above'  # one cause, one fix printed
    # Every line of the fix text is on the fix line: nothing wraps onto another.
    assert sum("register_stream_resolver" in line for line in lines) == 1, text
    notes = [line.strip() for line in lines if line.startswith(" " * 10) and not line.startswith(" " * 11)]
    assert notes[:3] == checks["b"]["notes"], text
    # An unexpected error: a one-line detail and fix, its traceback as notes.
    crash = checks["x"]
    assert crash["detail"] == "RuntimeError: boom" and crash["notes"][0] == "more of boom"
    assert any(note.startswith("Traceback") for note in crash["notes"]), crash["notes"]
    assert "\n" not in crash["fix"] and "\n" not in crash["detail"]
    assert fix_lines[2].strip() == "fix: " + crash["fix"]


def test_the_registry_refuses_a_dependency_not_registered_before():
    count = len(CHECKS)
    with pytest.raises(ValueError, match="depends on 'no.such.check'"):
        registry.check("test.dependent", "a dependent", depends_on=("no.such.check",))
    with pytest.raises(ValueError, match="registered twice"):
        registry.check("backend", "the backend again")
    assert len(CHECKS) == count


def test_the_triton_checks_depend_on_the_native_stream_devbridge_resolves():
    dependencies = {entry.name: entry.depends_on for entry in CHECKS}
    assert "dlpack.stream" in dependencies["triton.kernel"]
    assert {"dlpack.stream", "triton.kernel"} <= set(dependencies["torch.compile"])
    # A resolver serves devbridge without torch's own handle: nothing waits on that check.
    assert not any("stream.native_handle" in needs for needs in dependencies.values())
    seen = set()
    for entry in CHECKS:
        assert set(entry.depends_on) <= seen, entry
        seen.add(entry.name)


@pytest.fixture(scope="module")
def simdev_without_delay_knob() -> Backend:
    """simdev, through a device module that has no set_op_delay_us (and the
    _lazy_init that device.synchronize looks for)."""
    from devbridge.check.plugin import load_backend

    backend = load_backend(None)
    assert backend.name == "simdev"
    return Backend(name=backend.name, module=types.SimpleNamespace(_lazy_init=lambda: None), loaded_from="test")


def entry(name: str) -> _Check:
    return next(e for e in CHECKS if e.name == name)


HOOK = "torch.simdev.set_op_delay_us(microseconds) is not defined"


@needs_simdev
def test_without_a_delay_knob_the_ordering_check_names_the_hook(simdev_without_delay_knob):
    result = run_one(entry("stream.ordering"), simdev_without_delay_knob)
    assert result.status == "pass", result
    assert result.detail.startswith("ordered; no delay knob, so asynchrony itself was not observed: ")
    assert HOOK in result.detail and "docs/plugin-authors.md" in result.detail, result.detail


@needs_simdev
def test_without_a_delay_knob_the_synchronize_check_names_the_hook(simdev_without_delay_knob):
    result = run_one(entry("device.synchronize"), simdev_without_delay_knob)
    assert result.status == "pass", result
    assert HOOK in result.detail, result.detail


@needs_simdev
def test_the_distributed_check_finds_simdevs_backend_and_fsdp2_names():
    from devbridge.check.plugin import load_backend

    result = run_one(entry("distributed"), load_backend(None))
    assert result.status == "pass", result
    assert result.detail == "'sdgloo' for simdev tensors; torch.simdev has FSDP2's device names"


@needs_simdev
def test_the_distributed_check_names_the_device_module_names_fsdp2_lacks(simdev_without_delay_knob):
    result = run_one(entry("distributed"), simdev_without_delay_knob)
    assert result.status == "fail", result
    assert result.detail.startswith("'sdgloo' serves 'simdev', but torch.simdev lacks Stream, Event, stream, "
                                    "current_stream, current_device, set_device, device_count, is_available"), result
    assert "docs/distributed.md" in result.fix


def test_the_distributed_check_skips_a_device_without_a_collective_backend():
    result = run_one(entry("distributed"), FAKE)
    assert result.status == "skip", result
    assert result.detail.startswith("optional: no collective backend is registered for 'fakedev'"), result.detail
