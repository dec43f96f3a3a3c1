"""Triton's compiled-kernel objects -> devbridge's launcher plan.

The one module that reads Triton objects for the launcher. What it reads, and
the Triton versions it was checked on (3.6.0 on a GPU machine and in CI,
3.7.1 and 3.8.0 in CI):

  src.signature        {arg name: type string or tuple of them}, argument order
                       (ASTSource and IRSource; 3.6.0, 3.7.1, 3.8.0)
  src.fn.arg_names     argument names (ASTSource only; names fall back to the
                       signature's keys)
  metadata             the CompiledKernel metadata namedtuple: num_warps,
                       num_ctas, shared, global/profile_scratch_size/_align,
                       launch_cooperative_grid, launch_pdl, tensordesc_meta,
                       name (3.6.0, 3.7.1, 3.8.0); instrumentation_mode (3.8.0:
                       "gsan" makes NVIDIA's launcher append a hidden
                       global-state pointer, which devbridge's does not pass,
                       so such a kernel is refused)
  triton.__version__   tensor descriptors carry one i1 flag (padding) in 3.6,
                       two (padding, round_f32_to_tf32) from 3.7

Every constexpr position is dropped, including None and ints equal to 1:
the JIT types those "constexpr" in src.signature, and the cubin has no
parameter for them.
"""

from __future__ import annotations

from .. import launch as _launch

_METADATA_FIELDS = ("num_warps", "num_ctas", "shared", "global_scratch_size", "global_scratch_align",
                    "profile_scratch_size", "profile_scratch_align", "launch_cooperative_grid",
                    "launch_pdl")


def tensordesc_flags(version: str | None = None) -> int:
    """How many i1 flags a decomposed tensor descriptor carries in this Triton."""
    if version is None:
        import triton

        version = triton.__version__
    from .._versions import major_minor

    return 1 if major_minor(version) < (3, 7) else 2


def _get(metadata, field, default=None):
    if isinstance(metadata, dict):
        return metadata.get(field, default)
    return getattr(metadata, field, default)


def _before_load(src, metadata) -> None:
    # The compiler's before_load hook (hardware.COMPILER_HOOKS): Triton
    # builds the launcher right before it loads the binary, also for a kernel
    # from its disk cache, which skipped the compiler's stages.
    target = _get(metadata, "target")
    backend = getattr(target, "backend", None) if target is not None else None
    if backend is None:
        return
    from .hardware import declared

    hardware = declared(backend)
    hook = hardware.hook("before_load") if hardware is not None else None
    if hook is not None:
        hook(src, metadata)


def describe(src, metadata):
    """(kernel name, plan, argument names, metadata dict) for Launcher(src, metadata)."""
    _launch.register_hook_chain_type()
    _before_load(src, metadata)
    signature = getattr(src, "signature", None)
    if not isinstance(signature, dict):
        raise TypeError(f"devbridge: Launcher(src, metadata) needs a Triton source with a `signature` dict "
                        f"(ASTSource or IRSource), got {type(src).__name__}")
    tensordesc_meta = _get(metadata, "tensordesc_meta") or []
    if any(meta is not None for meta in tensordesc_meta):
        raise NotImplementedError(
            "devbridge: this kernel was compiled with TMA tensor descriptors (metadata.tensordesc_meta), "
            "which need a host-built CUtensorMap per launch; devbridge's launcher does not build those. "
            "Compile for a target without TMA lowering, or pass plain pointers")
    if "gsan" in str(_get(metadata, "instrumentation_mode") or ""):
        raise NotImplementedError(
            "devbridge: this kernel was compiled with Triton's GSan instrumentation (instrumentation_mode "
            "'gsan'), whose launch passes a hidden global-state pointer devbridge's launcher does not provide; "
            "compile without it (unset TRITON_INSTRUMENTATION_MODE)")
    names = list(signature.keys())
    fn = getattr(src, "fn", None)
    arg_names = getattr(fn, "arg_names", None)
    if arg_names is not None and len(arg_names) == len(names):
        names = list(arg_names)
    plan = _launch.plan(signature.values(), tensordesc_flags=tensordesc_flags())
    fields = {field: _get(metadata, field) for field in _METADATA_FIELDS}
    fields = {k: v for k, v in fields.items() if v is not None}
    name = _get(metadata, "name") or getattr(fn, "__name__", None) or "kernel"
    return str(name), plan, [str(n) for n in names], fields
