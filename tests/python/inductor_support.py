"""Shared set-up of the torch.compile tests on simdev."""

from __future__ import annotations

import contextlib
import os

import torch


@contextlib.contextmanager
def private_inductor(cache_root):
    """Inductor and Triton caches of the module's own under `cache_root`
    (devbridge's run-time settings are in no cache key), in-process compiles (the
    subprocess workers have tests of their own), devbridge registered;
    the environment and simdev's delay restored afterwards."""
    import devbridge.inductor

    saved = {k: os.environ.get(k) for k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_root / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(cache_root / "triton")
    try:
        with torch._inductor.config.patch(compile_threads=1):
            devbridge.inductor.register()
            yield
    finally:
        torch.simdev.set_op_delay_us(0)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def reset_dynamo_around_test():
    """Per test: Dynamo's caches reset before, simdev's delay off after."""
    torch._dynamo.reset()
    yield
    torch.simdev.set_op_delay_us(0)
