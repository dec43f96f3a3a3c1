"""The version policy (python/devbridge/_versions.py): the checked releases,
the one refusal every private-API adapter gives for another release, the
documented opt-in, and the README's support matrix kept true against the
policy and against what ./dev and the GPU suite actually run."""

from __future__ import annotations

import pathlib
import re
import warnings

import pytest
import torch

from devbridge import _versions
from devbridge.check import _versions as check_versions, _versions_line

ROOT = pathlib.Path(__file__).resolve().parents[2]
OPT_IN = "DEVBRIDGE_ALLOW_UNCHECKED_VERSIONS"


def _torch_adapters():
    from devbridge import _torch_dlpack_api
    from devbridge.inductor import _torch_api

    return {"devbridge.inductor": _torch_api.check_version,
            "devbridge's Python DLPack protocol": _torch_dlpack_api.check_version}


@pytest.fixture
def no_opt_in(monkeypatch):
    monkeypatch.delenv(OPT_IN, raising=False)
    monkeypatch.setattr(_versions, "_warned", set())


@pytest.mark.parametrize("version", ["2.15.0", "2.10.0+cpu", "3.0.0"])
def test_every_torch_adapter_refuses_an_unchecked_torch_with_the_one_message(monkeypatch, no_opt_in, version):
    monkeypatch.setattr(torch, "__version__", version)
    for component, check in _torch_adapters().items():
        with pytest.raises(RuntimeError) as refused:
            check()
        message = str(refused.value)
        assert message.startswith(_versions.unchecked_message("torch", component, version).rstrip("."))
        assert "torch 2.11, 2.13, 2.14" in message and "Triton 3.6, 3.7, 3.8" in message
        assert f"{OPT_IN}=1" in message


def test_the_opt_in_runs_an_unchecked_torch_with_one_warning(monkeypatch, no_opt_in):
    monkeypatch.setattr(torch, "__version__", "2.15.0")
    monkeypatch.setenv(OPT_IN, "1")
    with pytest.warns(RuntimeWarning, match=rf"torch 2.15.0, which devbridge was not checked on.*{OPT_IN}"):
        for check in _torch_adapters().values():
            check()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process and package
        for check in _torch_adapters().values():
            check()


@pytest.mark.parametrize("value", ["0", "", "no"])
def test_the_opt_in_takes_only_a_yes(monkeypatch, no_opt_in, value):
    monkeypatch.setattr(torch, "__version__", "2.15.0")
    monkeypatch.setenv(OPT_IN, value)
    with pytest.raises(RuntimeError, match="not a release devbridge was checked on"):
        _torch_adapters()["devbridge.inductor"]()


def test_every_triton_adapter_refuses_an_unchecked_triton(monkeypatch, no_opt_in):
    triton = pytest.importorskip("triton")
    from devbridge import _triton_api

    monkeypatch.setattr(triton, "__version__", "3.9.0")
    with pytest.raises(RuntimeError, match=r"Triton driver: Triton 3.9.0 is not a release devbridge was checked on"):
        _triton_api.check_version()
    monkeypatch.setenv(OPT_IN, "1")
    with pytest.warns(RuntimeWarning, match="Triton 3.9.0"):
        _triton_api.check_version()


def test_the_interpreter_target_honours_the_same_opt_in(monkeypatch, no_opt_in):
    triton = pytest.importorskip("triton")
    target = pytest.importorskip("devbridge.triton.interpreter._triton_api")

    monkeypatch.setattr(triton, "__version__", "3.9.0")
    monkeypatch.setattr(target, "_checked", None)
    with pytest.raises(RuntimeError, match=rf"devbridge: Triton 3.9.0 is not a release .*3.6, 3.7, 3.8.*{OPT_IN}=1"):
        target.interpreter()
    monkeypatch.setenv(OPT_IN, "1")
    with pytest.warns(RuntimeWarning, match="Triton 3.9.0"):
        assert target.interpreter() is not None


@pytest.mark.parametrize("version,checked", [("2.14.1+cu130", True), ("2.12.0", True), ("2.11.0", True),
                                             ("2.10.0", False), ("2.15.0", False), ("2.14.0a0+git12ab", True)])
def test_which_torch_releases_are_checked(version, checked):
    assert _versions.is_checked("torch", version) is checked


def test_check_reports_the_checked_and_running_releases(monkeypatch, no_opt_in):
    report = check_versions()
    assert report["torch"] == {"version": torch.__version__, "checked": True}
    assert report["checked"]["triton"] == ["3.6", "3.7", "3.8"]
    line = _versions_line(report)
    assert line.startswith(f"versions: torch {torch.__version__} checked, ")
    assert line.endswith("devbridge is checked on torch 2.11, 2.13, 2.14 (2.12 accepted); Triton 3.6, 3.7, 3.8")
    monkeypatch.setattr(torch, "__version__", "2.15.0")
    assert f"torch 2.15.0 NOT checked (refused without {OPT_IN}=1)" in _versions_line(check_versions())
    monkeypatch.setenv(OPT_IN, "1")
    assert f"torch 2.15.0 NOT checked (allowed by {OPT_IN}=1)" in _versions_line(check_versions())


# ---------------------------------------------------------------- the README's support matrix


def _matrix_rows() -> list[dict]:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- support-matrix:", 1)[1].split("\n\n", 1)[0]
    rows = []
    for line in block.splitlines()[3:]:  # the marker, the header, the rule
        torch_version, triton_version, ci, gpu = (cell.strip() for cell in line.strip("|").split("|"))
        rows.append({"torch": torch_version, "triton": triton_version, "ci": ci != "—", "gpu": gpu != "—"})
    return rows


def test_the_support_matrix_names_exactly_the_checked_releases():
    rows = _matrix_rows()
    assert all(row["ci"] or row["gpu"] for row in rows), "every row says where it is tested"
    assert sorted({"%d.%d" % _versions.major_minor(r["torch"]) for r in rows}) == sorted(_versions.TORCH_CHECKED)
    assert sorted({"%d.%d" % _versions.major_minor(r["triton"]) for r in rows}) == sorted(_versions.TRITON_CHECKED)
    for row in rows:  # a checked torch with its own pair is a row
        paired = _versions.TRITON_PAIRED_WITH_TORCH["%d.%d" % _versions.major_minor(row["torch"])]
        assert any(r["torch"] == row["torch"] and r["triton"] == paired for r in rows), row


def test_the_support_matrix_rows_are_what_ci_and_the_gpu_suite_run():
    dev = (ROOT / "dev").read_text()
    gpu_doc = (ROOT / "docs" / "gpu.md").read_text()
    for row in _matrix_rows():
        if row["ci"]:
            # ./dev installs each CI row's pins (the main environment's Triton
            # is the pair _versions.py names for its torch).
            pins = set(re.findall(r"torch==([0-9.]+)", dev)) | set(re.findall(r"NEXT_TORCH=([0-9.]+)", dev))
            assert row["torch"] in pins, row
            paired = _versions.TRITON_PAIRED_WITH_TORCH["%d.%d" % _versions.major_minor(row["torch"])]
            pins = set(re.findall(r"triton==([0-9.]+)", dev)) | set(re.findall(r"NEXT_TRITON=([0-9.]+)", dev))
            assert row["triton"] in pins or row["triton"] == paired, row
        if row["gpu"]:
            pattern = rf"torch {re.escape(row['torch'])}\+cu\d+.*triton {re.escape(row['triton'])}"
            assert re.search(pattern, gpu_doc, re.IGNORECASE), row
