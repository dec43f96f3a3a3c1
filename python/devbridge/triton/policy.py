"""The one registry of host-runtime policies devbridge's Triton driver runs on.

A *policy* is a named table of host-runtime methods — current device,
current stream, device interface, empty tensor, workspace, ... — the shape of
FlagTree's BackendStrategyRegistry, without its whitelist: any registered
category can be selected by name.

    @policy.register("my_plugin", "get_current_stream")
    def current_stream(device=None): ...

    policy.register("my_plugin", "get_current_device", my_fn)    # call form
    policy.select("my_plugin")                                   # or DEVBRIDGE_TRITON_POLICY=my_plugin
    policy.execute(policy.active(), "get_current_stream", 0)

devbridge's generic policy for any PrivateUse1 plugin, "torch_plugin", is a
module that declares its table (torch_plugin.METHODS); the registry
registers it the first time it is asked anything.

The active policy is, in order: the last select(), the environment variable
DEVBRIDGE_TRITON_POLICY, TRITON_BACKEND (what Ascend-backend users already
set), else "torch_plugin". Nothing is frozen at the first call: active()
reads the environment every time. devbridge's driver binds the active
policy's device and stream functions for Triton's hot path
(backend/driver.py bind_policy): when it is created, at every activate(),
and at every select() and register() here. An unknown name is an error
listing the registered ones.

Layers: this module imports the torch_plugin table below it and, to find the
driver, Triton's backend table (_triton_api); nothing above it.
"""

from __future__ import annotations

import os
import threading
from typing import Callable

DEFAULT = "torch_plugin"
ENVIRONMENT = ("DEVBRIDGE_TRITON_POLICY", "TRITON_BACKEND")

_lock = threading.Lock()
_registry: dict[str, dict[str, Callable]] = {}
_selected: str | None = None
_builtin_registered = False


def _bind_driver() -> None:
    # The driver's hot path calls the policy's functions it bound (no lookup
    # per launch), so a change of the active policy binds them again.
    from .._triton_api import devbridge_driver_or_none

    driver = devbridge_driver_or_none()
    if driver is not None:
        driver.bind_policy()


def register(category: str, method: str, fn: Callable | None = None):
    """Register `fn` as `method` of `category`; without `fn`, a decorator.
    A (category, method) pair can be registered once: a second is a ValueError."""
    if not isinstance(category, str) or not category or not isinstance(method, str) or not method:
        raise ValueError(f"devbridge: a policy method needs a category and a method name, got "
                         f"{category!r}, {method!r}")

    def add(function: Callable) -> Callable:
        if not callable(function):
            raise TypeError(f"devbridge: policy method {category}.{method} must be callable, got "
                            f"{type(function).__name__}")
        if category == DEFAULT:
            _ensure_builtin()  # a method of devbridge's own table is then already registered
        with _lock:
            methods = _registry.setdefault(category, {})
            if method in methods:
                raise ValueError(f"devbridge: policy method {category}.{method} is already registered "
                                 f"({methods[method]!r}); register it under another category")
            methods[method] = function
        _bind_driver()
        return function

    return add if fn is None else add(fn)


def categories() -> list[str]:
    _ensure_builtin()
    with _lock:
        return sorted(_registry)


def methods(category: str) -> list[str]:
    _ensure_builtin()
    with _lock:
        if category not in _registry:
            raise ValueError(_unknown(category))
        return sorted(_registry[category])


def _unknown(category: str) -> str:
    return (f"devbridge: no Triton host-runtime policy is registered as {category!r}; registered: "
            f"{', '.join(sorted(_registry)) or 'none'}")


def select(name: str | None) -> None:
    """Make `name` the active policy (None: back to the environment / default)."""
    global _selected
    _ensure_builtin()
    if name is not None:
        with _lock:
            if name not in _registry:
                raise ValueError(_unknown(name))
    _selected = name
    _bind_driver()


def active() -> str:
    """The name of the active policy (see the module docstring for the order)."""
    _ensure_builtin()
    name = _selected
    if name is None:
        for variable in ENVIRONMENT:
            value = os.environ.get(variable, "").strip()
            if value:
                name = value
                source = f"the environment variable {variable}"
                break
        else:
            name = DEFAULT
            source = "the default"
    else:
        source = "devbridge.triton.policy.select()"
    with _lock:
        if name not in _registry:
            raise ValueError(_unknown(name) + f" (asked for by {source})")
    return name


def lookup(category: str, method: str) -> Callable:
    """The function registered as `method` of `category`."""
    _ensure_builtin()
    with _lock:
        methods_of = _registry.get(category)
        if methods_of is None:
            raise ValueError(_unknown(category))
        function = methods_of.get(method)
        if function is None:
            raise ValueError(f"devbridge: the Triton host-runtime policy {category!r} has no method {method!r}; "
                             f"it has: {', '.join(sorted(methods_of))}")
    return function


def execute(category: str, method: str, *args, **kwargs):
    """Call `method` of `category`."""
    return lookup(category, method)(*args, **kwargs)


def call(method: str, *args, **kwargs):
    """`execute(active(), method, ...)`: what the driver does for every question."""
    return execute(active(), method, *args, **kwargs)


def _ensure_builtin() -> None:
    # Registered at the first question, not at import: the table's module
    # imports torch and devbridge's extension, and `import devbridge.triton`
    # runs while a plugin's autoload hook may still be importing torch.
    global _builtin_registered
    if _builtin_registered:
        return
    from . import torch_plugin

    with _lock:
        if _builtin_registered:
            return
        _registry[DEFAULT] = dict(torch_plugin.METHODS)  # register() adds to it only after this
        _builtin_registered = True


__all__ = ["DEFAULT", "active", "call", "categories", "execute", "lookup", "methods", "register", "select"]
