"""Version numbers of torch and Triton as devbridge compares them: the
(major, minor) pair, the one the version checks of the private-API modules
(_torch_dlpack_api.py, _triton_api.py, inductor/_torch_api.py) and the
layout choices between Triton releases depend on."""

from __future__ import annotations


def major_minor(version: str) -> tuple[int, int]:
    """(3, 7) for "3.7.1", "3.7.0+git1234" or "3.7"; (2, 13) for "2.13.0+cpu"."""
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def torch_minor() -> str:
    """torch's "major.minor", e.g. "2.13"."""
    import torch

    return "%d.%d" % major_minor(torch.__version__)


def triton_major_minor() -> tuple[int, int]:
    import triton

    return major_minor(triton.__version__)
