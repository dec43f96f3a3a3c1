"""The torch and Triton releases devbridge is checked on, and the one rule for
every other release.

devbridge reads private names of torch (_torch_dlpack_api.py,
inductor/_torch_api.py) and of Triton (_triton_api.py, and the layout choices
of triton/_describe.py). Each of those modules lists every name it touches with
the releases it was checked on; this module holds the ranges themselves, so
that adding the next release is one edit here after checking those lists
(docs/design.md, "Adding a torch or Triton release").

An unchecked release is refused with one message (unchecked_message) naming
the checked ones and the opt-in: DEVBRIDGE_ALLOW_UNCHECKED_VERSIONS=1 lets it
run with one warning per process and package, for trying a new release before
devbridge has caught up.
"""

from __future__ import annotations

import os
import warnings

#: torch releases (major.minor) whose private names every adapter was checked
#: on: 2.11.0 (the GPU suite), 2.13.0 and 2.14.1 (CI).
TORCH_CHECKED = ("2.11", "2.13", "2.14")
#: Accepted without a warning: the checked releases and 2.12, which lies
#: between two checked ones and whose names match both.
TORCH_ACCEPTED = ("2.11", "2.12", "2.13", "2.14")
#: Triton releases (major.minor) checked: 3.6.0 (torch 2.11's pair, GPU and
#: CI), 3.7.1 (torch 2.13's, CI) and 3.8.0 (torch 2.14's, CI).
TRITON_CHECKED = ("3.6", "3.7", "3.8")
#: The Triton each checked torch pins (its CUDA wheels' requirement).
TRITON_PAIRED_WITH_TORCH = {"2.11": "3.6.0", "2.12": "3.7.0", "2.13": "3.7.1", "2.14": "3.8.0"}

ALLOW_UNCHECKED_ENV = "DEVBRIDGE_ALLOW_UNCHECKED_VERSIONS"

_warned: set[str] = set()


def major_minor(version: str) -> tuple[int, int]:
    """(3, 7) for "3.7.1", "3.7.0+git1234" or "3.7"; (2, 13) for "2.13.0+cpu"."""
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def torch_minor() -> str:
    """torch's "major.minor", e.g. "2.13"."""
    import torch

    return "%d.%d" % major_minor(torch.__version__)


def triton_major_minor() -> tuple[int, int]:
    import triton

    return major_minor(triton.__version__)


def _installed(package: str) -> str:
    if package == "torch":
        import torch

        return torch.__version__
    import triton

    return triton.__version__


def _accepted(package: str) -> tuple[str, ...]:
    return TORCH_ACCEPTED if package == "torch" else TRITON_CHECKED


def is_checked(package: str, version: str | None = None) -> bool:
    """Whether `version` of "torch" or "triton" (the imported one by default)
    is one devbridge accepts without the opt-in."""
    version = _installed(package) if version is None else version
    return "%d.%d" % major_minor(version) in _accepted(package)


def allow_unchecked() -> bool:
    return os.environ.get(ALLOW_UNCHECKED_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def checked_summary() -> str:
    """'torch 2.11, 2.13, 2.14 (2.12 accepted); Triton 3.6, 3.7, 3.8'."""
    between = [v for v in TORCH_ACCEPTED if v not in TORCH_CHECKED]
    accepted = f" ({', '.join(between)} accepted)" if between else ""
    return f"torch {', '.join(TORCH_CHECKED)}{accepted}; Triton {', '.join(TRITON_CHECKED)}"


def unchecked_message(package: str, component: str, version: str, also: str = "") -> str:
    """The one message for a release outside the checked ranges; `also` is
    a component's own way around it, appended."""
    name = "torch" if package == "torch" else "Triton"
    return (f"{component}: {name} {version} is not a release devbridge was checked on ({checked_summary()}). "
            f"It reads private {name} APIs that change between releases, so it refuses rather than risk wrong "
            f"results. Install a checked release (pip install torch==2.14.1 triton==3.8.0), or set "
            f"{ALLOW_UNCHECKED_ENV}=1 to try this one anyway (devbridge then warns once and may fail where an "
            f"API moved)" + (f"; {also}." if also else "."))


def require_checked(package: str, component: str, also: str = "") -> None:
    """Return if the imported `package` ("torch" or "triton") is accepted;
    with the opt-in set, warn once per package and return; else raise
    RuntimeError(unchecked_message(...))."""
    version = _installed(package)
    if is_checked(package, version):
        return
    if not allow_unchecked():
        raise RuntimeError(unchecked_message(package, component, version, also))
    if package not in _warned:
        _warned.add(package)
        name = "torch" if package == "torch" else "Triton"
        warnings.warn(f"devbridge: running on {name} {version}, which devbridge was not checked on "
                      f"({checked_summary()}), because {ALLOW_UNCHECKED_ENV} is set", RuntimeWarning, stacklevel=3)
