"""triton-ascend's compiled-kernel objects -> a devbridge launcher in the Ascend
layout (include/devbridge/c_launch_api.h). What is read is listed in
_upstream.py; the layout's rules are triton-ascend's generated launcher's:

  ffts        a leading ffts_addr unless the arch lacks FFTS (910A, 310B4) or
              TRITON_DISABLE_FFTS is set
  simt_only   metadata.force_simt_only: no lock and workspace slots
  workspace   metadata.workspace_size bytes per program (-1 or absent: none)
  lock        metadata.lock_num int64 words (-1 or absent: none), set to
              lock_init_value, or to lock_init_val (the key the compiler
              writes: triton-ascend's own launcher reads only lock_init_value,
              so it always initialises to 0)
  cap_blocks  TRITON_ALL_BLOCKS_PARALLEL: at most the core count of blocks,
              vector cores for mix_mode "aiv"
"""

from __future__ import annotations

from ... import launch as _launch


def _get(metadata, field, default=None):
    if isinstance(metadata, dict):
        return metadata.get(field, default)
    return getattr(metadata, field, default)


def _positive(value) -> int:
    value = int(value) if value is not None else 0
    return value if value > 0 else 0


def describe(src, metadata, *, ffts: bool, cap_blocks: bool):
    """(name, plan, argument names, launcher metadata) for Launcher._from_plan."""
    signature = getattr(src, "signature", None)
    if not isinstance(signature, dict):
        raise TypeError(f"devbridge: an Ascend launcher needs a Triton source with a `signature` dict, got "
                        f"{type(src).__name__}")
    fn = getattr(src, "fn", None)
    arg_names = list(getattr(fn, "arg_names", None) or [])
    constants = dict(getattr(src, "constants", None) or {})
    # Constants may be keyed by name or by position: normalise to names.
    constant_names = {arg_names[key] if isinstance(key, int) and key < len(arg_names) else key for key in constants}
    names, types = [], []
    for position, (key, ty) in enumerate(signature.items()):
        name = key if isinstance(key, str) else (arg_names[key] if key < len(arg_names) else f"arg{key}")
        names.append(str(name))
        types.append("constexpr" if name in constant_names or key in constants else ty)
    plan = _launch.plan(types)
    init = _get(metadata, "lock_init_value")
    if init is None:
        init = _get(metadata, "lock_init_val", 0)
    fields = {
        "layout": "ascend",
        "workspace_size": _positive(_get(metadata, "workspace_size")),
        "lock_num": _positive(_get(metadata, "lock_num")),
        "lock_init_value": int(init or 0),
        "simt_only": bool(_get(metadata, "force_simt_only", False)),
        "ffts": bool(ffts),
        "cap_blocks": bool(cap_blocks),
        "vector_cores": _get(metadata, "mix_mode") == "aiv",
    }
    if fields["simt_only"]:
        fields["workspace_size"] = fields["lock_num"] = 0  # no slots to carry them
    name = _get(metadata, "name") or getattr(fn, "__name__", None) or "kernel"
    return str(name).split(" ")[0], plan, names, fields
