"""``torch.hostplug``: the device module torch and libraries look up by name."""

from __future__ import annotations

import contextlib

import torch

_ops = torch.ops.hostplug


def _index(device) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    return current_device() if device.index is None else device.index


def is_available() -> bool:
    return True


def device_count() -> int:
    return _ops.device_count()


def current_device() -> int:
    return _ops.current_device()


def set_device(device) -> None:
    _ops.set_device(_index(device))


def synchronize(device=None) -> None:
    _ops.synchronize(_index(device))


def is_initialized() -> bool:
    return True


def _lazy_init() -> None:
    """Nothing to initialise; torch marks the device type initialised only
    after calling it, and torch.accelerator.synchronize() skips devices it
    does not consider initialised."""


def _is_in_bad_fork() -> bool:
    return False


def manual_seed_all(seed: int) -> None:
    """Random operators draw from the CPU generator (csrc/Memory.cpp's hooks).
    torch.manual_seed() calls this after seeding it; a direct call seeds it."""
    torch.default_generator.manual_seed(int(seed))


manual_seed = manual_seed_all


def current_stream(device=None) -> torch.Stream:
    return torch.accelerator.current_stream(_index(device))


def set_op_delay_us(microseconds: int) -> None:
    """The debug delay: every operator queued from now on sleeps this long on
    its stream's worker before it runs (0: off)."""
    _ops.set_op_delay_us(int(microseconds))


@contextlib.contextmanager
def op_delay(microseconds: int):
    previous = _ops.get_op_delay_us()
    set_op_delay_us(microseconds)
    try:
        yield
    finally:
        set_op_delay_us(previous)
