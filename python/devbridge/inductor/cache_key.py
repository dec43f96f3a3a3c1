"""devbridge's part of Inductor's cache keys.

Inductor caches whole compiled graphs (the FX-graph and AOTAutograd caches,
on disk, across processes) under a key made of the graph, torch's sources and
configuration and, per device, the configuration module that the device's
backend passed to register_backend_for_device
(torch/_inductor/codecache.py, FxGraphHashDetails.custom_backend_codegen_configs).
devbridge's code is not in that key by itself, yet a cached wrapper is code
devbridge generated: it imports devbridge's names and calls its launcher.
Without this, an upgraded devbridge (or a plugin that declared other Triton
hardware) would be served a wrapper written by the old one, which may import
a name that no longer exists.

cache_key_config.py is that configuration module, with one entry, `codegen`:
devbridge's version, a digest of its Python sources and of its extension
module's file, and the compiler the device declared. Inductor hashes it into
every key of the device; nothing else reads it.
"""

from __future__ import annotations

import hashlib
import pathlib


def fingerprint(declared_compiler: str) -> str:
    """What decides the code devbridge generates for the device: its version,
    its sources and extension, the declared compiler."""
    from .. import _C, __version__

    package = pathlib.Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for source in sorted(package.rglob("*.py")):
        digest.update(str(source.relative_to(package)).encode())
        digest.update(source.read_bytes())
    extension = pathlib.Path(_C.__file__).stat()  # size and time: a rebuilt extension is another one
    digest.update(f"{extension.st_size}:{extension.st_mtime_ns}".encode())
    return f"devbridge {__version__} {digest.hexdigest()[:16]} compiler={declared_compiler}"


def device_config(declared_compiler: str):
    """The configuration module for register_backend_for_device, its entry
    set for this process."""
    from . import cache_key_config

    cache_key_config.codegen = fingerprint(declared_compiler)
    return cache_key_config
