"""A device name that is not the loaded PrivateUse1 backend, given to
devbridge's API, is refused with devbridge's message naming the loaded
backend (devbridge/_device_names.py), not accepted silently nor answered with
torch's list of its built-in device types. The plugin's name (also with an
index, or as a torch.device) and torch's own device types, where an API takes
them, keep working. (devbridge.install() takes no device name.)"""

from __future__ import annotations

import re

import pytest
import torch

import devbridge
import devbridge.triton
from devbridge import _C, _device_names
from devbridge.triton import hardware

from launch_support import declare_before_the_rename, skip_without_simdev

pytestmark = skip_without_simdev

TYPOS = ["simdve", "simdev_"]


def refused(name: str):
    return pytest.raises(ValueError, match=re.escape(
        f"devbridge: '{name}' is not the loaded PrivateUse1 backend 'simdev' (a typo?); pass 'simdev'"))


@pytest.fixture
def simdev_declaration():
    """simdev's Triton declaration, put back after the test."""
    before = hardware._declared.get("simdev")
    yield before
    if before is not None:
        hardware._declared["simdev"] = before
    else:
        hardware._declared.pop("simdev", None)


@pytest.mark.parametrize("name", TYPOS)
def test_declare_hardware_refuses_a_misspelt_device(name, simdev_declaration):
    with refused(name):
        devbridge.triton.declare_hardware(name, compiler="nvidia", kernel_runtime="cuda")
    assert devbridge.triton.declared(name) is None


def test_declare_hardware_takes_the_plugins_name_only(simdev_declaration):
    with pytest.raises(ValueError, match=re.escape("devbridge: 'cuda' is not the loaded PrivateUse1 backend "
                                                   "'simdev'; declare_hardware serves the plugin's device only: "
                                                   "pass 'simdev'")):
        devbridge.triton.declare_hardware("cuda", compiler="nvidia", kernel_runtime="cuda")
    if simdev_declaration is not None:
        again = devbridge.triton.declare_hardware("simdev", compiler=simdev_declaration.compiler,
                                                  kernel_runtime=simdev_declaration.kernel_runtime)
        assert devbridge.triton.declared("simdev") is again


def test_a_name_declared_before_the_rename_is_refused_at_the_look_up(monkeypatch, simdev_declaration):
    # A plugin may declare before it renames PrivateUse1: the name cannot be
    # checked then, and the look-up of the plugin's declaration says why it fails.
    hardware._declared.pop("simdev", None)
    declare_before_the_rename(monkeypatch)
    devbridge.triton.declare_hardware("simdve", compiler="nvidia", kernel_runtime="cuda")
    monkeypatch.undo()
    try:
        with pytest.raises(RuntimeError, match=re.escape(
                "declare_hardware('simdve', ...) was called before the plugin renamed PrivateUse1, and 'simdve' "
                "is not the loaded PrivateUse1 backend 'simdev' (a typo?); pass 'simdev'")):
            hardware.require("simdev")
    finally:
        hardware._declared.pop("simdve", None)


@pytest.mark.parametrize("name", TYPOS)
def test_the_stream_registrations_refuse_a_misspelt_device(name):
    with refused(name):
        devbridge.register_current_stream_query(None, name)
    with refused(name):
        devbridge.register_external_stream_hook(None, name)
    with refused(name):
        devbridge.register_graph_api(None, name)
    with refused(name):
        devbridge.device_count(name)


def test_the_stream_registrations_take_the_plugins_name_and_torchs_types():
    query = _C._current_stream_query("simdev")  # what simdev registered (None: it has no native handle)
    for device_type in ("simdev", "privateuseone", torch.device("simdev")):
        devbridge.register_current_stream_query(query, device_type)
        assert _C._has_current_stream_query("simdev") == (query is not None)
    devbridge.register_current_stream_query(None, "cpu")
    assert devbridge.device_count("simdev:0") == devbridge.device_count("simdev") >= 1


@pytest.mark.parametrize("device", ["simdve", "simdve:0", "simdev_:1"])
def test_current_stream_refuses_a_misspelt_device(device):
    with refused(device.partition(":")[0]):
        devbridge.current_stream(device)


def test_current_stream_takes_the_plugins_device_in_every_form():
    import torch_simdev

    if not torch_simdev._C.guard_has_native_handle():
        pytest.skip("simdev runs as an older plugin (SIMDEV_NATIVE_HANDLE=0): its streams have no native handle")
    current = devbridge.current_stream("simdev")
    assert devbridge.current_stream("simdev:0") == devbridge.current_stream(torch.device("simdev", 0))
    assert current == devbridge.current_stream(torch.device("simdev", torch.simdev.current_device()))
    assert devbridge.current_stream("cpu") == 0
    # A known type with a bad index keeps torch's own message.
    with pytest.raises(RuntimeError, match="Invalid device string") as error:
        devbridge.current_stream("simdev:x")
    assert not isinstance(error.value, _device_names.DeviceNameError)


def test_the_refusal_is_a_runtime_error_too():
    # torch.device's own error for an unknown type was a RuntimeError: callers that caught it still do.
    with pytest.raises(RuntimeError):
        devbridge.current_stream("simdve:0")


def test_before_any_plugin_claims_privateuse1_the_message_says_to_import_it(monkeypatch):
    declare_before_the_rename(monkeypatch)
    with pytest.raises(ValueError, match=re.escape(
            "devbridge: 'openrg' is no device type of this process: no plugin has claimed PrivateUse1 yet (its "
            "name is still 'privateuseone'); import the plugin first")):
        devbridge.current_stream("openrg:0")
