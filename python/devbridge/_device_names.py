"""Device names given to devbridge's API, checked against the loaded
PrivateUse1 backend (torch._C._get_privateuse1_backend_name()).

A name torch does not know is most likely a misspelling of the plugin's name
('simdve' for 'simdev'), or the name of a plugin that is not the one loaded:
devbridge refuses it naming the loaded backend, instead of torch's list of
its built-in device types. Names of torch's own device types ('cpu', 'cuda',
'privateuseone', an alias of the loaded backend) pass where an API takes them.

This module imports nothing: torch is only looked up, since the Triton
layer's hardware registry consults it while `import triton` (or `import
torch`, through a plugin's autoload) may still be running.
"""

from __future__ import annotations

import sys

UNCLAIMED = "privateuseone"  # PrivateUse1's name until a plugin renames it


class DeviceNameError(ValueError, RuntimeError):
    """A device name that is not the loaded backend's: a bad argument, and a
    RuntimeError as torch.device's own error for an unknown type is."""


def loaded_backend() -> str:
    """The PrivateUse1 backend's name, UNCLAIMED while no plugin renamed it."""
    torch = sys.modules.get("torch")
    get = getattr(getattr(torch, "_C", None), "_get_privateuse1_backend_name", None)
    return get() if get is not None else UNCLAIMED


def _is_torch_type(name: str) -> bool:
    try:
        sys.modules["torch"].device(name)
    except (KeyError, RuntimeError, ValueError):
        return False
    return True


def refusal(name: str, *, only: str | None = None) -> DeviceNameError:
    """The error for `name` (a device type name), which is not the loaded
    backend; `only`: the API that serves the plugin's device only."""
    if loaded_backend() == UNCLAIMED:
        return DeviceNameError(f"devbridge: '{name}' is no device type of this process: no plugin has claimed "
                               f"PrivateUse1 yet (its name is still '{UNCLAIMED}'); import the plugin first, then "
                               f"pass its device type name")
    return DeviceNameError(f"devbridge: {not_loaded(name, only)}")


def not_loaded(name: str, only: str | None = None) -> str:
    """Why `name` is refused, once a plugin has claimed PrivateUse1."""
    loaded = loaded_backend()
    if not _is_torch_type(name):
        return f"'{name}' is not the loaded PrivateUse1 backend '{loaded}' (a typo?); pass '{loaded}'"
    serves = f"{only} serves the plugin's device only: " if only else ""
    return f"'{name}' is not the loaded PrivateUse1 backend '{loaded}'; {serves}pass '{loaded}'"


def device_type(device) -> str:
    """The device type name of `device` (a name, "name:index" or a torch.device),
    refusing a name torch does not know with devbridge's message."""
    torch = sys.modules["torch"]
    if isinstance(device, torch.device):
        return device.type
    if not isinstance(device, str):
        raise TypeError(f"devbridge: expected a device type name or torch.device, got {device!r}")
    return checked_device(device).type


def checked_device(device: str):
    """torch.device(device), refusing a device type torch does not know with devbridge's message."""
    torch = sys.modules["torch"]
    try:
        return torch.device(device)
    except RuntimeError:
        name = device.partition(":")[0]
        if _is_torch_type(name):
            raise  # a known type with a bad index: torch's own message says what is wrong
        raise refusal(name) from None


def check_plugin_name(name: str) -> None:
    """A plugin device type name (declare_hardware): once a plugin has claimed
    PrivateUse1, only its name passes. Before that the name cannot be checked
    (a plugin may declare before it renames PrivateUse1): the look-up of the
    declaration checks it (unclaimed_names)."""
    loaded = loaded_backend()
    if loaded != UNCLAIMED and name != loaded:
        raise refusal(name, only="declare_hardware")


def unclaimed_names(names) -> list[str]:
    """Those of `names` (declared before the rename) that are not the loaded backend."""
    loaded = loaded_backend()
    return [name for name in names if name != loaded] if loaded != UNCLAIMED else []
