"""Devices the DLPack tests run on: CPU, and simdev when it is installed."""

import pytest
import torch

import devbridge

SIMDEV = devbridge.plugin_name() == "simdev"
skip_without_simdev = pytest.mark.skipif(
    not SIMDEV, reason="torch_simdev is not installed (pip install --no-build-isolation plugins/simdev)")

DEVICES = ["cpu", pytest.param("simdev:1", marks=skip_without_simdev)]


def on(device, tensor):
    return tensor.to(device)
