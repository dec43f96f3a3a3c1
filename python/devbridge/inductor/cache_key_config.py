"""The configuration module devbridge registers with Inductor for its device
(register_backend_for_device's device_custom_config): one entry, set by
cache_key.device_config(), which Inductor hashes into the device's cache keys
(cache_key.py says why). torch turns this module into a ConfigModule, so it
holds nothing but the entry."""

import sys

from . import _torch_api

codegen: str = ""

_torch_api.make_config_module(sys.modules[__name__])
