"""Find the PrivateUse1 backend that this process has loaded."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import torch

from .result import CheckFailed

# The reference plugin that `devbridge check` runs on when nothing else
# claims PrivateUse1: its distribution is built from plugins/simdev.
DEFAULT_PLUGIN_MODULE = "torch_simdev"
_UNNAMED = "privateuseone"


@dataclass
class Backend:
    name: str  # the renamed PrivateUse1 key, e.g. "simdev"
    module: object  # torch.<name>, registered with torch._register_device_module
    loaded_from: str  # how it got into the process


def backend_name() -> str | None:
    """The PrivateUse1 backend's name, or None while PrivateUse1 is unclaimed."""
    name = torch._C._get_privateuse1_backend_name()
    return None if name == _UNNAMED else name


def load_backend(plugin: str | None) -> Backend:
    """Import ``plugin`` (if given), else rely on autoload, else import simdev."""
    loaded_from = "torch.backends autoload"
    if plugin:
        try:
            importlib.import_module(plugin)
        except ImportError as exc:
            raise CheckFailed(
                f"cannot import plugin module {plugin!r}: {exc}",
                f"install the plugin's package so that 'import {plugin}' works, "
                "or pass the module that registers the backend with --plugin",
            ) from exc
        loaded_from = f"import {plugin}"
    elif backend_name() is None:
        try:
            importlib.import_module(DEFAULT_PLUGIN_MODULE)
        except ImportError as exc:
            raise CheckFailed(
                "no PrivateUse1 backend is loaded and the default simdev plugin "
                f"is not installed ({exc})",
                "install your plugin with a 'torch.backends' entry point so torch "
                "autoloads it, pass --plugin MODULE, or install the reference plugin: "
                "pip install --no-build-isolation plugins/simdev",
            ) from exc
        loaded_from = f"import {DEFAULT_PLUGIN_MODULE} (default reference plugin)"

    name = backend_name()
    if name is None:
        raise CheckFailed(
            "PrivateUse1 is still unnamed after loading the plugin",
            "call torch.utils.rename_privateuse1_backend('<name>') when the plugin "
            "is imported (torch_openreg's __init__.py shows the sequence)",
        )
    try:
        module = torch.get_device_module(name)
    except Exception as exc:  # torch raises RuntimeError for unknown modules
        raise CheckFailed(
            f"torch.{name} is not registered: {exc}",
            f"call torch._register_device_module('{name}', <module>) when the plugin "
            "is imported; torch.accelerator.device_count() and Inductor need it",
        ) from exc
    return Backend(name=name, module=module, loaded_from=loaded_from)
