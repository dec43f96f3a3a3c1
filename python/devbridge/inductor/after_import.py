"""Run a function right after a module is imported, without importing it.

devbridge arms or patches torch modules that a process may never import
(torch._dynamo until the first torch.compile; Inductor's overlap scheduling
until that pass runs): importing them up front would cost every process their
import time. A meta-path finder waits for the module's import and runs the
callbacks right after the module's own code, before anything else uses it.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from typing import Callable

_lock = threading.Lock()
_waiting: dict[str, list[Callable]] = {}  # module name -> callbacks for its import


def call_after_import(fullname: str, callback: Callable) -> None:
    """`callback(module)` now if `fullname` is imported, else once, right after its import."""
    with _lock:
        module = sys.modules.get(fullname)
        if module is None:
            callbacks = _waiting.setdefault(fullname, [])
            callbacks.append(callback)
            if len(callbacks) == 1:
                sys.meta_path.insert(0, _Finder(fullname))
    if module is None:
        module = sys.modules.get(fullname)  # imported meanwhile, by another thread, past the finder
        if module is None:
            return
        with _lock:
            callbacks = _waiting.pop(fullname, [])
        for waiting in callbacks:
            waiting(module)
        return
    callback(module)


class _Finder:
    """Finds nothing itself: hands the import to the other finders and wraps
    the loader's exec_module so that the callbacks run after the module's code."""

    def __init__(self, fullname: str):
        self.fullname = fullname

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.fullname:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_call(module):
            exec_module(module)
            with _lock:
                callbacks = _waiting.pop(fullname, [])
            for callback in callbacks:
                callback(module)

        spec.loader.exec_module = exec_then_call
        return spec
