"""Every torch name devbridge's Python DLPack protocol (_protocol.py) touches,
and nothing else, with the torch versions each was checked on: 2.11.0 (a
GPU machine), 2.13.0 and 2.14.1 (CI); 2.12 lies between two of them and is
accepted (the ranges: _versions.py). Another version is refused by check_version(), which install() calls before patching
anything, so an unknown torch fails with the fix instead of exporting wrongly.

  torch.Tensor.__dlpack__          Python methods of torch/_tensor.py with the
  torch.Tensor.__dlpack_device__   keyword-only signature (stream=-1,
                                   max_version=None, dl_device=None,
                                   copy=None) in 2.11, 2.13 and 2.14 (also checked by
                                   signature; 2.11's stream default is read
                                   from it). Replaced on the class by
                                   wrappers that call them, unchanged, for
                                   every tensor that is not on the plugin
                                   device: torch compares the device type with
                                   the literal "privateuse1", so a renamed
                                   backend's tensors raise "Unknown device
                                   type" there, and the stream is ignored.
  read_only= of Tensor.__dlpack__  2.14 only (torch/_tensor.py): plugin tensors
                                   take it where torch's method does
                                   (dlpack_takes_read_only), with torch's
                                   BufferError for an unversioned export.
  torch.utils.dlpack.ReadOnlyTensorWrapper._DLPACK_ALLOWED
                                   2.14 only: the methods its
                                   __torch_function__ lets through, extended
                                   with devbridge's (allow_in_read_only_wrapper).
  torch.utils.dlpack.from_dlpack   (= torch.from_dlpack) replaced only while an
                                   Ascend option is on (2.11, 2.13, 2.14): torch's
                                   importer does not know device type 21.
  torch.utils.dlpack.DLDeviceType  the enum __dlpack_device__ returns (public;
                                   it has no kAscend member).
  torch._C._get_privateuse1_backend_name   (private) the plugin's device type
                                   name, "privateuseone" until renamed.
  torch.overrides.has_torch_function_unary
                                   (public) a tensor with __torch_function__
                                   goes to torch's own method first, which
                                   dispatches it as before.
"""

from __future__ import annotations

import inspect

import torch

from ._versions import TORCH_ACCEPTED as CHECKED_VERSIONS  # noqa: F401  (the range, in _versions.py)
from ._versions import require_checked
# What devbridge implements for plugin tensors; torch's method must take at
# least these (later torches add more, e.g. read_only: plugin tensors refuse
# those with a TypeError, every other tensor gets torch's own handling).
_DLPACK_PARAMETERS = {"stream", "max_version", "dl_device", "copy"}


def check_version() -> None:
    """Raise RuntimeError naming the fix unless this torch was checked (or the
    opt-in is set) and its Tensor.__dlpack__ takes what devbridge implements."""
    require_checked("torch", "devbridge's Python DLPack protocol",
                    also="or call devbridge.install(python_protocol=False) to install only the C exchange table")
    parameters = list(inspect.signature(original_dlpack()).parameters)
    if _DLPACK_PARAMETERS <= set(parameters):
        return
    raise RuntimeError(
        f"devbridge: torch {torch.__version__}'s Tensor.__dlpack__ takes {parameters}, not the "
        f"{sorted(_DLPACK_PARAMETERS)} devbridge's Python DLPack protocol implements; it replaces "
        "torch.Tensor.__dlpack__ and __dlpack_device__ and so refuses rather than risk wrong exports. Call "
        "devbridge.install(python_protocol=False) to install only the C exchange table, or "
        "update devbridge/_torch_dlpack_api.py after checking each name it lists against this torch.")


def original_dlpack():
    """torch's own Tensor.__dlpack__, also while devbridge's wrapper is installed."""
    method = torch.Tensor.__dict__["__dlpack__"]
    return getattr(method, "__devbridge_wraps__", method)


def original_dlpack_device():
    method = torch.Tensor.__dict__["__dlpack_device__"]
    return getattr(method, "__devbridge_wraps__", method)


def original_from_dlpack():
    function = torch.utils.dlpack.from_dlpack
    return getattr(function, "__devbridge_wraps__", function)


def set_tensor_methods(dlpack, dlpack_device) -> None:
    torch.Tensor.__dlpack__ = dlpack
    torch.Tensor.__dlpack_device__ = dlpack_device
    allow_in_read_only_wrapper(dlpack, dlpack_device)


def allow_in_read_only_wrapper(dlpack, dlpack_device) -> None:
    """torch 2.14's ReadOnlyTensorWrapper (torch/utils/dlpack.py) lets only
    the Tensor.__dlpack__ / __dlpack_device__ it saw at `import torch`
    through its __torch_function__ (_DLPACK_ALLOWED); the methods installed
    now are added, torch's own kept, so its export works with devbridge's
    methods installed or not. (Its C exchange table is torch's const one,
    _const_dlpack_exchange_api: a plugin tensor in that wrapper does not
    reach devbridge's table.) 2.11 and 2.13 have no such wrapper."""
    wrapper = getattr(torch.utils.dlpack, "ReadOnlyTensorWrapper", None)
    if wrapper is None:
        return
    torch_own = {original_dlpack(), original_dlpack_device()}
    wrapper._DLPACK_ALLOWED = frozenset(torch_own | {dlpack, dlpack_device})


def set_from_dlpack(function) -> None:
    # torch/__init__.py binds the same function object as torch.from_dlpack.
    torch.utils.dlpack.from_dlpack = function
    torch.from_dlpack = function


def plugin_device_type() -> str:
    return torch._C._get_privateuse1_backend_name()


def dl_device_type_enum():
    return torch.utils.dlpack.DLDeviceType


def dlpack_takes_read_only() -> bool:
    """Whether torch's own Tensor.__dlpack__ takes read_only= (2.14: the
    capsule is marked DLPACK_FLAG_BITMASK_READ_ONLY; 2.11 and 2.13 do not
    take it). devbridge's export of plugin tensors takes exactly what torch's
    method takes, so this is the one place the difference is decided."""
    return "read_only" in inspect.signature(original_dlpack()).parameters


# The C function itself (a Python wrapper would cost a call per export).
has_torch_function_unary = torch.overrides.has_torch_function_unary


