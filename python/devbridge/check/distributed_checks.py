"""The torch.distributed check of `devbridge check` (optional, like graph
capture and fused attention): the plugin registered a c10d collective backend
for its device type, and its device module has the names FSDP2 and DeviceMesh
call on torch.<name>. Only what a process can see without creating a process
group (which is process-wide state); the collectives themselves are the
plugin's to test (docs/distributed.md)."""

from __future__ import annotations

from .plugin import Backend
from .registry import check
from .result import CheckFailed, CheckResult

_DOC = "docs/distributed.md"
# What torch.distributed.fsdp.fully_shard and DeviceMesh call on the device
# module (getattr(torch, device_type)), as torch.cuda has them.
FSDP2_NAMES = ("Stream", "Event", "stream", "current_stream", "current_device", "set_device", "device_count",
               "is_available")


@check("distributed", "torch.distributed: a collective backend, FSDP2's device names")
def _distributed(backend: Backend, result: CheckResult) -> None:
    import torch.distributed as dist

    if not dist.is_available():
        result.skip("this torch has no torch.distributed")
        return
    collective = dist.Backend.default_device_backend_map.get(backend.name)
    if collective is None:
        result.skip(f"optional: no collective backend is registered for '{backend.name}'; a plugin registers one "
                    f"with torch.distributed.Backend.register_backend(name, create, extended_api=True, "
                    f"devices=['{backend.name}']) ({_DOC})")
        return
    missing = [name for name in FSDP2_NAMES if not callable(getattr(backend.module, name, None))]
    if missing:
        raise CheckFailed(
            f"'{collective}' serves '{backend.name}', but torch.{backend.name} lacks {', '.join(missing)}, which FSDP2 "
            "(fully_shard) and DeviceMesh call on the device module",
            f"add them to the device module, with torch.cuda's signatures: Stream(device=None, priority=0) a "
            f"torch.Stream, Event(enable_timing=False), stream(s) a context manager ({_DOC} §1)")
    result.detail = f"'{collective}' for {backend.name} tensors; torch.{backend.name} has FSDP2's device names"
