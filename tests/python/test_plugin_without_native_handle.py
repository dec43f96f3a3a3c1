"""devbridge on a real plugin whose device guard does not override
getStreamNativeHandle: simdev started with SIMDEV_NATIVE_HANDLE=0 (a plugin
written for torch < 2.11, which also registers no devbridge stream hooks).

The guard is chosen when simdev loads, so each scenario runs in a fresh
interpreter; it prints a JSON dict of what it saw. (`devbridge check` on such
a plugin: test_check_cli.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from dlpack_devices import skip_without_simdev

pytestmark = skip_without_simdev

PRELUDE = """
import ctypes, json, os, sys
import torch, torch_simdev, devbridge
from devbridge import dlpack_ctypes as dl
table = dl.Table(devbridge.exchange_api())
seen = {}

def table_stream(index):
    out = ctypes.c_void_p(7)
    try:
        rc = table.current_stream_raw(dl.KDL_EXT_DEV, index, ctypes.byref(out))
    except Exception as error:  # ctypes raises the Python error the table set
        return {"error": type(error).__name__, "message": str(error)}
    return {"rc": rc, "stream": out.value or 0}
"""


def run(body: str, **env: str) -> dict:
    code = PRELUDE + textwrap.dedent(body) + "\nprint(json.dumps(seen))\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "SIMDEV_NATIVE_HANDLE": "0", **env})
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_mode_is_what_it_says():
    seen = run("""
        seen["guard_has_native_handle"] = torch_simdev._C.guard_has_native_handle()
        seen["query"] = devbridge._C._has_current_stream_query("simdev")
        seen["hook"] = devbridge._C._has_external_stream_hook("simdev")
        seen["source"] = devbridge._C.native_stream_source("simdev", 0)
        try:
            torch.accelerator.current_stream(0).native_handle
        except RuntimeError as error:
            seen["torch"] = str(error)
    """)
    assert seen == {"guard_has_native_handle": False, "query": False, "hook": False, "source": "missing",
                    "torch": "Backend doesn't support getting stream native handle."}


def test_the_exchange_table_refuses_with_the_fix_rather_than_a_null_stream():
    seen = run("""
        seen["table"] = table_stream(0)
        try:
            devbridge.current_stream("simdev:0")
        except RuntimeError as error:
            seen["python"] = str(error)
    """)
    assert seen["table"]["error"] == "RuntimeError"
    for message in (seen["table"]["message"], seen["python"]):
        assert "the PrivateUse1 plugin 'simdev' exposes no native stream handle" in message
        assert "override DeviceGuardImplInterface::getStreamNativeHandle" in message
        assert "devbridge.register_stream_resolver(resolver, device_type='simdev')" in message
        assert "allow_null_stream=True" in message


@pytest.mark.parametrize("how", ["install", "environment"])
def test_allow_null_stream_gives_null_on_request(how):
    body = textwrap.dedent("""
        side = torch.Stream(device="simdev:1")
        with side:
            seen["table"] = table_stream(1)
            seen["python"] = devbridge.current_stream("simdev:1")
    """)
    if how == "install":
        body = "devbridge.install(allow_null_stream=True)\n" + body
    seen = run(body, **({"DEVBRIDGE_ALLOW_NULL_STREAM": "1"} if how == "environment" else {}))
    assert seen == {"table": {"rc": 0, "stream": 0}, "python": 0}


def test_the_plugins_resolver_gives_the_live_streams():
    seen = run("""
        devbridge.register_stream_resolver(torch_simdev._C.stream_resolver(), "simdev")
        seen["source"] = devbridge._C.native_stream_source("simdev", 1)
        side = torch.Stream(device="simdev:1")
        seen["default"] = [table_stream(1)["stream"], torch.simdev._current_stream_handle(1)]
        with side:
            seen["side"] = [table_stream(1)["stream"], torch.simdev._current_stream_handle(1),
                            devbridge.current_stream("simdev:1")]
    """)
    assert seen["source"] == "resolver"
    assert seen["default"][0] == seen["default"][1] != 0
    assert seen["side"][0] == seen["side"][1] == seen["side"][2] != seen["default"][0]


def test_the_python_protocol_without_native_handles():
    # Export, torch.from_dlpack and stream=None (the default stream, known to
    # c10 by id; the event goes through the guard) need no native handle. A
    # native stream handed over as an int does: devbridge must find out which
    # stream it is, and refuses with the fix until the resolver is there.
    seen = run("""
        x = torch.arange(4.0, device="simdev:0")
        seen["device"] = list(x.__dlpack_device__())
        seen["shared"] = torch.from_dlpack(x).data_ptr() == x.data_ptr()
        side = torch.Stream(device="simdev:0")
        with side:
            x.__dlpack__(stream=None)
            try:
                x.__dlpack__(stream=torch.simdev._current_stream_handle(0))
            except RuntimeError as error:
                seen["native"] = str(error)
            devbridge.register_stream_resolver(torch_simdev._C.stream_resolver(), "simdev")
            x.__dlpack__(stream=torch.simdev._current_stream_handle(0))
        seen["ordered"] = True
    """)
    assert seen["device"] == [12, 0] and seen["shared"] and seen["ordered"]
    assert "exposes no native stream handle" in seen["native"]
