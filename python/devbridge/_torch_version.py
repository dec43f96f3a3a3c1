"""Load devbridge._C only with the torch it was built against.

devbridge links libtorch's C++ API, whose ABI changes between torch releases:
a mismatch either fails to load (undefined symbols) or, worse, loads and
misbehaves. Both cases end in one ImportError that says how to fix it.
"""

from __future__ import annotations

import importlib.machinery
import pathlib
import re

_MARKER = re.compile(rb"DEVBRIDGE_BUILT_WITH_TORCH=([^;\x00]+);")


def mismatch_message(built_with: str, imported: str) -> str:
    return (f"devbridge was built against torch {built_with} but torch {imported} is imported; "
            "rebuild devbridge: pip install --no-build-isolation --force-reinstall "
            "<path to the devbridge source>")


def built_with_from_binary(package_dir: pathlib.Path) -> str | None:
    """The torch version recorded in the extension's bytes, without loading it."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = package_dir / f"_C{suffix}"
        if path.is_file():
            match = _MARKER.search(path.read_bytes())
            if match:
                return match.group(1).decode()
    return None


def load_extension():
    """Import and return devbridge._C, or raise ImportError naming the fix."""
    import torch

    try:
        from . import _C
    except ImportError as exc:
        built_with = built_with_from_binary(pathlib.Path(__file__).parent)
        if built_with is not None and built_with != torch.__version__:
            raise ImportError(mismatch_message(built_with, torch.__version__)) from exc
        raise
    if _C.built_with_torch != torch.__version__:
        raise ImportError(mismatch_message(_C.built_with_torch, torch.__version__))
    return _C
