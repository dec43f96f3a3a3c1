"""devbridge's kernel launcher, the thin Python face (the work happens in _C).

Three steps, the same for every device and kernel runtime:

    runtime = launch.kernel_runtime("simdev", library=torch_simdev.runtime_library_path())
    kernel = launch.load_binary(image, "add", device="simdev:0", runtime=runtime)
    launcher = launch.launcher({"x": "*fp32", "n": "i32", "BLOCK": "constexpr"}, num_warps=4)
    launcher(gx, gy, gz, stream, kernel.function, (4, 1, 0), None, None, None, x, n, 1024)

`launcher` builds the launcher Triton drivers hand out (devbridge.triton.Launcher)
from Triton signature strings; the call convention is Triton's own, so a
Triton driver passes the launcher straight to Triton. See
include/devbridge/c_launch_api.h for the ABI behind it.
"""

from __future__ import annotations

import re
import sys
from typing import Any, Iterable, Mapping, NamedTuple

from . import _C, _kernel_runtimes
from ._runtime import _device

Launcher = _C.Launcher

#: DevbridgeArgType values (include/devbridge/c_launch_api.h), by Triton type string.
ARG_TYPES = {
    "i1": 2, "i8": 3, "i16": 4, "i32": 5, "i64": 6,
    "u1": 7, "u8": 8, "u16": 9, "u32": 10, "u64": 11,
    "fp16": 12, "bf16": 13, "fp32": 14, "f32": 14, "fp64": 15,
}
_POINTER = 1
_TENSORDESC = re.compile(r"tensordesc<([^[>]*)\[([^]]*)\]")


class LoadedBinary(NamedTuple):
    """What load_binary returns; the first five fields are what Triton's
    `utils.load_binary` returns (module, function, n_regs, n_spills, n_max_threads)."""

    module: int
    function: int
    n_regs: int
    n_spills: int
    n_max_threads: int


def kernel_runtime(name: str, *, library: str | None = None):
    """A kernel runtime (PyCapsule "devbridge_kernel_runtime").

    `name`: "cuda" (cubins; libcuda.so.1 opened on first use), "ascend"
    (NPU binaries of triton-ascend; CANN's libascendcl.so opened on first use,
    Ascend-layout launchers only), "host" (the interpreter Triton target's
    programs run on the launching thread, for a plugin whose tensors are host
    memory: host_kernel_runtime below), "simdev" (shared libraries of host-function
    kernels; `library` is the simdev runtime library,
    torch_simdev.runtime_library_path()), or "simdev-interpreter" (an older
    name of the runtime simdev's Triton target makes, with the same library).
    The names and the specs a plugin declares ("simdev:<library path>", ...)
    are resolved in one place, devbridge._kernel_runtimes.
    """
    return _kernel_runtimes.open_runtime(name, library)


def python_kernel_runtime(name: str, *, library: str, load, run):
    """A kernel runtime (PyCapsule "devbridge_kernel_runtime") whose kernels
    are Python: for a target with no instruction set, whose "binary" is a
    description that Python code runs (simdev's Triton target runs Triton's
    interpreter this way).

    `load(image: bytes) -> int` is called when a binary is loaded and returns
    a nonzero id for it (raising refuses the binary, with the error's text).
    Each launch is enqueued on the launch stream, and its programs run there
    in order, on the stream's worker thread, each as one call
    `run(id, (x, y, z) program, (x, y, z) grid, device index, payload: bytes)
    -> int` (0: done; anything else, or raising, fails the launch and skips
    its remaining programs; the error is printed and reported at the
    stream's next synchronization). The payload holds the packed kernel
    parameters (Triton's layout, each in an 8-byte little-endian slot, two
    scratch pointers last). Each call takes the GIL for that program only.
    Programs still queued when Python exits are skipped.

    The stream is a simdev stream: `library` is the simdev runtime library
    (torch_simdev.runtime_library_path()), whose module API runs the
    programs. `name` names the runtime in messages and cache keys."""
    return _kernel_runtimes.python_kernel_runtime(name, library=library, load=load, run=run)


def host_kernel_runtime(name: str, *, load, run):
    """A kernel runtime (PyCapsule "devbridge_kernel_runtime") whose kernels
    are Python run on the launching thread, for any plugin whose tensors live
    in host memory; it needs only the plugin's c10 device guard (getStream,
    synchronizeStream), no runtime library. kernel_runtime="host" is this
    runtime running the interpreter Triton target (devbridge.triton.interpreter).

    `load(image: bytes) -> int` as for python_kernel_runtime. A launch must be
    on the current stream of the plugin device (the stream Triton and
    Inductor launch on; another stream is refused, naming it): it waits for
    the work queued there (synchronizeStream), then runs every program in
    order on the calling thread, each as one call `run(id, (x, y, z) program,
    (x, y, z) grid, device index, payload: bytes) -> int` (the payload as for
    python_kernel_runtime; 0: done; anything else, or raising, fails the
    launch at once, with the error's text, and skips its remaining
    programs). The launch returns once every program ran, so work queued on
    the stream later comes after the kernel. `name` names the runtime in
    messages and cache keys."""
    return _kernel_runtimes.host_kernel_runtime(name, load=load, run=run)


def load_binary(image: bytes, kernel_name: str, *, device=None, runtime, shared: int = 0) -> LoadedBinary:
    """Load `image` on `device` (default: the current accelerator device) through
    `runtime` and return the handles a launcher takes. `shared`: the kernel's
    dynamic shared memory (metadata.shared); above 48 KB the CUDA runtime opts
    the function in, or fails naming the device's limit."""
    if not isinstance(image, (bytes, bytearray, memoryview)):
        raise TypeError(f"devbridge: a kernel image must be bytes, got {type(image).__name__}")
    kind, index = _device(device)
    return LoadedBinary(*_C.load_kernel(runtime, kind, index, bytes(image), kernel_name, int(shared)))


def unload(handle: int) -> None:
    """Release a kernel from load_binary (module or function handle: the same).
    Launches already enqueued still run; later launches with it are refused."""
    if not _C.release_kernel(int(handle)):
        raise ValueError(f"devbridge: no loaded kernel has handle {handle}")


def is_loaded(handle: int) -> bool:
    """Whether `handle` is a live kernel of load_binary (not yet unloaded)."""
    return bool(_C.kernel_is_loaded(int(handle)))


def _node(ty: Any, position: str, tensordesc_flags: int):
    """One argument-plan node (src/python/py_args.h) for a Triton signature entry."""
    if isinstance(ty, tuple):
        return tuple(_node(t, f"{position}[{i}]", tensordesc_flags) for i, t in enumerate(ty))
    if not isinstance(ty, str):
        raise TypeError(f"devbridge: signature entry {position} must be a Triton type string or a tuple, "
                        f"got {ty!r}")
    if ty == "constexpr":
        return None
    if ty.startswith("*"):
        return _POINTER
    if ty in ARG_TYPES:
        return ARG_TYPES[ty]
    match = _TENSORDESC.match(ty)
    if match:
        ndim = match.group(2).count(",") + 1
        return ("tensordesc", ndim, tensordesc_flags)
    if ty == "nvTmaDesc":
        raise NotImplementedError(
            f"devbridge: signature entry {position} is an nvTmaDesc (a host-built CUDA TMA descriptor); "
            "devbridge's launcher does not take those: pass a triton.tools.tensor_descriptor."
            "TensorDescriptor instead (compiled without TMA, it is decomposed into plain parameters)")
    raise ValueError(f"devbridge: signature entry {position} has the unknown Triton type {ty!r}; known: "
                     f"*<dtype>, {', '.join(sorted(ARG_TYPES))}, constexpr, tensordesc<...>, tuples")


def plan(signature: Iterable[Any], *, tensordesc_flags: int = 2) -> tuple:
    """The argument plan of a Triton signature (type strings in argument order)."""
    return tuple(_node(ty, str(i), tensordesc_flags) for i, ty in enumerate(signature))


_hook_chain_known = False


def register_hook_chain_type() -> None:
    """Teach the launcher Triton's HookChain type, once Triton is imported: an
    empty chain (what Triton passes when no hook is set) is then skipped
    without a Python call. Without Triton nothing passes HookChains."""
    global _hook_chain_known
    if not _hook_chain_known and "triton.knobs" in sys.modules:
        from ._triton_api import hook_chain_type

        _C._set_hook_chain_type(hook_chain_type())
        _hook_chain_known = True


def launcher(signature: Mapping[str, Any] | Iterable[Any], *, name: str = "kernel",
             tensordesc_flags: int = 2, **metadata) -> Launcher:
    """A Launcher from Triton type strings (a {name: type} mapping in argument
    order, or a list) and launch metadata keywords (num_warps, num_ctas,
    shared, global_scratch_size, global_scratch_align, profile_scratch_size,
    profile_scratch_align, launch_cooperative_grid, launch_pdl).
    `tensordesc_flags`: 2 for Triton 3.7+, 1 for Triton 3.6.

    layout="ascend" builds a launcher for the Ascend kernel ABI (triton-ascend,
    FlagTree's Ascend backend; include/devbridge/c_launch_api.h), with its own
    keywords: workspace_size (bytes per program), lock_num (int64 lock words),
    lock_init_value, ffts (a leading ffts_addr), simt_only (no lock and
    workspace slots), cap_blocks (at most the device's core count of blocks),
    vector_cores (mix_mode "aiv": the vector core count caps)."""
    if isinstance(signature, Mapping):
        names, types = list(signature.keys()), list(signature.values())
    else:
        types = list(signature)
        names = [f"arg{i}" for i in range(len(types))]
    register_hook_chain_type()
    return Launcher._from_plan(name, plan(types, tensordesc_flags=tensordesc_flags),
                               [str(n) for n in names], dict(metadata))


__all__ = ["ARG_TYPES", "LoadedBinary", "Launcher", "kernel_runtime", "launcher", "load_binary", "plan",
           "python_kernel_runtime", "unload"]
