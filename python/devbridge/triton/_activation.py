"""The stack of devbridge.triton.activate(): which Triton driver was active
before each call, so that each deactivate() restores the one before it.

It sits below both the package, whose activate() / deactivate() push and pop,
and the driver, whose __exit__ (`with devbridge.triton.activate():`) pops:
neither imports the other for it.
"""

from __future__ import annotations

import threading

from .. import _triton_api

_lock = threading.Lock()
_previous = []  # drivers that were active before each push()


def push(ours) -> None:
    """Make `ours` Triton's active driver, remembering the one before it."""
    with _lock:
        current = _triton_api.active_driver_or_none()
        _previous.append(current)
        if current is not ours:
            ours.bind_policy()  # the environment may name another policy by now
            _triton_api.driver_config().set_active(ours)


def pop(ours) -> None:
    """Undo the last push(): restore the driver that was active before it
    (Triton's own default when there was none). Nothing while `ours` (None:
    never created) is not Triton's active driver."""
    with _lock:
        if ours is not None and _triton_api.active_driver_or_none() is ours:
            _triton_api.restore_active_driver(_previous.pop() if _previous else None)
