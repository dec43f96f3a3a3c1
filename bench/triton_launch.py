"""Benchmark: host time per Triton kernel launch, devbridge's launcher against
Triton's own, PyTorch's static launcher and a bare cuLaunchKernel, in one
process, on the same cubin; plus the cold start of a new signature.

    TORCH_DEVICE_BACKEND_AUTOLOAD=0 python bench/triton_launch.py --machine h200 \
        --results-dir DIR [--repeats N] [--batch N]
    python bench/triton_launch.py --self-check      # no GPU needed

Needs an NVIDIA GPU, a CUDA build of torch, triton, devbridge and the
torch_cudadev plugin (a PrivateUse1 backend whose memory and streams are
CUDA's). Three @triton.jit kernels with 1, 3 and 12 tensor arguments (plus an
i32 `n` and a constexpr BLOCK) are compiled once each by the JIT on torch.cuda
tensors; every path then launches that one compiled kernel:

  (a)  devbridge.triton.Launcher on cudadev tensors, the cubin loaded with
       devbridge.launch.load_binary on cudadev:0, called as Triton calls
       launchers (empty HookChains, launch_metadata None), stream =
       devbridge.current_stream("cudadev:0")
  (b)  Triton's CompiledKernel.run on torch.cuda tensors, called the same way;
       (b+md) also computes launch_metadata per launch, as the JIT does
  (c)  torch._C._StaticCudaLauncher._launch_kernel (Inductor's launcher) on
       torch.cuda tensors; (c int) with int pointers instead of tensors
  (d)  cuLaunchKernel in a C loop (bench/triton_launch_harness.c, compiled at
       run time) on the CUfunction devbridge loaded for (a)
  jit  kernel[grid](...), the whole JIT front end, for scale

Each figure is the best of --repeats batches of --batch launches (µs per
launch, time.perf_counter_ns around the batch, the device synchronized between
batches, never inside; paths interleaved within each repeat; gc off during a
batch). The cold start (a new signature up to its first launch) is measured in
a fresh interpreter with an empty TRITON_CACHE_DIR, where Triton 3.6 generates
and compiles a C launcher per signature.

Writes DIR/triton_launch_<machine>.json, .md and .png.
"""

from __future__ import annotations

import os

# Several PrivateUse1 plugins may be installed; only one may load per process.
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

import argparse  # noqa: E402
import ctypes  # noqa: E402
import dataclasses  # noqa: E402
import datetime  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any, Callable  # noqa: E402

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from machine_info import cpu_model, git_commit  # noqa: E402  (bench/, beside this script)

BENCH_DIR = pathlib.Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
HARNESS_SOURCE = BENCH_DIR / "triton_launch_harness.c"
RESULTS_DIR = BENCH_DIR / "results"

NUMEL = 256  # one program of BLOCK elements; 256 % 16 == 0, so `n` stays an i32 argument
BLOCK = 256
GRID = (1,)
TENSOR_COUNTS = (1, 3, 12)
PLUGIN_DEVICE = "cudadev:0"
CUDA_DEVICE = 0

# Targets (the launcher issue): per tensor count.
MAX_RATIO_VS_TRITON = 0.6  # (a) <= 0.6 x (b)
MAX_RATIO_VS_BARE = 1.25  # (a) <= 1.25 x (d)
MAX_COLD_START_MS = 1.0  # devbridge: Launcher(src, metadata) + first call
MAX_RATIO_JIT = 0.85  # (jit dev) <= 0.85 x (jit)

# Path key -> label, in table order.
PATHS = {
    "a": "(a) devbridge Launcher, cudadev tensors",
    "a0": "(a0) the same with an empty grid: everything but cuLaunchKernel",
    "b": "(b) Triton CompiledKernel.run, launch_metadata None",
    "b_md": "(b+md) CompiledKernel.run + launch_metadata, as the JIT",
    "c": "(c) torch _StaticCudaLauncher, tensors",
    "c_int": "(c int) _StaticCudaLauncher, int pointers",
    "d": "(d) bare cuLaunchKernel from C",
    "jit": "(jit) kernel[grid](...), upstream driver, torch.cuda tensors",
    "jit_dev": "(jit dev) kernel[grid](...), devbridge driver, cudadev tensors",
}
SHORT = {"a": "(a)", "a0": "(a0)", "b": "(b)", "b_md": "(b+md)", "c": "(c)", "c_int": "(c int)", "d": "(d)", "jit": "(jit)",
         "jit_dev": "(jit dev)"}

# torch/_inductor/runtime/static_triton_launcher.py: one char per non-constexpr arg.
STATIC_ARG_TYPES = {
    "i1": "i", "i8": "b", "i16": "h", "i32": "i", "i64": "l",
    "u1": "I", "u8": "B", "u16": "H", "u32": "I", "u64": "K",
    "fp16": "f", "bf16": "f", "fp32": "f", "f32": "f", "fp64": "d",
}  # fmt: skip
# The kernel-parameter storage a bare cuLaunchKernel needs (the cubin's .param types).
CTYPES_ARGS = {
    "i1": ctypes.c_int8, "i8": ctypes.c_int8, "i16": ctypes.c_int16, "i32": ctypes.c_int32,
    "i64": ctypes.c_int64, "u1": ctypes.c_uint8, "u8": ctypes.c_uint8, "u16": ctypes.c_uint16,
    "u32": ctypes.c_uint32, "u64": ctypes.c_uint64, "fp32": ctypes.c_float, "f32": ctypes.c_float,
    "fp64": ctypes.c_double,
}  # fmt: skip


class BenchError(Exception):
    """A path could not be set up or gave a wrong result; the message says why."""


# ---------------------------------------------------------------- the kernels


@triton.jit
def index_kernel(out_ptr, n, BLOCK: tl.constexpr):  # 1 tensor: out[i] = i
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, offs.to(tl.float32), mask=offs < n)


@triton.jit
def sum2_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):  # 3 tensors
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    total = tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, total, mask=mask)


@triton.jit
def sum11_kernel(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, out_ptr, n, BLOCK: tl.constexpr):  # 12 tensors
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    total = tl.load(a0 + offs, mask=mask) + tl.load(a1 + offs, mask=mask) + tl.load(a2 + offs, mask=mask)
    total += tl.load(a3 + offs, mask=mask) + tl.load(a4 + offs, mask=mask) + tl.load(a5 + offs, mask=mask)
    total += tl.load(a6 + offs, mask=mask) + tl.load(a7 + offs, mask=mask) + tl.load(a8 + offs, mask=mask)
    total += tl.load(a9 + offs, mask=mask) + tl.load(a10 + offs, mask=mask)
    tl.store(out_ptr + offs, total, mask=mask)


KERNELS = {1: index_kernel, 3: sum2_kernel, 12: sum11_kernel}


def make_tensors(count: int, device) -> tuple[list[torch.Tensor], torch.Tensor]:
    """`count` float32 tensors of NUMEL (inputs filled with 1, 2, ..., the
    last one the output, zeroed) on `device`, and the expected output (CPU)."""
    inputs = [torch.full((NUMEL,), float(i + 1)) for i in range(count - 1)]
    out = torch.zeros(NUMEL)
    expected = torch.arange(NUMEL, dtype=torch.float32) if count == 1 else sum(inputs, torch.zeros(NUMEL))
    return [t.to(device) for t in (*inputs, out)], expected


def kernel_args(tensors: list) -> tuple:
    """Every bound argument in order, the constexpr included, as the JIT passes them."""
    return (*tensors, NUMEL, BLOCK)


def runtime_args(signature: dict, args: tuple) -> list[tuple[str, Any]]:
    """(type, value) of each non-constexpr argument: what the cubin takes."""
    types = list(signature.values())
    if len(types) != len(args):
        raise BenchError(f"the signature has {len(types)} entries, the call {len(args)} arguments")
    return [(ty, value) for ty, value in zip(types, args) if ty != "constexpr"]


def static_arg_types(signature: dict) -> str:
    """_StaticCudaLauncher's arg_types: one char per non-constexpr arg, then the
    two scratch pointers (always in the cubin, NULL at size 0)."""
    chars = []
    for ty in signature.values():
        if ty == "constexpr":
            continue
        if isinstance(ty, str) and ty.startswith("*"):
            chars.append("O")
        elif ty in STATIC_ARG_TYPES:
            chars.append(STATIC_ARG_TYPES[ty])
        else:
            raise BenchError(f"no _StaticCudaLauncher type for {ty!r}")
    return "".join(chars) + "OO"


def pointer_value(value) -> int:
    return value.data_ptr() if hasattr(value, "data_ptr") else int(value)


def bare_params(signature: dict, args: tuple) -> tuple[list, ctypes.Array]:
    """The kernelParams array for cuLaunchKernel: storage for each parameter
    (kept alive by the returned list) and the array of pointers to it."""
    storage: list = []
    for ty, value in runtime_args(signature, args):
        if ty.startswith("*"):
            storage.append(ctypes.c_uint64(pointer_value(value)))
        elif ty in CTYPES_ARGS:
            storage.append(CTYPES_ARGS[ty](value))
        else:
            raise BenchError(f"the bare harness has no parameter type for {ty!r}")
    storage += [ctypes.c_uint64(0), ctypes.c_uint64(0)]  # global and profile scratch
    params = (ctypes.c_void_p * len(storage))(*[ctypes.addressof(s) for s in storage])
    return storage, params


def empty_hooks() -> tuple[Any, Any]:
    """What Triton passes when no launch hook is set: empty HookChains (3.5+), else None."""
    try:
        from triton.knobs import HookChain
    except ImportError:
        return None, None
    return HookChain(), HookChain(reversed=True)


def jit_hooks() -> tuple[Any, Any]:
    """The hooks the JIT passes: knobs.runtime.launch_enter/exit_hook."""
    knobs = getattr(triton, "knobs", None)
    if knobs is None:
        return None, None
    return knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook


# ---------------------------------------------------------------- the C harness


def build_harness(build_dir: pathlib.Path) -> ctypes.CDLL:
    """Compile bench/triton_launch_harness.c and load it (ctypes.CDLL: the GIL
    is released around each call, which times a whole batch)."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or "cc"
    library = build_dir / "triton_launch_harness.so"
    command = [compiler, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
               str(HARNESS_SOURCE), "-o", str(library), "-ldl"]  # fmt: skip
    try:
        built = subprocess.run(command, capture_output=True, text=True)
    except OSError as error:
        raise BenchError(f"no C compiler to build the harness ({' '.join(command)}): {error}") from error
    if built.returncode != 0:
        raise BenchError(f"building the harness failed:\n{' '.join(command)}\n{built.stderr}")
    harness = ctypes.CDLL(str(library))
    signatures = {
        "bare_init": ([], ctypes.c_int),
        "bare_ensure_context": ([ctypes.c_int], ctypes.c_int),
        "bare_launch_ns": ([ctypes.c_void_p, ctypes.c_uint, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                            ctypes.c_int, ctypes.c_int, ctypes.c_uint], ctypes.c_double),
        "bare_error": ([], ctypes.c_char_p),
        "bare_use_fake_launch": ([], None),
        "bare_fake_calls": ([], ctypes.c_longlong),
    }  # fmt: skip
    for name, (argtypes, restype) in signatures.items():
        function = getattr(harness, name)  # AttributeError names a missing export
        function.argtypes = argtypes
        function.restype = restype
    return harness


def harness_error(harness: ctypes.CDLL) -> str:
    return (harness.bare_error() or b"").decode(errors="replace")


# ---------------------------------------------------------------- timing


def sync() -> None:
    """Waits for all work on the GPU: torch.cuda's streams and cudadev's
    (cudaDeviceSynchronize covers every stream of the device)."""
    torch.cuda.synchronize(CUDA_DEVICE)
    if torch._C._get_privateuse1_backend_name() == PLUGIN_DEVICE.split(":")[0]:
        torch.accelerator.synchronize(torch.device(PLUGIN_DEVICE).index)


def python_batch(function: Callable, args: tuple) -> Callable[[int], float]:
    """A batch timer for function(*args): µs per call."""

    def batch(n: int) -> float:
        iterations = range(n)
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            start = time.perf_counter_ns()
            for _ in iterations:
                function(*args)
            elapsed = time.perf_counter_ns() - start
        finally:
            if gc_was_enabled:
                gc.enable()
        return elapsed / n / 1e3

    return batch


@dataclasses.dataclass
class Case:
    """One kernel (tensor count): its compiled kernel, tensors and the paths."""

    count: int
    kernel: Any
    compiled: Any
    cuda_tensors: list
    plugin_tensors: list
    expected: torch.Tensor
    batches: dict[str, Callable[[int], float]] = dataclasses.field(default_factory=dict)
    checks: dict[str, Callable[[], None]] = dataclasses.field(default_factory=dict)
    samples: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    keep_alive: list = dataclasses.field(default_factory=list)


def check_output(out: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    got = out.cpu()
    if not torch.equal(got, expected):
        bad = (got != expected).nonzero().flatten()[:4].tolist()
        raise BenchError(f"{what} gave a wrong result (first bad indices {bad}: "
                         f"{got[bad].tolist()} instead of {expected[bad].tolist()})")  # fmt: skip


def checked(out: torch.Tensor, expected: torch.Tensor, launch_once: Callable[[], None], what: str):
    """A check: zero the output, launch once, synchronize, compare."""

    def check() -> None:
        out.copy_(torch.zeros(NUMEL))
        sync()
        launch_once()
        sync()
        check_output(out, expected, what)

    return check


def compile_case(count: int, with_plugin: bool = True) -> Case:
    """Tensors on torch.cuda (and cudadev), and the kernel compiled once by the JIT."""
    kernel = KERNELS[count]
    cuda_tensors, expected = make_tensors(count, f"cuda:{CUDA_DEVICE}")
    plugin_tensors = make_tensors(count, PLUGIN_DEVICE)[0] if with_plugin else []
    compiled = kernel.warmup(*kernel_args(cuda_tensors), grid=GRID)
    case = Case(count, kernel, compiled, cuda_tensors, plugin_tensors, expected)
    md = compiled.metadata
    case.info.update(kernel=md.name, signature=dict(compiled.src.signature),
                     packed_metadata=list(compiled.packed_metadata), cubin_bytes=len(compiled.asm["cubin"]))
    return case


def add_devbridge_path(case: Case, stack: dict) -> int:
    """(a): the same cubin loaded on cudadev:0 through devbridge's CUDA kernel
    runtime, devbridge.triton.Launcher called as Triton calls launchers.
    Returns devbridge's handle of the loaded kernel."""
    ck = case.compiled
    md = ck.metadata
    start = time.perf_counter_ns()
    loaded = stack["launch"].load_binary(ck.asm["cubin"], md.name, device=PLUGIN_DEVICE, runtime=stack["runtime"],
                                         shared=md.shared)  # fmt: skip
    load_ns = time.perf_counter_ns() - start
    enter, exit_ = empty_hooks()
    plugin_stream = stack["devbridge"].current_stream(PLUGIN_DEVICE)
    args = (*GRID, 1, 1, plugin_stream, loaded.function, ck.packed_metadata, None, enter, exit_,
            *kernel_args(case.plugin_tensors))  # fmt: skip
    start = time.perf_counter_ns()
    launcher = stack["Launcher"](ck.src, md)
    built_ns = time.perf_counter_ns() - start
    launcher(*args)
    first_ns = time.perf_counter_ns() - start - built_ns
    case.info.update(devbridge_module_load_ms=load_ns / 1e6, devbridge_in_process_construct_ms=built_ns / 1e6,
                     devbridge_in_process_first_call_ms=first_ns / 1e6)  # fmt: skip
    case.batches["a"] = python_batch(launcher, args)
    # The profile of (a): an empty grid runs every step of the launch (hooks,
    # handle and metadata, argument packing with the device checks) except
    # the kernel runtime's cuLaunchKernel.
    empty_grid_args = (0, *args[1:])
    case.batches["a0"] = python_batch(launcher, empty_grid_args)
    case.checks["a0"] = lambda: launcher(*empty_grid_args)
    case.checks["a"] = checked(case.plugin_tensors[-1], case.expected, lambda: launcher(*args), PATHS["a"])
    case.keep_alive.append(loaded)
    return loaded.function


def add_triton_paths(case: Case) -> None:
    """(b) and (b+md): Triton's own launcher on torch.cuda tensors. The first
    access to ck.run builds the launcher and loads the module."""
    ck = case.compiled
    cuda_stream = torch.cuda.current_stream(CUDA_DEVICE).cuda_stream
    enter, exit_ = empty_hooks()
    launcher = ck.run
    call_args = kernel_args(case.cuda_tensors)
    args = (*GRID, 1, 1, cuda_stream, ck.function, ck.packed_metadata, None, enter, exit_, *call_args)
    case.batches["b"] = python_batch(launcher, args)
    case.checks["b"] = checked(case.cuda_tensors[-1], case.expected, lambda: launcher(*args), PATHS["b"])
    jit_enter, jit_exit = jit_hooks()

    def run_with_metadata() -> None:  # CompiledKernel.run as JITFunction.run calls it after binding
        ck.run(GRID[0], 1, 1, cuda_stream, ck.function, ck.packed_metadata,
               ck.launch_metadata(GRID, cuda_stream, *call_args), jit_enter, jit_exit, *call_args)  # fmt: skip

    case.batches["b_md"] = python_batch(run_with_metadata, ())
    case.checks["b_md"] = checked(case.cuda_tensors[-1], case.expected, run_with_metadata, PATHS["b_md"])


def add_static_paths(case: Case, cubin_dir: pathlib.Path) -> None:
    """(c) and (c int): PyTorch's static launcher (Inductor's), with its own
    load of the same cubin, on torch.cuda tensors or their int addresses."""
    static = getattr(torch._C, "_StaticCudaLauncher", None)
    if static is None:
        case.skipped["c"] = case.skipped["c_int"] = f"torch {torch.__version__} has no torch._C._StaticCudaLauncher"
        return
    ck = case.compiled
    md = ck.metadata
    signature = ck.src.signature
    try:
        cubin_path = cubin_dir / f"{md.name}_{case.count}.cubin"
        cubin_path.write_bytes(ck.asm["cubin"])
        handles = static._load_kernel(str(cubin_path), md.name, md.shared, CUDA_DEVICE)
        # torch 2.11: (function, n_regs, n_spills); 2.13: (module, function, n_regs, n_spills)
        function = handles[1] if len(handles) == 4 else handles[0]
        arg_types = static_arg_types(signature)
        values = [value for _, value in runtime_args(signature, kernel_args(case.cuda_tensors))]
        cuda_stream = torch.cuda.current_stream(CUDA_DEVICE).cuda_stream
        args = (function, *GRID, 1, 1, md.num_warps, md.shared, arg_types, (*values, None, None), cuda_stream)
        ints = tuple(pointer_value(v) if isinstance(v, torch.Tensor) else v for v in values)
        args_int = (*args[:7], (*ints, None, None), cuda_stream)
    except Exception as error:  # reported as skipped rows, not fatal
        case.skipped["c"] = case.skipped["c_int"] = f"_StaticCudaLauncher failed: {error!r}"
        return
    case.info["static_arg_types"] = arg_types
    for key, key_args in (("c", args), ("c_int", args_int)):
        case.batches[key] = python_batch(static._launch_kernel, key_args)
        case.checks[key] = checked(case.cuda_tensors[-1], case.expected,
                                   lambda a=key_args: static._launch_kernel(*a), PATHS[key])  # fmt: skip


def add_bare_path(case: Case, harness: ctypes.CDLL, function: int) -> None:
    """(d): cuLaunchKernel in C on `function` (a CUfunction), torch.cuda tensors'
    addresses, the torch.cuda stream. The benchmark passes the CUfunction
    devbridge loaded for (a): it lives in device 0's primary context, which
    torch.cuda device 0 uses too, so a torch.cuda stream of device 0 is valid."""
    ck = case.compiled
    md = ck.metadata
    storage, params = bare_params(ck.src.signature, kernel_args(case.cuda_tensors))
    case.keep_alive += [storage, params]
    cuda_stream = torch.cuda.current_stream(CUDA_DEVICE).cuda_stream
    block_x = 32 * md.num_warps

    def bare_batch(n: int) -> float:
        ns = harness.bare_launch_ns(function, GRID[0], cuda_stream, params, n, block_x, md.shared)
        if ns < 0:
            raise BenchError(f"bare cuLaunchKernel: {harness_error(harness)}")
        return ns / 1e3

    case.batches["d"] = bare_batch
    case.checks["d"] = checked(case.cuda_tensors[-1], case.expected, lambda: bare_batch(1), PATHS["d"])


def add_jit_path(case: Case) -> None:
    """(jit): kernel[grid](...), the whole JIT front end, for scale."""
    kernel, tensors = case.kernel, case.cuda_tensors

    def jit_call() -> None:
        kernel[GRID](*tensors, NUMEL, BLOCK=BLOCK)

    case.batches["jit"] = python_batch(jit_call, ())
    case.checks["jit"] = checked(tensors[-1], case.expected, jit_call, PATHS["jit"])


def add_jit_devbridge_path(case: Case, stack: dict) -> None:
    """(jit dev): the same @triton.jit function through kernel[grid](...) on
    cudadev tensors with devbridge's driver active (compiled once for the
    plugin's target; devbridge's driver keeps its own JIT cache entry)."""
    kernel, tensors = case.kernel, case.plugin_tensors
    triton_face = stack["devbridge"].triton

    def jit_dev_call() -> None:
        kernel[GRID](*tensors, NUMEL, BLOCK=BLOCK)

    with triton_face.activate():
        jit_dev_call()  # compile + load outside the timings
        sync()
    timed = python_batch(jit_dev_call, ())

    def batch(n: int) -> float:
        with triton_face.activate():
            return timed(n)

    inner_check = checked(tensors[-1], case.expected, jit_dev_call, PATHS["jit_dev"])

    def check() -> None:
        with triton_face.activate():
            inner_check()

    case.batches["jit_dev"] = batch
    case.checks["jit_dev"] = check


def setup_case(count: int, stack: dict, harness: ctypes.CDLL | None, harness_problem: str | None,
               cubin_dir: pathlib.Path) -> Case:
    """Compile the kernel once with the JIT and build every path's batch timer."""
    case = compile_case(count)
    handle = add_devbridge_path(case, stack)
    add_triton_paths(case)
    add_static_paths(case, cubin_dir)
    if harness is None:
        case.skipped["d"] = harness_problem or "the C harness is not available"
    else:
        add_bare_path(case, harness, stack["devbridge"]._C.kernel_native_handles(handle)[1])
    add_jit_path(case)
    add_jit_devbridge_path(case, stack)
    return case


def verify_paths(cases: list[Case]) -> list[str]:
    """Runs every path once and compares its output; a wrong path is dropped."""
    failures = []
    for case in cases:
        for key in list(case.batches):
            try:
                case.checks[key]()
            except Exception as error:
                message = f"{case.count} tensors, {PATHS[key]}: {error}"
                failures.append(message)
                case.skipped[key] = f"wrong or failed launch: {error}"
                del case.batches[key]
    return failures


def run_timings(cases: list[Case], repeats: int, batch: int) -> None:
    for case in cases:  # warm-up: lazy module loading, caches, allocator pools
        for timer in case.batches.values():
            timer(min(batch, 200))
    sync()
    for _ in range(repeats):
        for case in cases:
            for key, timer in case.batches.items():
                sync()
                case.samples.setdefault(key, []).append(timer(batch))
    sync()  # surfaces an asynchronous launch error, if any


# ---------------------------------------------------------------- cold start


def time_ms(function: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter_ns()
    result = function()
    return result, (time.perf_counter_ns() - start) / 1e6


def cold_start_child(output: pathlib.Path) -> int:
    """In a fresh interpreter with an empty TRITON_CACHE_DIR: per kernel, the
    time from a new signature to its first launch, devbridge and Triton."""
    report: dict[str, Any] = {"kernels": {}}
    cache_dir = os.environ.get("TRITON_CACHE_DIR", "")
    report["triton_cache_dir_empty"] = bool(cache_dir) and not any(pathlib.Path(cache_dir).iterdir())
    try:
        stack = load_gpu_stack()
        use_side_stream()
        from triton.runtime import driver as triton_driver

        _, report["triton_driver_init_ms"] = time_ms(lambda: triton_driver.active.utils)
        active = triton_driver.active
        enter, exit_ = empty_hooks()
        for count in TENSOR_COUNTS:
            kernel = KERNELS[count]
            entry: dict[str, Any] = {}
            cuda_tensors, expected = make_tensors(count, f"cuda:{CUDA_DEVICE}")
            plugin_tensors, _ = make_tensors(count, PLUGIN_DEVICE)
            ck, entry["compile_ms"] = time_ms(lambda: kernel.warmup(*kernel_args(cuda_tensors), grid=GRID))
            if getattr(ck, "_run", None) is not None or getattr(ck, "module", None) is not None:
                raise BenchError("the JIT's warmup already loaded the kernel; the cold start cannot be split")
            md = ck.metadata
            # devbridge: module load (reported apart), then Launcher + first call.
            loaded, entry["devbridge_module_load_ms"] = time_ms(lambda: stack["launch"].load_binary(
                ck.asm["cubin"], md.name, device=PLUGIN_DEVICE, runtime=stack["runtime"], shared=md.shared))
            plugin_stream = stack["devbridge"].current_stream(PLUGIN_DEVICE)
            launcher, entry["devbridge_construct_ms"] = time_ms(lambda: stack["Launcher"](ck.src, md))
            _, entry["devbridge_first_call_ms"] = time_ms(lambda: launcher(
                *GRID, 1, 1, plugin_stream, loaded.function, ck.packed_metadata, None, enter, exit_,
                *kernel_args(plugin_tensors)))
            entry["devbridge_cold_ms"] = entry["devbridge_construct_ms"] + entry["devbridge_first_call_ms"]
            # Triton: first access to ck.run = _init_handles (launcher build + module load).
            parts = time_init_handles(active, ck)
            entry.update(parts)
            cuda_stream = torch.cuda.current_stream(CUDA_DEVICE).cuda_stream
            _, entry["triton_first_call_ms"] = time_ms(lambda: ck.run(
                *GRID, 1, 1, cuda_stream, ck.function, ck.packed_metadata, None, enter, exit_,
                *kernel_args(cuda_tensors)))
            entry["triton_cold_ms"] = entry["triton_init_handles_ms"] + entry["triton_first_call_ms"]
            if entry.get("triton_module_load_ms") is not None:
                entry["triton_cold_without_load_ms"] = entry["triton_cold_ms"] - entry["triton_module_load_ms"]
            sync()
            check_output(plugin_tensors[-1], expected, "devbridge's first launch (cold start)")
            check_output(cuda_tensors[-1], expected, "Triton's first launch (cold start)")
            report["kernels"][str(count)] = entry
    except Exception as error:
        report["error"] = f"{type(error).__name__}: {error}"
    output.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if "error" not in report else 1


def time_init_handles(active, ck) -> dict[str, Any]:
    """ck._init_handles() (via the ck.run property), split into the launcher
    build (driver.launcher_cls) and the module load (driver.utils.load_binary)
    by wrapping both on the active driver for the duration of the call."""
    parts: dict[str, Any] = {"triton_launcher_build_ms": None, "triton_module_load_ms": None}
    originals = {}

    def wrap(owner, attribute: str, key: str) -> None:
        original = getattr(owner, attribute)

        def timed(*args, **kwargs):
            result, parts[key] = time_ms(lambda: original(*args, **kwargs))
            return result

        try:
            setattr(owner, attribute, timed)
            originals[(id(owner), attribute)] = (owner, attribute, original)
        except (AttributeError, TypeError):
            pass  # cannot split: only the total is reported

    wrap(active, "launcher_cls", "triton_launcher_build_ms")
    wrap(active.utils, "load_binary", "triton_module_load_ms")
    try:
        _, parts["triton_init_handles_ms"] = time_ms(lambda: ck.run)
    finally:
        for owner, attribute, original in originals.values():
            setattr(owner, attribute, original)
    return parts


def run_cold_start(timeout_s: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="triton-launch-cold-") as scratch:
        cache = pathlib.Path(scratch) / "triton-cache"
        cache.mkdir()
        output = pathlib.Path(scratch) / "cold.json"
        env = dict(os.environ, TRITON_CACHE_DIR=str(cache), TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        command = [sys.executable, str(pathlib.Path(__file__).resolve()), "--cold-start-child", str(output)]
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"error": f"the cold-start interpreter ran past {timeout_s} s"}
        if not output.exists():
            tail = (done.stdout + done.stderr)[-2000:]
            return {"error": f"the cold-start interpreter exited {done.returncode} without a report:\n{tail}"}
        return json.loads(output.read_text())


# ---------------------------------------------------------------- rows


def tensors_label(count: int) -> str:
    return f"{count} tensor" + ("" if count == 1 else "s")


def row(name: str, value, unit: str, *, target: str | None = None, target_met: bool | None = None,
        **extra) -> dict:
    entry = {"name": name, "value": value, "unit": unit, "target": target, "target_met": target_met}
    entry.update(extra)
    return entry


def launch_rows(cases: list[Case]) -> list[dict]:
    rows = []
    for case in cases:
        best = {key: min(samples) for key, samples in case.samples.items() if samples}
        for key, label in PATHS.items():
            if key in best:
                samples = case.samples[key]
                rows.append(row(f"launch, {tensors_label(case.count)}: {label}", best[key], "us", group="launch",
                                tensors=case.count, path=key, median=statistics.median(samples),
                                samples=samples))  # fmt: skip
            else:
                rows.append(row(f"launch, {tensors_label(case.count)}: {label}", None, "us", group="launch",
                                tensors=case.count, path=key,
                                skipped=case.skipped.get(key, "not measured")))  # fmt: skip
        for ours, other, limit in (("a", "b", MAX_RATIO_VS_TRITON), ("a", "d", MAX_RATIO_VS_BARE),
                                   ("jit_dev", "jit", MAX_RATIO_JIT)):
            ratio = best[ours] / best[other] if ours in best and other in best else None
            rows.append(row(f"launch, {tensors_label(case.count)}: ratio {ours}/{other}", ratio, "ratio",
                            group="ratio", tensors=case.count, path=f"{ours}/{other}",
                            target=f"{ours} <= {limit:g} x {other}",
                            target_met=None if ratio is None else ratio <= limit))  # fmt: skip
    return rows


def cold_rows(cases: list[Case], cold: dict) -> list[dict]:
    rows = []
    kernels = cold.get("kernels", {})
    fields = [
        ("devbridge_cold_ms", "devbridge: Launcher(src, metadata) + first call"),
        ("devbridge_construct_ms", "devbridge: Launcher(src, metadata)"),
        ("devbridge_first_call_ms", "devbridge: first call"),
        ("devbridge_module_load_ms", "devbridge: module load (load_binary, not in the cold start)"),
        ("triton_cold_ms", "Triton: first ck.run access (_init_handles) + first call"),
        ("triton_launcher_build_ms", "Triton: launcher build (launcher_cls)"),
        ("triton_module_load_ms", "Triton: module load (utils.load_binary)"),
        ("triton_cold_without_load_ms", "Triton: cold start without the module load"),
        ("triton_first_call_ms", "Triton: first call"),
        ("compile_ms", "Triton JIT compile (not in either cold start)"),
    ]
    for count in TENSOR_COUNTS:
        entry = kernels.get(str(count), {})
        for key, label in fields:
            value = entry.get(key)
            extra: dict[str, Any] = {}
            if key == "devbridge_cold_ms":
                extra = {"target": f"<= {MAX_COLD_START_MS:g} ms",
                         "target_met": None if value is None else value <= MAX_COLD_START_MS}  # fmt: skip
            if value is None and "error" in cold:
                extra["skipped"] = cold["error"]
            rows.append(row(f"cold start, {tensors_label(count)}: {label}", value, "ms", group="cold start",
                            tensors=count, path=key, **extra))  # fmt: skip
    if cold.get("triton_driver_init_ms") is not None:
        rows.append(row("cold start: Triton driver init (cuda_utils build, once per process)",
                        cold["triton_driver_init_ms"], "ms", group="cold start", tensors=None,
                        path="triton_driver_init_ms"))
    for case in cases:  # the same numbers in the benchmark process, after other kernels
        if "devbridge_in_process_construct_ms" in case.info:
            value = case.info["devbridge_in_process_construct_ms"] + case.info["devbridge_in_process_first_call_ms"]
            rows.append(row(f"cold start, {tensors_label(case.count)}: devbridge in the benchmark process "
                            "(Launcher + first call)", value, "ms", group="cold start (in process)",
                            tensors=case.count, path="devbridge_in_process_cold_ms"))  # fmt: skip
    return rows


# ---------------------------------------------------------------- report


def fmt(value, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


COLD_COLUMNS = [
    ("devbridge_cold_ms", "devbridge cold start"),
    ("devbridge_construct_ms", "devbridge Launcher()"),
    ("devbridge_first_call_ms", "devbridge first call"),
    ("devbridge_module_load_ms", "devbridge module load"),
    ("triton_cold_ms", "Triton cold start"),
    ("triton_launcher_build_ms", "Triton launcher build"),
    ("triton_module_load_ms", "Triton module load"),
    ("triton_cold_without_load_ms", "Triton cold start without module load"),
    ("triton_first_call_ms", "Triton first call"),
    ("compile_ms", "JIT compile"),
]


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [
        "# Triton kernel launch: devbridge vs Triton, PyTorch's static launcher, bare cuLaunchKernel",
        "",
        f"- date: {meta['date']}",
        f"- machine: {meta['machine']} ({meta['cpu']}, {meta['logical_cpus']} logical CPUs; GPU {meta['gpu']})",
        f"- torch {meta['torch']}, triton {meta['triton']}, Python {meta['python']}, devbridge "
        f"{meta['devbridge']} commit {meta['commit']}",
        f"- host µs per launch, best of {meta['repeats']} batches of {meta['batch']} launches; one program of "
        f"{BLOCK} float32, {meta['num_warps']} warps; the same cubin on every path",
        "",
    ]
    launch = {(r["tensors"], r["path"]): r for r in rows if r["group"] in ("launch", "ratio")}
    keys = list(PATHS)
    header = "| tensors | " + " | ".join(SHORT[k] for k in keys) + " | a/b | a/d |"
    lines += [header, "| ---: | " + " | ".join("---:" for _ in keys) + " | ---: | ---: |"]
    for count in TENSOR_COUNTS:
        cells = [fmt(launch.get((count, k), {}).get("value")) for k in keys]
        ratios = [fmt(launch.get((count, f"a/{o}"), {}).get("value")) for o in ("b", "d")]
        lines.append(f"| {count} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    lines += ["", "Paths (µs per launch):", ""]
    lines += [f"- **{SHORT[k]}** {label[len(SHORT[k]) + 1:]}" for k, label in PATHS.items()]
    cold = {(r["tensors"], r["path"]): r for r in rows if r["group"] == "cold start"}
    lines += ["", "Cold start of a new signature, ms, in a fresh interpreter with an empty TRITON_CACHE_DIR "
              "(devbridge: `Launcher(src, metadata)` + first call; Triton: first `ck.run` access, i.e. "
              "`_init_handles`, + first call; module loads and the JIT compile are in neither):", "",
              "| tensors | " + " | ".join(label for _, label in COLD_COLUMNS) + " |",
              "| ---: | " + " | ".join("---:" for _ in COLD_COLUMNS) + " |"]  # fmt: skip
    for count in TENSOR_COUNTS:
        cells = [fmt(cold.get((count, key), {}).get("value"), 3) for key, _ in COLD_COLUMNS]
        lines.append(f"| {count} | " + " | ".join(cells) + " |")
    others = [r for r in rows if r["group"].startswith("cold start") and (r["tensors"], r["path"]) not in
              {(c, k) for c in TENSOR_COUNTS for k, _ in COLD_COLUMNS}]  # fmt: skip
    lines += [""] + [f"- {r['name']}: {fmt(r['value'], 3)} ms" for r in others]
    targets = [r for r in rows if r.get("target")]
    lines += ["", "Targets:", "", "| row | value | target | met |", "| --- | ---: | --- | --- |"]
    for r in targets:
        met = "n/a (not measured)" if r["target_met"] is None else ("met" if r["target_met"] else "NOT MET")
        lines.append(f"| {r['name']} | {fmt(r['value'], 3)} {r['unit']} | {r['target']} | {met} |")
    skipped = sorted({f"{r['name']}: {r['skipped']}" for r in rows if r.get("skipped")})
    if skipped or meta.get("problems"):
        lines += ["", "Not measured / problems:", ""]
        lines += [f"- {s}" for s in skipped] + [f"- {p}" for p in meta.get("problems", [])]
    return "\n".join(lines) + "\n"


def nan_if_none(value) -> float:
    return float("nan") if value is None else float(value)


def plot(rows: list[dict], meta: dict, path: pathlib.Path) -> str | None:
    """Grouped bars: µs per launch by tensor count and path; cold start beside it.
    Returns why no plot was written, or None."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        return f"matplotlib is not available ({error})"
    launch = {(r["tensors"], r["path"]): r["value"] for r in rows if r["group"] == "launch"}
    keys = [k for k in PATHS if any(launch.get((c, k)) is not None for c in TENSOR_COUNTS)]
    figure, (left, right) = plt.subplots(1, 2, figsize=(14, 5), gridspec_kw={"width_ratios": [2, 1]})
    width = 0.8 / max(1, len(keys))
    for i, key in enumerate(keys):
        xs = [c + (i - (len(keys) - 1) / 2) * width for c in range(len(TENSOR_COUNTS))]
        values = [nan_if_none(launch.get((count, key))) for count in TENSOR_COUNTS]
        bars = left.bar(xs, values, width, label=PATHS[key])
        left.bar_label(bars, labels=[fmt(launch.get((c, key)), 1) for c in TENSOR_COUNTS], fontsize=6)
    left.set_xticks(range(len(TENSOR_COUNTS)), [f"{c} tensor{'s' if c > 1 else ''}" for c in TENSOR_COUNTS])
    left.set_ylabel("host µs per launch (best batch)")
    left.set_title("Launch cost")
    left.legend(fontsize=7)
    cold = {(r["tensors"], r["path"]): r["value"] for r in rows if r["group"] == "cold start"}
    series = [("devbridge_cold_ms", "devbridge: Launcher + first call"),
              ("triton_cold_without_load_ms", "Triton: _init_handles + first call, without module load")]
    for i, (key, label) in enumerate(series):
        xs = [c + (i - 0.5) * 0.4 for c in range(len(TENSOR_COUNTS))]
        values = [nan_if_none(cold.get((count, key))) for count in TENSOR_COUNTS]
        bars = right.bar(xs, values, 0.4, label=label)
        right.bar_label(bars, labels=[fmt(cold.get((c, key)), 2) for c in TENSOR_COUNTS], fontsize=6)
    right.set_yscale("log")
    right.axhline(MAX_COLD_START_MS, color="gray", linestyle="--", linewidth=0.8)
    right.set_xticks(range(len(TENSOR_COUNTS)), [str(c) for c in TENSOR_COUNTS])
    right.set_xlabel("tensors")
    right.set_ylabel("ms (log)")
    right.set_title("Cold start of a new signature (module load excluded)")
    right.legend(fontsize=7)
    figure.suptitle(f"Triton launch on {meta['machine']} (torch {meta['torch']}, triton {meta['triton']}, "
                    f"commit {meta['commit']})", fontsize=9)  # fmt: skip
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return None


def write_results(rows: list[dict], meta: dict, results_dir: pathlib.Path) -> tuple[pathlib.Path, str]:
    results_dir.mkdir(parents=True, exist_ok=True)
    stem = results_dir / f"triton_launch_{re.sub(r'[^A-Za-z0-9_-]', '_', meta['machine'])}"
    report = markdown(rows, meta)
    stem.with_suffix(".md").write_text(report)
    stem.with_suffix(".json").write_text(json.dumps({**meta, "rows": rows}, indent=2) + "\n")
    why_not = plot(rows, meta, stem.with_suffix(".png"))
    if why_not:
        print(f"no plot: {why_not}")
    return stem, report


def metadata(args, cases: list[Case], gpu: str, devbridge_version: str, problems: list[str]) -> dict:
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": args.machine,
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "gpu": gpu,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "devbridge": devbridge_version,
        "commit": git_commit(),
        "repeats": args.repeats,
        "batch": args.batch,
        "numel": NUMEL,
        "block": BLOCK,
        "num_warps": cases[0].compiled.metadata.num_warps if cases else None,
        "kernels": {str(c.count): c.info for c in cases},
        "problems": problems,
    }


# ---------------------------------------------------------------- set-up


def gpu_problem() -> str | None:
    """Why the GPU benchmark cannot run here, or None."""
    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) is not a CUDA build"
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False: no NVIDIA GPU (or driver) on this machine"
    return None


def load_gpu_stack() -> dict:
    """Imports the plugin first (it claims PrivateUse1), then devbridge."""
    try:
        import torch_cudadev  # noqa: F401
    except ImportError as error:
        raise BenchError(f"torch_cudadev cannot be imported ({error}); install it with "
                         "pip install --no-build-isolation plugins/cudadev") from error  # fmt: skip
    import devbridge
    import devbridge.triton
    from devbridge import launch

    devbridge.install()
    return {
        "devbridge": devbridge,
        "launch": launch,
        "Launcher": devbridge.triton.Launcher,
        "runtime": launch.kernel_runtime("cuda"),
    }


def use_side_stream() -> int:
    """Makes a torch.cuda pool stream current on device 0 and returns it. Pool
    streams are non-blocking, like cudadev's own default stream, so no path
    pays the legacy default stream's implicit synchronization."""
    stream = torch.cuda.Stream(CUDA_DEVICE)
    torch.cuda.set_stream(stream)
    return stream.cuda_stream


def prepare_harness(build_dir: pathlib.Path) -> tuple[ctypes.CDLL | None, str | None]:
    try:
        harness = build_harness(build_dir)
    except BenchError as error:
        return None, str(error)
    if harness.bare_init() != 0:
        return None, f"the harness could not open the CUDA driver: {harness_error(harness)}"
    torch.cuda.init()
    if harness.bare_ensure_context(CUDA_DEVICE) < 0:
        return None, f"no CUDA context for the harness: {harness_error(harness)}"
    return harness, None


def print_summary(rows: list[dict]) -> None:
    met = [r for r in rows if r.get("target") and r["target_met"]]
    missed = [r for r in rows if r.get("target") and r["target_met"] is False]
    unknown = [r for r in rows if r.get("target") and r["target_met"] is None]
    print(f"targets: {len(met)} met, {len(missed)} not met, {len(unknown)} not measured")
    for r in missed:
        print(f"  NOT MET: {r['name']} = {fmt(r['value'], 3)} {r['unit']} (target {r['target']})")


def run_benchmark(args) -> int:
    problem = gpu_problem()
    if problem:
        print(f"triton_launch: cannot run: {problem}.\nThis benchmark needs an NVIDIA GPU with a CUDA build of "
              "torch, triton, devbridge and torch_cudadev. Use --self-check to validate the script without "
              "a GPU.", file=sys.stderr)  # fmt: skip
        return 2
    try:
        stack = load_gpu_stack()
    except BenchError as error:
        print(f"triton_launch: cannot run: {error}", file=sys.stderr)
        return 2
    problems: list[str] = []
    streams = {"cuda": hex(use_side_stream()), "cudadev": hex(stack["devbridge"].current_stream(PLUGIN_DEVICE))}
    with tempfile.TemporaryDirectory(prefix="triton-launch-") as scratch:
        scratch_dir = pathlib.Path(scratch)
        harness, harness_problem = prepare_harness(scratch_dir)
        if harness_problem:
            print(f"skipping (d): {harness_problem}")
        cases = [setup_case(count, stack, harness, harness_problem, scratch_dir) for count in TENSOR_COUNTS]
        for case in cases:
            for key, reason in case.skipped.items():
                print(f"skipping {SHORT[key]} for {case.count} tensors: {reason}")
        problems += verify_paths(cases)
        for failure in problems:
            print(f"WRONG RESULT, path dropped: {failure}")
        run_timings(cases, args.repeats, args.batch)
    cold = run_cold_start(args.cold_timeout)
    if "error" in cold:
        problems.append(f"cold start: {cold['error']}")
        print(f"cold start not measured: {cold['error']}")
    elif not cold.get("triton_cache_dir_empty"):
        problems.append("cold start: the cold-start interpreter's TRITON_CACHE_DIR was not empty")
    rows = launch_rows(cases) + cold_rows(cases, cold)
    meta = metadata(args, cases, torch.cuda.get_device_name(CUDA_DEVICE), stack["devbridge"].__version__,
                    problems)  # fmt: skip
    meta["streams"] = streams
    meta["cold_start"] = cold
    stem, report = write_results(rows, meta, args.results_dir)
    print(report)
    print(f"wrote {stem}.json, {stem}.md and {stem}.png")
    print_summary(rows)
    return 3 if problems else 0


# ---------------------------------------------------------------- self-check (no GPU)


class FakePointer:
    def __init__(self, address: int) -> None:
        self.address = address

    def data_ptr(self) -> int:
        return self.address


def aot_compile(count: int, arch: int = 90):
    """triton.compile with an explicit target: no GPU, no driver."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernel = KERNELS[count]
    names = kernel.arg_names
    signature = {name: "*fp32" for name in names[:count]}
    signature.update(n="i32", BLOCK="constexpr")
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(count + 1)}
    source = ASTSource(kernel, signature, constexprs={"BLOCK": BLOCK}, attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", arch, 32), options={"num_warps": 4})


def check_harness(build_dir: pathlib.Path) -> list[str]:
    failures = []
    harness = build_harness(build_dir)  # builds with -Wall -Wextra -Werror, resolves every export
    print("  harness: compiled with -Wall -Wextra -Werror; exports bare_init, bare_ensure_context, "
          "bare_launch_ns, bare_error, bare_use_fake_launch, bare_fake_calls")  # fmt: skip
    harness.bare_use_fake_launch()
    storage, params = bare_params({"x": "*fp32", "n": "i32", "B": "constexpr"}, (FakePointer(4096), 7, 256))
    ns = harness.bare_launch_ns(None, 1, None, params, 5000, 128, 0)
    calls = harness.bare_fake_calls()
    if ns < 0 or calls != 5000:
        failures.append(f"fake launch loop: {ns} ns, {calls} calls (expected >= 0 ns and 5000 calls)")
    else:
        print(f"  harness: the timing loop ran 5000 no-op launches, {ns:.2f} ns each")
    if harness.bare_launch_ns(None, 1, None, params, 0, 128, 0) >= 0:
        failures.append("bare_launch_ns accepted iters=0")
    real = harness.bare_init()
    print(f"  harness: bare_init() = {real} ({harness_error(harness) if real else 'libcuda.so.1 opened, cuInit done'})")
    return failures


def check_kernels() -> list[str]:
    """Compiles the three kernels for sm_90 without a GPU and checks that the
    argument layouts this script builds agree with devbridge's Launcher."""
    failures = []
    try:
        import devbridge.triton
    except Exception as error:  # not fatal: reported
        devbridge = None
        print(f"  devbridge not importable here ({error!r}): Launcher layout checks skipped")
    for count in TENSOR_COUNTS:
        ck = aot_compile(count)
        signature = ck.src.signature
        args = kernel_args([FakePointer(0x10000 * (i + 1)) for i in range(count)])
        want_types = "O" * count + "i" + "OO"
        got_types = static_arg_types(signature)
        if got_types != want_types:
            failures.append(f"{count} tensors: static arg types {got_types!r}, expected {want_types!r}")
        storage, _ = bare_params(signature, args)
        sizes = tuple(ctypes.sizeof(s) for s in storage)
        note = ""
        if devbridge is not None:
            launcher = devbridge.triton.Launcher(ck.src, ck.metadata)
            if tuple(launcher.param_sizes) != sizes:
                failures.append(f"{count} tensors: bare params {sizes} != devbridge param_sizes "
                                f"{tuple(launcher.param_sizes)}")  # fmt: skip
            if launcher.signature != ("*",) * count + ("i32",):
                failures.append(f"{count} tensors: devbridge signature {launcher.signature}")
            note = f", devbridge Launcher params {tuple(launcher.param_sizes)}"
        if not ck.asm["cubin"][:4] == b"\x7fELF":
            failures.append(f"{count} tensors: the cubin is not an ELF image")
        print(f"  {tensors_label(count):>10}: {ck.metadata.name} compiled for sm_90 ({len(ck.asm['cubin'])} B cubin), "
              f"packed {ck.packed_metadata}, static types {got_types!r}{note}")  # fmt: skip
    return failures


def check_report(out_dir: pathlib.Path) -> list[str]:
    """Writes the report files from made-up numbers and reads them back."""
    failures = []
    cases = []
    for i, count in enumerate(TENSOR_COUNTS):
        fake = dataclasses.make_dataclass("FakeCompiled", ["metadata"])(
            dataclasses.make_dataclass("FakeMd", ["num_warps"])(4))
        case = Case(count, None, fake, [], [], torch.zeros(1))
        for j, key in enumerate(PATHS):
            if key == "c_int":
                case.skipped[key] = "made up: skipped"
                continue
            case.samples[key] = [2.0 + i + j * 0.5, 2.1 + i + j * 0.5]
        case.info = {"devbridge_in_process_construct_ms": 0.05, "devbridge_in_process_first_call_ms": 0.02}
        cases.append(case)
    cold = {"triton_driver_init_ms": 300.0, "kernels": {
        str(c): {"devbridge_cold_ms": 0.1, "devbridge_construct_ms": 0.07, "devbridge_first_call_ms": 0.03,
                 "devbridge_module_load_ms": 0.5, "triton_cold_ms": 290.0, "triton_launcher_build_ms": 280.0,
                 "triton_module_load_ms": 0.6, "triton_cold_without_load_ms": 289.4, "triton_first_call_ms": 0.1,
                 "triton_init_handles_ms": 289.9, "compile_ms": 500.0} for c in TENSOR_COUNTS}}  # fmt: skip
    rows = launch_rows(cases) + cold_rows(cases, cold)
    args = argparse.Namespace(machine="self-check", repeats=2, batch=10)
    meta = metadata(args, cases, "none (self-check)", "n/a", [])
    stem, report = write_results(rows, meta, out_dir)
    payload = json.loads(stem.with_suffix(".json").read_text())
    for key in ("machine", "commit", "torch", "triton", "python", "rows"):
        if key not in payload:
            failures.append(f"the JSON lacks {key!r}")
    for entry in payload["rows"]:
        missing = [k for k in ("name", "value", "unit", "target", "target_met") if k not in entry]
        if missing:
            failures.append(f"row {entry.get('name')!r} lacks {missing}")
    targets = [r for r in payload["rows"] if r["target"]]
    # per tensor count: a/b, a/d, jit_dev/jit and the cold start
    if len(targets) != 4 * len(TENSOR_COUNTS):
        failures.append(f"{len(targets)} target rows, expected {4 * len(TENSOR_COUNTS)}")
    png = stem.with_suffix(".png")
    if png.exists() and png.read_bytes()[:4] != b"\x89PNG":
        failures.append("the plot is not a PNG")
    print(f"  report: {len(rows)} rows, {len(targets)} with targets; wrote {stem.name}.json/.md"
          f"{'/.png' if png.exists() else ' (no png)'} to a temporary directory; commit {payload['commit']}")
    return failures


def self_check() -> int:
    print("triton_launch self-check (no GPU needed)")
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="triton-launch-check-") as scratch:
        scratch_dir = pathlib.Path(scratch)
        for step in (lambda: check_harness(scratch_dir), check_kernels, lambda: check_report(scratch_dir)):
            try:
                failures += step()
            except Exception as error:
                failures.append(f"{type(error).__name__}: {error}")
    problem = gpu_problem()
    print(f"  GPU parts skipped: {problem or 'a GPU is present, but --self-check never launches'} "
          "(devbridge/Triton/static/bare launch timings, result checks, cold start)")
    for failure in failures:
        print(f"  FAIL: {failure}")
    print("self-check " + ("failed" if failures else "passed"))
    return 1 if failures else 0


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machine", default=socket.gethostname(),
                        help="name used in the result file names (default: host name)")  # fmt: skip
    parser.add_argument("--results-dir", type=pathlib.Path, default=RESULTS_DIR,
                        help="where the .json, .md and .png go (default: bench/results)")  # fmt: skip
    parser.add_argument("--repeats", type=int, default=21, help="batches per path; the best is reported")
    parser.add_argument("--batch", type=int, default=1000,
                        help="launches per batch (default 1000; on the H200, batches of 5000 and more "
                        "came out about 0.3 us slower per bare launch than 100-1000)")  # fmt: skip
    parser.add_argument("--cold-timeout", type=int, default=300, help="seconds for the cold-start interpreter")
    parser.add_argument("--self-check", action="store_true",
                        help="validate the script without a GPU (harness, kernels, report) and exit")  # fmt: skip
    parser.add_argument("--cold-start-child", type=pathlib.Path, metavar="REPORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.batch < 1:
        parser.error("--repeats and --batch must be positive")
    if args.cold_start_child is not None:
        return cold_start_child(args.cold_start_child)
    if args.self_check:
        return self_check()
    return run_benchmark(args)


if __name__ == "__main__":
    sys.exit(main())
