"""simdev's collective backend for ``torch.distributed``: ``sdgloo``.

Registered for the ``simdev`` device type when torch_simdev is imported, the
way torch_npu registers HCCL for ``npu``, so that ::

    torch.distributed.init_process_group(device_id=torch.device("simdev", rank))

uses it for simdev tensors; ``backend="sdgloo"`` makes it serve CPU tensors
too (``all_gather_object``, a barrier without a device).

It is Gloo over simdev's memory (csrc/distributed/SimdevBackend.h): each
collective is one piece of work on the current simdev stream, ordered after
the work queued before it and before the work queued after it, with no host
synchronization; ``wait()`` makes the caller's current stream wait, as with
NCCL. Gloo's timeout is the group's (``init_process_group(timeout=...)``).
"""

from __future__ import annotations

import datetime
import functools
import inspect

import torch

from . import _C

BACKEND_NAME = "sdgloo"
DEVICES = ["simdev", "cpu"]  # a list: torch 2.11 and 2.13 iterate over a string's letters


def _create_backend(options, backend_options=None):
    """The backend of one process group (``Backend.register_backend``'s
    extended API): a ProcessGroupGloo on the group's store, rank and size,
    wrapped to take simdev tensors on simdev streams."""
    del backend_options  # no options of its own
    from torch.distributed import ProcessGroupGloo

    timeout = options.timeout
    if not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"sdgloo: the group timeout must be a datetime.timedelta, got {timeout!r}")
    gloo = ProcessGroupGloo(options.store, options.group_rank, options.group_size, timeout)
    return _C._distributed.SimdevBackend(gloo, max(1, int(timeout.total_seconds() * 1000)))


def is_available() -> bool:
    """Whether this torch has torch.distributed (and so simdev a collective backend)."""
    return hasattr(_C, "_distributed") and torch.distributed.is_available()


def register() -> None:
    """Registers ``sdgloo`` with torch.distributed (once per process)."""
    if not is_available():
        return
    from torch.distributed import Backend

    if BACKEND_NAME in Backend.backend_list:
        return
    Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=DEVICES)
    _name_the_default_backend_custom()


def _name_the_default_backend_custom() -> None:
    """torch 2.11 and 2.13: ``init_process_group()`` without a backend sets the
    group's default backend type to Gloo's although the only backend it made
    is sdgloo (a custom one), so ``group.name()`` says "gloo" and every
    collective warns "No backend of type 1 found". torch 2.14 decides it from the backend config
    (``_get_default_backend_type_for_backend_config``, pytorch#179901); on
    2.11 and 2.13 the group is given the custom type after it is made, when
    sdgloo is all its backend config holds (distributed_c10d's private
    ``_new_process_group_helper``, checked on 2.11 and 2.13)."""
    from torch.distributed import distributed_c10d

    if hasattr(distributed_c10d, "_get_default_backend_type_for_backend_config"):
        return  # 2.14 and later: right already
    helper = distributed_c10d._new_process_group_helper
    if getattr(helper, "_sdgloo_default_backend", False):
        return
    signature = inspect.signature(helper)

    @functools.wraps(helper)
    def new_process_group_helper(*args, **kwargs):
        pg, store = helper(*args, **kwargs)
        backend = signature.bind(*args, **kwargs).arguments.get("backend")
        backends = set(distributed_c10d.BackendConfig(backend).get_device_backend_map().values())
        if backends == {BACKEND_NAME}:
            pg._set_default_backend(distributed_c10d.ProcessGroup.BackendType.CUSTOM)
        return pg, store

    new_process_group_helper._sdgloo_default_backend = True
    distributed_c10d._new_process_group_helper = new_process_group_helper
