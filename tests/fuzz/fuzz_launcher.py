"""Fuzz target: devbridge's generic Triton launcher (devbridge.triton.Launcher:
src/python/py_launcher.cpp, src/python/py_args.cpp) called with random
argument tuples, on launchers built from real descriptors, launching on simdev.

    tests/fuzz/run.sh                                    # both targets; FUZZ_TARGET=launcher for this one
    python tests/fuzz/fuzz_launcher.py -max_total_time=60 [corpus_dir]   # atheris/libFuzzer
    python tests/fuzz/fuzz_launcher.py --replay FILE...  # replay inputs (crash artifacts), no engine
    python tests/fuzz/fuzz_launcher.py --write-seeds DIR # the seed corpus run.sh starts from
    pytest tests/python/test_fuzz_launcher_smoke.py      # a fixed corpus, in every CI run
                                                         # (through --smoke-replay and --leak-check)

The launchers (built once per process, always the same, in the same order, so
an input means the same call in every process):
  * from real Triton 3.7 compile results, `Launcher(ck.src, ck.metadata)` after
    `triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))`: an add
    kernel (pointers, i32, fp32, constexpr), one with every scalar type and a
    constexpr in the middle, one with a nested tuple argument, and one taking a
    host tensor descriptor (compiled for sm80: decomposed, no TMA);
  * from random Triton signatures (devbridge.launch.launcher, fixed seed):
    tuples, constexprs, 3.6/3.7 tensor descriptors, scratch metadata, and one
    with more than 64 parameters (the launcher's heap path).
Each is paired with simdev's `probe_args` kernel (tests/python/kernels/
simdev_launch_kernels.cc) loaded on simdev:0 or simdev:1.

Every input decodes (LauncherFuzzer.decode) into one launcher call: right or
wrong argument count, grid, stream, function handle, packed metadata, hooks,
and per argument a well-typed value or a random object (ints of any size,
floats incl. nan/inf/huge, str, bytes, nested lists/tuples, tensors of many
dtypes on simdev:0/simdev:1/cpu, objects whose data_ptr returns anything or
raises, duck-typed tensor descriptors with missing or odd fields, ...).
Past the end of the input every choice reads 0, which is always the valid one.

Every call must either return None or raise an exception with a message (any
type but SystemError); then:
  * nothing was launched when it raised (unless a live exit hook raised after
    the launch), and when it returned with a non-empty grid, probe_args saw
    exactly the launcher's parameter count and sizes;
  * `torch.accelerator.synchronize()` succeeds on both devices (a kernel
    failure would have to name the kernel);
  * no reference leaked: the refcount of every object the call was given (and
    of what their data_ptr/__index__/__float__ return) is unchanged once the
    launcher's packed-metadata cache is reset (sys.getrefcount);
  * no device memory leaked: simdev's allocated bytes on both devices are back
    at the baseline once the input's objects are gone (scratch included).
A violation raises `Violation` (an AssertionError), which libFuzzer reports.

Safety: probe_args writes up to 2*num_params+1 int64 through its FIRST
parameter and reads nothing else. So the argument holding parameter 0 is
always the real output tensor of the kernel's device, 2*max(num_params)+1
(at least 64) int64 long (as a view, its address or data_ptr(); as a tensor
descriptor, a descriptor whose base is it), unless the input picks a value
the launcher must refuse (a cpu tensor, the other device's tensor, a
data_ptr() that raises or returns a non-int or a host address, ...): never
None, 0, another int or a data_ptr() returning 0 there. Only probe_args
kernels are loaded, so a random function handle is one of them (or none);
a refused value that lives on the other device is that device's output
tensor, so the other device's probe_args cannot write anywhere else either.
Grids with more than MAX_PROGRAMS programs get a zero axis (they still pack
every argument, launch nothing).

Hostile inputs (`--hostile`, on by default in run.sh; FUZZ_LAUNCHER_HOSTILE=0
turns them off): objects that mutate the list or descriptor the launcher is
packing. They found two bugs (a NULL read, a use-after-free), fixed since;
tests/python/test_fuzz_launcher_smoke.py replays a minimal reproducer of each
(REGRESSIONS below). Hostile runs skip the refcount check (those objects drop
references on purpose).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import hashlib
import json
import math
import pathlib
import random
import struct
import sys
import warnings
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "python"))  # launch_support: the probe kernel library

import torch  # noqa: E402  (imports the PrivateUse1 plugin through autoload)

try:
    import triton
except ImportError:  # the fuzzer still runs, on the random-signature launchers only
    triton = None

try:
    import numpy
except ImportError:
    numpy = None

# An int (float) subclass from __index__ (__float__) is one of the odd values: expected, not news.
warnings.filterwarnings("ignore", message=r"__(index|float)__ returned non-(int|float)", category=DeprecationWarning)
warnings.filterwarnings("ignore", message=r".*requires_grad", category=UserWarning)  # a Parameter as a scalar

MAX_PROGRAMS = 64  # larger grids get a zero axis: probe_args is a host call per program
RANDOM_SIGNATURE_SEED = 20261130
RESET_PACKED = (1, 1, 0)  # what every launcher caches between inputs (refcount baseline)


class Violation(AssertionError):
    """The launcher broke its contract on one input."""


class FuzzError(Exception):
    """Raised on purpose by the fuzzer's own objects (hooks, data_ptr, __index__):
    the launcher propagates it or replaces it with its own error, both fine."""


# ---------------------------------------------------------------- real Triton kernels

SCALAR_TYPES = ["i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32", "fp64"]


def compile_triton_kernels() -> list[tuple[Any, tuple]]:
    """[(ck, packed_metadata)] of the real compiles (empty without Triton)."""
    if triton is None:
        return []
    # The kernels of tests/python/test_launch_triton_metadata.py, compiled the same way.
    from triton_aot_kernels import (ADD_SIGNATURE, HOST_DESC_SIGNATURE, KIND, SCALAR_SIGNATURE, SM80,
                                    TUPLE_CONSTANTS, TUPLE_SIGNATURE, add_kernel, compile_kernel, divisible,
                                    every_scalar_kernel, host_descriptor_kernel, tuple_kernel)

    compiled = [
        compile_kernel(add_kernel, ADD_SIGNATURE, {"BLOCK": 128}, divisible(0, 1, 2)),
        compile_kernel(every_scalar_kernel, SCALAR_SIGNATURE, {"KIND": KIND}, divisible(0), num_warps=1),
        compile_kernel(tuple_kernel, TUPLE_SIGNATURE, TUPLE_CONSTANTS, divisible(0), num_warps=1),
        compile_kernel(host_descriptor_kernel, HOST_DESC_SIGNATURE, {"BM": 16}, target=SM80),
    ]
    return [(ck, ck.packed_metadata) for ck in compiled]


# ---------------------------------------------------------------- random signatures

_RANDOM_SCALARS = SCALAR_TYPES + ["*fp32", "*i8", "*fp16", "constexpr"]


def _random_entry(rng: random.Random, depth: int, flags: int):
    roll = rng.random()
    if roll < 0.12 and depth < 2:
        return tuple(_random_entry(rng, depth + 1, flags) for _ in range(rng.randint(0, 3)))
    if roll < 0.2 and depth == 0:
        dims = ", ".join(str(rng.choice([8, 16, 32])) for _ in range(rng.randint(1, 5)))
        return f"tensordesc<{rng.choice(['fp16', 'fp32', 'i8'])}[{dims}]>"
    return rng.choice(_RANDOM_SCALARS)


def random_signatures() -> list[tuple[str, list, int, dict]]:
    """[(name, signature, tensordesc_flags, metadata)], from a fixed seed. The
    first non-constexpr entry of each is "*i64": probe_args's output."""
    rng = random.Random(RANDOM_SIGNATURE_SEED)
    out = []
    for index in range(3):
        flags = 1 if index == 1 else 2
        signature = ["constexpr"] * (index == 0) + ["*i64"]
        signature += [_random_entry(rng, 0, flags) for _ in range(rng.randint(3, 9))]
        metadata = [
            {"num_warps": 8, "global_scratch_size": 8, "global_scratch_align": 256},
            {"num_warps": 2, "profile_scratch_size": 16, "profile_scratch_align": 64, "launch_pdl": True},
            {"num_warps": 4, "shared": 1024, "launch_cooperative_grid": True},
        ][index]
        out.append((f"random_{index}", signature, flags, metadata))
    wide = ["*i64"] + [rng.choice(_RANDOM_SCALARS) for _ in range(76)]  # > 64 slots: heap path
    out.append(("wide", wide, 2, {"global_scratch_size": 16, "global_scratch_align": 16}))
    return out


# ---------------------------------------------------------------- decoding


class Reader:
    """Fuzz bytes -> choices; past the end every read is 0 (the valid choice)."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def byte(self) -> int:
        value = self._data[self._pos] if self._pos < len(self._data) else 0
        self._pos += 1
        return value

    def raw(self, nbytes: int, signed: bool = False) -> int:
        chunk = bytes(self.byte() for _ in range(nbytes))
        return int.from_bytes(chunk, "little", signed=signed)

    def below(self, n: int) -> int:
        return (self.byte() if n <= 256 else self.raw(2)) % n

    def pick(self, options):
        return options[self.below(len(options))]

    def odd(self, threshold: int) -> bool:
        """True (take the unusual path) when the byte is >= threshold: 0 is never odd."""
        return self.byte() >= threshold


@dataclasses.dataclass
class Target:
    name: str
    launcher: Any
    plan: tuple
    device: int
    packed: Any
    out_pos: int  # the top-level argument holding parameter 0 (probe_args's output)
    num_params: int  # flattened, scratch pair included


def text(value: str) -> str:
    """A string object of its own (literals and identifiers are interned, shared
    objects whose refcounts move with unrelated code): the refcount check can
    then watch every string a call is given."""
    return "".join(list(value)) if len(value) > 1 else value


VICTIM = object()  # decode: load a throw-away kernel for this input


def fresh(error: BaseException) -> BaseException:
    """A new exception like `error`: raising the stored one would attach a
    traceback to it (a cycle back to the raiser, and a refcount that moves)."""
    return type(error)(*error.args)


# Odd objects. Each returns a value it stores (the same object every time),
# so a reference the launcher fails to release shows on that object.


class DataPtr:
    def __init__(self, value):
        self.value = value

    def data_ptr(self):
        return self.value

    def __repr__(self):
        return f"DataPtr({self.value!r})"


class DataPtrRaises:
    def __init__(self, error: BaseException):
        self.error = error

    def data_ptr(self):
        raise fresh(self.error)

    def __repr__(self):
        return f"DataPtrRaises({self.error!r})"


class DataPtrNotCallable:
    data_ptr = 5


class DataPtrPropertyRaises:
    @property
    def data_ptr(self):
        raise FuzzError("the data_ptr property raised")


class IndexLike:
    def __init__(self, value):
        self.value = value

    def __index__(self):
        if isinstance(self.value, BaseException):
            raise fresh(self.value)
        return self.value

    def __repr__(self):
        return f"IndexLike({self.value!r})"


class FloatLike:
    def __init__(self, value):
        self.value = value

    def __float__(self):
        if isinstance(self.value, BaseException):
            raise fresh(self.value)
        return self.value

    def __repr__(self):
        return f"FloatLike({self.value!r})"


class BadRepr:
    """Neither str nor repr works: the launcher's messages must cope."""

    def __repr__(self):
        raise FuzzError("repr raised")

    __str__ = __repr__


class IntSub(int):
    pass


class FloatSub(float):
    pass


class Opaque:
    __slots__ = ()


class DuckDesc:
    """A TensorDescriptor look-alike; fields are set (or left missing) by the decoder."""

    def __repr__(self):
        return f"DuckDesc({sorted(vars(self))})"


class Counting:
    def __init__(self):
        self.calls = 0

    def __call__(self, metadata):
        self.calls += 1


class Raising:
    def __init__(self, where: str):
        self.where = where

    def __call__(self, metadata):
        raise FuzzError(f"the {self.where} hook raised")


class ListMutator:
    """An enter hook that empties / grows every list argument before packing
    (safe: the launcher checks sizes after the enter hook)."""

    def __init__(self, args: list, grow: bool):
        self.args, self.grow = args, grow
        self.removed: list = []  # keeps what it took out: refcounts stay comparable

    def __call__(self, metadata):
        for value in self.args:
            lists = [value] if isinstance(value, list) else []
            if isinstance(value, DuckDesc):
                lists += [seq for seq in (getattr(value, "shape", None), getattr(value, "strides", None))
                          if isinstance(seq, list)]
            for seq in lists:
                if self.grow:
                    seq.append(0)
                else:
                    self.removed.extend(seq)
                    seq.clear()


class Reentrant:
    """An enter hook that launches the same launcher with the same arguments first."""

    def __init__(self, launcher, positional: list):
        self.launcher, self.positional = launcher, positional

    def __call__(self, metadata):
        nested = list(self.positional)
        nested[7] = nested[8] = None
        self.launcher(*nested)


class Unloading:
    """An enter hook that unloads the kernel being launched (a throw-away one)."""

    def __init__(self, handle: int):
        self.handle = handle

    def __call__(self, metadata):
        from devbridge import launch

        launch.unload(self.handle)


# Hostile objects (--hostile): they mutate the container the launcher is
# packing. These are the known bugs; see REGRESSIONS.


class ClearingDataPtr:
    def __init__(self, container: list, value: int):
        self.container, self.value = container, value

    def data_ptr(self):
        self.container.clear()
        return self.value


class ClearingIndex:
    def __init__(self, container: list):
        self.container = container

    def __index__(self):
        self.container.clear()
        return 1


class ShapeSwapper:
    """round_f32_to_tf32 whose truth test replaces the descriptor's shape entries."""

    def __init__(self, desc):
        self.desc = desc
        self.junk = None

    def __bool__(self):
        shape = getattr(self.desc, "shape", None)
        if isinstance(shape, list):
            for i in range(len(shape)):
                shape[i] = int(str(7 + i))
        self.junk = [int(str(i) + "123") for i in range(64)]  # reuse the freed blocks
        return True


U64 = (1 << 64) - 1
INT_LIMITS = {2: (0, 1), 3: (-(1 << 7), (1 << 7) - 1), 4: (-(1 << 15), (1 << 15) - 1),
              5: (-(1 << 31), (1 << 31) - 1), 6: (-(1 << 63), (1 << 63) - 1), 7: (0, 1), 8: (0, 255),
              9: (0, 65535), 10: (0, (1 << 32) - 1), 11: (0, U64)}  # fmt: skip
FLOAT_MAX = {12: 65504.0, 13: 3.4028234663852886e38, 14: 3.4028234663852886e38, 15: 1.7976931348623157e308}

GRID_SPECIALS = [0, -1, (1 << 31) - 1, 1 << 31, -(1 << 31), (1 << 32) + 1, 1 << 63, 1 << 64, -(1 << 80), 1.0,
                 "1", None, True, False, 2.5, 1j, IndexLike(2), IntSub(2), 10**30]  # fmt: skip
BIG_INTS = [1 << 7, 1 << 8, 1 << 15, 1 << 16, (1 << 31) - 1, 1 << 31, -(1 << 31), -(1 << 31) - 1, 1 << 32,
            (1 << 32) - 1, (1 << 63) - 1, 1 << 63, -(1 << 63), -(1 << 63) - 1, U64, 1 << 64, 1 << 100,
            -(1 << 100), 10**400]  # fmt: skip
FLOATS = [0.0, -0.0, math.nan, math.inf, -math.inf, 1e39, -1e39, 65504.0, 65520.0, 65519.0, 1e308, 5e-324,
          3.4028234663852886e38, 3.5e38, 1 / 3, -2.5, 2.0**-24, -1e-40]  # fmt: skip
STRINGS = ["", "1", "nan", "zero", "x" * 200, "\udcff", "é"]


class _Lazy:
    """A message part computed only when a violation is reported (repr of tensors copies them)."""

    def __init__(self, make):
        self.make = make

    def __str__(self):
        return self.make()

    def __format__(self, spec):
        return format(self.make(), spec)


class LauncherFuzzer:
    """Builds the launchers once; `one_input` decodes and checks one call."""

    def __init__(self, hostile: bool = False) -> None:
        import devbridge
        import devbridge.triton
        import launch_support
        from devbridge import launch
        from devbridge.triton._describe import describe

        if devbridge.plugin_name() != "simdev":
            raise RuntimeError("the launcher fuzzer needs the torch_simdev plugin (pip install "
                               "--no-build-isolation plugins/simdev)")
        self.hostile = hostile
        self._support = launch_support
        self._launch = launch
        self.devices = (0, 1)
        self.kernels = {d: launch_support.load("probe_args", f"simdev:{d}") for d in self.devices}
        victim = launch_support.load("probe_args", "simdev:0")
        launch.unload(victim.function)
        self.unloaded_handle = victim.function
        self.side = {d: torch.Stream(device=f"simdev:{d}") for d in self.devices}
        self.hook_chain = triton.knobs.HookChain if triton is not None else None

        targets: list[tuple[str, Any, tuple, Any]] = []  # name, launcher, plan, packed
        for ck, packed in compile_triton_kernels():
            launcher = devbridge.triton.Launcher(ck.src, ck.metadata)
            plan = describe(ck.src, ck.metadata)[1]
            targets.append((ck.metadata.name, launcher, plan, packed))
        for name, signature, flags, metadata in random_signatures():
            launcher = launch.launcher(signature, name=name, tensordesc_flags=flags, **metadata)
            targets.append((name, launcher, launch.plan(signature, tensordesc_flags=flags), (4, 1, 0)))
        self.targets = []
        for name, launcher, plan, packed in targets:
            out_pos = next(i for i, node in enumerate(plan) if node is not None)
            for device in self.devices:
                self.targets.append(Target(f"{name}@simdev:{device}", launcher, plan, device, packed, out_pos,
                                           len(launcher.param_sizes)))
        words = max(64, max(2 * t.num_params + 1 for t in self.targets))
        self.out = {d: torch.zeros(words, dtype=torch.int64, device=f"simdev:{d}") for d in self.devices}
        self._build_pools()
        self.outcomes: dict[str, int] = {}
        self.inputs = 0
        self.last_message = ""
        self.sync()
        for target in self.targets:
            self._reset(target)
        gc.collect()
        self.baseline = self.memory()

    # ------------------------------------------------------------ pools

    def _build_pools(self) -> None:
        self.pool: dict[int, list] = {}
        for d in self.devices:
            device = f"simdev:{d}"
            tensors = [torch.zeros(16, 16, dtype=torch.float32, device=device),
                       torch.zeros(8, dtype=torch.float16, device=device),
                       torch.zeros(8, dtype=torch.bfloat16, device=device),
                       torch.zeros(8, dtype=torch.int64, device=device),
                       torch.zeros(5, dtype=torch.int8, device=device),
                       torch.zeros(3, dtype=torch.uint8, device=device),
                       torch.zeros(4, dtype=torch.bool, device=device),
                       torch.zeros(0, dtype=torch.float32, device=device),
                       torch.zeros(4, 4, device=device).t(),
                       torch.arange(10, dtype=torch.float32, device=device)[3:],
                       torch.tensor(3, dtype=torch.int32, device=device),
                       torch.nn.Parameter(torch.zeros(4, device=device))]  # fmt: skip
            for dtype in (torch.complex64, torch.float8_e4m3fn, torch.float64):
                try:
                    tensors.append(torch.zeros(4, dtype=dtype, device=device))
                except Exception:  # noqa: BLE001 - a dtype simdev lacks
                    pass
            self.pool[d] = tensors
        self.cpu_pool = [torch.zeros(4), torch.tensor(7), torch.zeros(2, 2, dtype=torch.int64)]
        try:
            self.cpu_pool.append(torch.zeros(4).to_sparse())
        except Exception:  # noqa: BLE001
            pass
        try:
            self.cpu_pool.append(torch.empty(4, device="meta"))
        except Exception:  # noqa: BLE001
            pass
        self.descs = {}
        if triton is not None:
            from triton.tools.tensor_descriptor import TensorDescriptor

            import inspect

            # Triton 3.6's TensorDescriptor has no round_f32_to_tf32 (3.7 added it).
            extra = ({"round_f32_to_tf32": True}
                     if "round_f32_to_tf32" in inspect.signature(TensorDescriptor).parameters else {})
            self.descs = {d: [TensorDescriptor(self.pool[d][0], [16, 16], [16, 1], [16, 16]),
                              TensorDescriptor(self.pool[d][0], [8, 16], [16, 1], [8, 16], padding=text("nan"),
                                               **extra)]
                          for d in self.devices}  # fmt: skip

    def refused_pointer(self, r: Reader, device: int):
        """A value the launcher must refuse for a pointer parameter of a kernel
        on `device`, safe at parameter 0: never launched with, except by the
        other device's probe_args (a random function handle), and what is on
        the other device is that device's output tensor."""
        other = 1 - device
        host = self.cpu_pool[0]
        options = [
            lambda: self.cpu_pool[0], lambda: self.out[other], lambda: text("out"), lambda: 1.5, lambda: Opaque(),
            lambda: DataPtr(text("0x1000")), lambda: DataPtr(1.5), lambda: DataPtr(None), lambda: DataPtr(-1),
            lambda: DataPtr(1 << 64), lambda: DataPtr(1 << 200), lambda: DataPtr(True),
            lambda: DataPtr(host.data_ptr()), lambda: DataPtr(self.out[other].data_ptr()),
            lambda: DataPtr(U64), lambda: DataPtrRaises(FuzzError("data_ptr raised")),
            lambda: DataPtrRaises(AttributeError("inner attribute error")), lambda: DataPtrNotCallable(),
            lambda: DataPtrPropertyRaises(), lambda: -1, lambda: 1 << 64, lambda: -(1 << 70),
            lambda: [self.out[device]], lambda: (self.out[device],), lambda: b"\0" * 8, lambda: 1j,
            lambda: BadRepr(), lambda: self.out[other].view(torch.float64), lambda: torch.zeros(64, dtype=torch.int64),
        ]
        return r.pick(options)()

    def output_argument(self, r: Reader, node, device: int, odd: bool):
        """The value for the argument holding probe_args's output."""
        out = self.out[device]
        if isinstance(node, tuple) and node and node[0] == "tensordesc":
            desc = self.duck_desc(r, node, device, base_ok=False)
            if odd and r.below(4) == 0:
                if hasattr(desc, "base"):
                    del desc.base
            else:
                desc.base = self.refused_pointer(r, device) if odd else out
            return desc
        if odd:
            return self.refused_pointer(r, device)
        return r.pick([lambda: out, lambda: out, lambda: out.view(torch.float32), lambda: out.data_ptr(),
                       lambda: DataPtr(out.data_ptr()), lambda: out.view(torch.uint8)])()

    # ------------------------------------------------------------ values

    def int_value(self, r: Reader, low: int, high: int):
        b = r.byte()
        if b < 240:
            candidates = [1, 0, low, high, low + 1, high - 1, (low + high) // 2, -1 if low < 0 else high // 3]
            value = candidates[b % len(candidates)]
        else:
            value = low + r.raw(8) % (high - low + 1)
        wrap = r.byte()
        if wrap >= 248:
            return IndexLike(value)
        if wrap >= 244 and numpy is not None and -(1 << 63) <= value < (1 << 63):
            return numpy.int64(value)
        if wrap >= 240 and value in (0, 1):
            return bool(value)
        return value

    def float_value(self, r: Reader, limit: float):
        b = r.byte()
        if b < 240:
            candidates = [1.0, 0.0, -0.0, 1 / 3, -2.5, math.nan, math.inf, -math.inf, limit, -limit, 5e-324,
                          1e-8, 3, 2.0**-24]  # fmt: skip
            value = candidates[b % len(candidates)]
        else:
            value = struct.unpack("<d", r.raw(8).to_bytes(8, "little"))[0]
            if math.isfinite(value) and abs(value) > limit:
                value = math.copysign(limit, value)
        wrap = r.byte()
        if wrap >= 248:
            return FloatLike(float(value))
        if wrap >= 244 and numpy is not None:
            return numpy.float32(value) if limit < 1e300 else numpy.float64(value)
        if wrap >= 240:
            return FloatSub(value)
        return value

    def pointer_value(self, r: Reader, device: int):
        pool = self.pool[device]
        return r.pick([
            lambda: r.pick(pool), lambda: None, lambda: r.pick(pool).data_ptr(), lambda: DataPtr(pool[0].data_ptr()),
            lambda: DataPtr(0), lambda: 0, lambda: self.out[device], lambda: pool[-1], lambda: DataPtr(IntSub(0)),
            lambda: torch.empty(r.below(40), device=f"simdev:{device}"),
        ])()  # fmt: skip

    def well_typed(self, r: Reader, node, device: int):
        """A value of the kind the parameter takes (mostly in range)."""
        if node is None:  # constexpr: the launcher drops whatever is passed
            return r.pick([None, 1, 128, 16, True, text("constexpr")]) if not r.odd(224) else self.zoo(r, 1)
        if isinstance(node, int):
            if node == 1:
                return self.pointer_value(r, device)
            if node in INT_LIMITS:
                if node in (2, 7) and r.byte() < 128:
                    return r.pick([True, False])
                return self.int_value(r, *INT_LIMITS[node])
            return self.float_value(r, FLOAT_MAX[node])
        if node and node[0] == "tensordesc":
            return self.tensor_desc(r, node, device)
        values = []
        container: list = values
        for child in node:
            values.append(self.zoo(r, 1) if r.odd(244) else self.well_typed(r, child, device))
        as_list = r.byte() >= 208
        if self.hostile and as_list and len(values) >= 2 and r.odd(128):
            # Known bug 1: an element's data_ptr()/__index__ empties the list mid-pack.
            i = r.below(len(values) - 1)
            values[i] = (ClearingDataPtr(container, self.pool[device][0].data_ptr()) if node[i] == 1
                         else ClearingIndex(container))
        return values if as_list else tuple(values)

    def tensor_desc(self, r: Reader, node, device: int):
        if self.descs and r.byte() < 64 and node[1] == 2:
            return r.pick(self.descs[device])  # a real triton TensorDescriptor (2-d)
        return self.duck_desc(r, node, device, base_ok=True)

    def duck_desc(self, r: Reader, node, device: int, base_ok: bool):
        ndim = node[1]
        desc = DuckDesc()
        if base_ok:
            b = r.byte()
            if b < 232:
                desc.base = self.pointer_value(r, device)
            elif b < 248:
                desc.base = self.zoo(r, 1)
        for field in ("shape", "strides"):
            b = r.byte()
            if b >= 248:
                continue  # missing
            if b >= 236:
                setattr(desc, field, self.zoo(r, 1))
                continue
            length = ndim if b < 224 else r.pick([0, ndim - 1, ndim + 1, 6])
            items = [self.int_value(r, -(1 << 31), (1 << 31) - 1) if not r.odd(240) else self.zoo(r, 2)
                     for _ in range(max(length, 0))]
            setattr(desc, field, items if r.byte() < 192 else tuple(items))
        b = r.byte()
        if b < 236:
            desc.padding = text(r.pick(["zero", "nan", "zero"]))
        elif b < 248:
            desc.padding = self.zoo(r, 1)
        b = r.byte()
        if b < 224:
            desc.round_f32_to_tf32 = r.pick([False, True])
        elif b < 240:
            desc.round_f32_to_tf32 = self.zoo(r, 1)
        elif self.hostile and b >= 252:
            desc.round_f32_to_tf32 = ShapeSwapper(desc)  # known bug 2
        if self.hostile and r.odd(252):
            shape = getattr(desc, "shape", None)
            if isinstance(shape, list) and shape:
                shape[0] = ClearingIndex(shape)  # known bug 2, through __index__
        return desc

    def zoo(self, r: Reader, depth: int):
        """Any Python object."""
        kind = r.below(30)
        d = r.below(2)
        if kind == 0:
            return r.pick([0, 1, -1, 2, 7, -7, 255, 256, -129])
        if kind == 1:
            return r.pick(BIG_INTS)
        if kind == 2:
            return r.raw(r.below(17), signed=True)
        if kind == 3:
            return r.pick(FLOATS)
        if kind == 4:
            return struct.unpack("<d", r.raw(8).to_bytes(8, "little"))[0]
        if kind == 5:
            return r.pick([True, False])
        if kind == 6:
            return None
        if kind == 7:
            return text(r.pick(STRINGS))
        if kind == 8:
            return r.pick([b"", b"\x00" * 8, bytearray(b"ab"), memoryview(b"xyz")])
        if kind in (9, 10):
            items = [self.zoo(r, depth + 1) for _ in range(r.below(5))] if depth < 3 else []
            return items if kind == 9 else tuple(items)
        if kind == 11:
            return r.pick([{}, {"a": 1}, {1, 2}, frozenset()])
        if kind == 12:
            return r.pick([1j, complex(math.nan, 1)])
        if kind == 13:
            return r.pick(self.pool[d])
        if kind == 14:
            return r.pick(self.cpu_pool)
        if kind == 15:
            return torch.zeros(r.below(70), dtype=r.pick([torch.float32, torch.int64, torch.uint8]),
                               device=f"simdev:{d}")
        if kind == 16:
            value = r.pick([lambda: self.pool[d][0].data_ptr(), lambda: 0, lambda: U64, lambda: 1 << 64,
                            lambda: -5, lambda: text("77"), lambda: 2.0, lambda: None, lambda: IntSub(8),
                            lambda: IndexLike(8), lambda: self.cpu_pool[0].data_ptr()])()
            return DataPtr(value)
        if kind == 17:
            return r.pick([lambda: DataPtrRaises(FuzzError("data_ptr raised")),
                           lambda: DataPtrRaises(AttributeError("inner")), lambda: DataPtrNotCallable(),
                           lambda: DataPtrPropertyRaises(), lambda: DataPtrRaises(MemoryError("fake"))])()
        if kind == 18:
            return IndexLike(r.pick([lambda: 5, lambda: -1, lambda: 1 << 64, lambda: 1 << 200, lambda: 2.5,
                                     lambda: text("12"), lambda: FuzzError("__index__ raised"), lambda: True,
                                     lambda: IntSub(3)])())
        if kind == 19:
            return FloatLike(r.pick([lambda: 1.5, lambda: math.nan, lambda: 1e300, lambda: 3,
                                     lambda: FuzzError("__float__ raised"), lambda: text("x1"),
                                     lambda: FloatSub(2.0)])())
        if kind == 20:
            return r.pick([Opaque, object, BadRepr])()
        if kind == 21:
            node = ("tensordesc", r.pick([1, 2, 3, 5]), r.pick([1, 2]))
            return self.duck_desc(r, node, d, base_ok=True)
        if kind == 22 and self.descs:
            return r.pick(self.descs[d])
        if kind == 23 and numpy is not None:
            return r.pick([numpy.int64(3), numpy.float32(1.5), numpy.zeros(3), numpy.uint64(U64),
                           numpy.bool_(True)])
        if kind == 24:
            return r.pick([IntSub(1 << 40), FloatSub(2.5), IntSub(-1)])
        if kind == 25:
            return r.pick([torch.Tensor, torch, len, Counting(), print])
        if kind == 26:
            return torch.nn.Parameter(torch.zeros(2, device=f"simdev:{d}"))
        if kind == 27:
            return self.refused_pointer(r, d)
        if kind == 28:
            return torch.tensor(r.pick([3, 1 << 40, -2]), device=f"simdev:{d}")  # has __index__
        return r.pick([float("nan"), 2**53 + 1, -0.0])

    # ------------------------------------------------------------ the call

    def grid_value(self, r: Reader):
        b = r.byte()
        if b < 236:
            return [1, 1, 2, 3, 1, 4, 1, 2][b % 8]
        if b < 252:
            return GRID_SPECIALS[b % len(GRID_SPECIALS)]
        return r.raw(8, signed=True)

    def hook(self, r: Reader, where: str, target: Target, positional: list, args: list):
        if r.byte() < 200:
            return None
        options = [lambda: self.hook_chain() if self.hook_chain else None, lambda: Counting(),
                   lambda: Raising(where), lambda: 5, lambda: (lambda: None), lambda: (lambda md: object())]
        if self.hook_chain is not None:
            options += [lambda: self._chain(Counting()), lambda: self._chain(Raising(where))]
        if where == "enter":
            options += [lambda: ListMutator(args, grow=False), lambda: ListMutator(args, grow=True),
                        lambda: Reentrant(target.launcher, positional)]
        return r.pick(options)()

    def _chain(self, hook):
        chain = self.hook_chain()
        chain.add(hook)
        return chain

    def decode(self, data: bytes) -> dict:
        """One launcher call: the target, the positional arguments, and what the checks need."""
        r = Reader(data)
        target = self.targets[r.below(len(self.targets))]
        device = target.device
        n = len(target.plan)
        count, fixed = n, 9
        c = r.byte()
        if c >= 240:
            count = max(0, n + r.pick([-1, 1, -n, 2, 9, -2]))
            if count == n:
                count = n + 1
        if c == 255 and r.odd(128):
            fixed = r.below(9)
        grid = [self.grid_value(r) for _ in range(3)]
        ints = [int(g) for g in grid if isinstance(g, int)]  # bool and int subclasses too: PyLong_Check
        if len(ints) == 3 and all(0 <= g <= 0x7FFFFFFF for g in ints) and math.prod(ints) > MAX_PROGRAMS:
            grid[2] = 0  # packs everything, launches nothing
        stream_choice = r.byte()
        stream = self._support.stream_of(f"simdev:{device}")
        if stream_choice >= 240:
            stream = r.pick([lambda: self._support.stream_of(f"simdev:{1 - device}"),
                             lambda: self.side[device].native_handle, lambda: self.side[1 - device].native_handle,
                             lambda: 0, lambda: None, lambda: -1, lambda: 1 << 64, lambda: text("s0"), lambda: 1.5,
                             lambda: r.raw(8), lambda: r.below(32), lambda: IndexLike(stream)])()  # fmt: skip
        function = self.kernels[device].function
        victim = None
        f = r.byte()
        if f >= 240:
            function = r.pick([lambda: self.kernels[1 - device].function, lambda: 0, lambda: None, lambda: -1,
                               lambda: 1 << 64, lambda: text("f0"), lambda: 1.5, lambda: r.below(16), lambda: r.raw(8),
                               lambda: self.unloaded_handle, lambda: VICTIM])()  # fmt: skip
            if function is VICTIM:
                function = text("victim")
            if isinstance(function, str) and function == "victim" and r.odd(128):
                victim = self._support.load("probe_args", f"simdev:{device}")
                function = victim.function
        packed = target.packed
        if r.byte() >= 240:
            packed = r.pick([lambda: tuple(list(target.packed)), lambda: (1, 1, 0), lambda: (0, 0, 0),
                             lambda: (8, 2, 1024), lambda: (4, 0x7FFFFFFF, 0), lambda: (4, 1, -1), lambda: (4, 1),
                             lambda: (4, 1, 0, 0), lambda: [4, 1, 0], lambda: None, lambda: (4, text("10"), 0),
                             lambda: (1 << 31, 1, 0), lambda: (4, 1, 1 << 63), lambda: (IndexLike(4), 1, 0),
                             lambda: (1.0, 1, 0), lambda: (), lambda: text("4,1,0"), lambda: (True, True, False),
                             lambda: (0x7FFFFFFF, 1, 0x7FFFFFFF)])()  # fmt: skip
        launch_metadata = r.pick([None, None, {"name": target.name}, text("md"), 5, Opaque()])

        mode = r.byte()
        corrupt_one = r.below(max(count, 1)) if 112 <= mode < 200 else -1
        args: list = []
        for i in range(count):
            node = target.plan[i] if i < n else None
            if mode < 112:
                odd = False
            elif mode < 200:
                odd = i == corrupt_one
            else:
                odd = r.byte() >= 128
            if i == target.out_pos:
                args.append(self.output_argument(r, node, device, odd))
            elif odd or i >= n:
                args.append(self.zoo(r, 0))
            else:
                args.append(self.well_typed(r, node, device))
        positional: list = [*grid, stream, function, packed, launch_metadata, None, None, *args]
        enter = self.hook(r, "enter", target, positional, args)
        exit_ = self.hook(r, "exit", target, positional, args)
        if victim is not None and r.odd(128):
            enter = Unloading(victim.function)
        positional[7], positional[8] = enter, exit_
        keywords = {"stream": stream} if r.odd(252) else {}
        return {"target": target, "positional": positional[:fixed] if fixed < 9 else positional,
                "built": positional, "keywords": keywords, "grid": grid, "victim": victim}

    # ------------------------------------------------------------ checks

    def sync(self) -> None:
        for d in self.devices:
            try:
                torch.accelerator.synchronize(d)
            except RuntimeError as error:
                if "probe_args" not in str(error):
                    raise Violation(f"synchronize(simdev:{d}) failed without naming the kernel: {error}") from None

    def memory(self) -> tuple[int, ...]:
        return tuple(torch.simdev.memory_allocated(d) for d in self.devices)

    def _reset(self, target: Target) -> None:
        """Makes `target.launcher` cache RESET_PACKED (and the real kernel) again."""
        try:
            target.launcher(0, 0, 0, self._support.stream_of(f"simdev:{target.device}"),
                            self.kernels[target.device].function, RESET_PACKED, None, None, None,
                            *([None] * len(target.plan)))
        except SystemError as error:
            raise Violation(f"the reset call raised SystemError: {error}") from None
        except Exception:  # noqa: BLE001 - None is not a valid scalar: expected
            pass

    @staticmethod
    def _tracked(roots) -> list:
        """The objects whose refcounts must not change: everything the call was
        given, recursively (containers, odd objects' fields), except shared
        singletons and types/modules/functions."""
        out, seen, stack = [], set(), [(root, 0) for root in roots]
        while stack:
            obj, depth = stack.pop()
            if id(obj) in seen or depth > 8:
                continue
            seen.add(id(obj))
            if obj is None or isinstance(obj, (bool, type, type(sys), type(len), type(lambda: 0))):
                continue
            if type(obj) is int and -5 <= obj <= 256:
                continue  # cached small ints: shared with everything else
            if type(obj) in (tuple, str, bytes, frozenset) and len(obj) == 0:
                continue  # (), "", b"", frozenset(): interpreter-wide singletons
            if type(obj) in (str, bytes) and len(obj) == 1:
                continue  # 1-character strings are cached singletons too
            out.append(obj)
            if type(obj) in (list, tuple):
                stack += [(x, depth + 1) for x in obj]
            elif isinstance(obj, dict):
                stack += [(x, depth + 1) for x in obj.values()]
            elif isinstance(obj, (DataPtr, IndexLike, FloatLike, DuckDesc, ListMutator, Reentrant)) or (
                    dataclasses.is_dataclass(obj) and not isinstance(obj, type)):
                stack += [(x, depth + 1) for x in vars(obj).values()]
        return out

    def one_input(self, data: bytes) -> str:
        """The libFuzzer entry point: decode, call, check. Returns the outcome."""
        call = self.decode(data)
        try:
            outcome = self.check(call)
        finally:
            self._break_cycles(call["built"])
            if call["victim"] is not None:
                try:
                    self._launch.unload(call["victim"].function)
                except ValueError:
                    pass  # the input's enter hook unloaded it
            del call
        # Only after a clean check: a Violation's traceback keeps the call alive.
        memory = self.memory()
        if memory != self.baseline:
            gc.collect()
            memory = self.memory()
        if memory != self.baseline:
            raise Violation(f"simdev memory allocated {memory} after the input, baseline {self.baseline}: "
                            "the launcher kept a tensor or scratch alive")
        return outcome

    @staticmethod
    def _break_cycles(positional: list) -> None:
        """Clears the hooks and odd objects that point back into the call (a
        function of its own: loop variables must not outlive it)."""
        for value in positional:
            for obj in (value, *(value if isinstance(value, list) else ())):
                if isinstance(obj, (ListMutator, Reentrant, ClearingDataPtr, ClearingIndex, DuckDesc)):
                    obj.__dict__.clear()

    def check(self, call: dict) -> str:
        target: Target = call["target"]
        positional, keywords = call["positional"], call["keywords"]
        launcher = target.launcher
        for out in self.out.values():  # a random handle may run the other device's probe_args
            out.zero_()
        self.sync()
        # Hostile inputs drop references on purpose (that is the bug they hit),
        # and holding their objects here would keep freed ones alive: no
        # refcount check for them, only crashes.
        tracked = [] if self.hostile else self._tracked(positional)
        # No garbage collection between the two refcount snapshots: collecting
        # an earlier input's cycle that shares an object with this call would
        # change its refcount here.
        gc.disable()
        try:
            before = [sys.getrefcount(obj) for obj in tracked]
            error_type = error_text = None
            try:
                result = launcher(*positional, **keywords)
            except Exception as error:  # noqa: BLE001 - judged below
                error_type, error_text = type(error), str(error)
                result = None
            self._reset(target)
            self.sync()
            after = [sys.getrefcount(obj) for obj in tracked]
        finally:
            gc.enable()
        self.inputs += 1
        where = _Lazy(lambda: f"{target.name} called with {self.describe(call)}")
        if error_type is SystemError or (error_type is not None and issubclass(error_type, SystemError)):
            raise Violation(f"SystemError {error_text!r}: {where}")
        if error_type is not None and not error_text.strip() and error_type is not FuzzError:
            raise Violation(f"{error_type.__name__} without a message: {where}")
        if result is not None:
            raise Violation(f"the launcher returned {result!r}, not None: {where}")
        leaked = [(obj, a - b) for obj, b, a in zip(tracked, before, after) if a != b]
        if leaked:
            shown = ", ".join(f"{type(o).__name__} {self.short(o)} {delta:+d}" for o, delta in leaked[:5])
            raise Violation(f"refcounts changed by the call ({shown}): {where}")
        grid = call["grid"]
        enter, exit_ = (positional[7], positional[8]) if len(positional) >= 9 else (None, None)
        launched = (error_type is None and len(positional) >= 9 and all(isinstance(g, int) for g in grid)
                    and math.prod(int(g) for g in grid) > 0)  # fmt: skip
        records = [words for words in (out.cpu().tolist() for out in self.out.values()) if any(words)]
        if launched:
            sizes = list(launcher.param_sizes)
            if len(records) != 1:
                raise Violation(f"the launch left {len(records)} probe records, not 1: {where}")
            words = records[0]
            seen = [words[1 + 2 * i] for i in range(min(words[0], len(sizes)))]
            if words[0] != len(sizes) or seen != sizes:
                raise Violation(f"probe_args saw {words[0]} parameters of sizes {seen}, the launcher has "
                                f"{sizes}: {where}")
        elif records and error_type is not None and not self._live(exit_) and not isinstance(enter, Reentrant):
            raise Violation(f"the launcher raised {error_type.__name__} ({error_text}) but the kernel ran: {where}")
        outcome = "launched" if launched else ("returned" if error_type is None else f"raised {error_type.__name__}")
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        self.last_message = error_text or ""
        return outcome

    def _live(self, hook) -> bool:
        return hook is not None and not (self.hook_chain and isinstance(hook, self.hook_chain) and not hook.calls)

    @staticmethod
    def short(obj) -> str:
        try:
            text = repr(obj)
        except Exception:  # noqa: BLE001
            text = f"<{type(obj).__name__}>"
        return text if len(text) < 60 else text[:57] + "..."

    def describe(self, call: dict) -> str:
        return "(" + ", ".join(self.short(v) for v in call["positional"]) + ")" + (
            f" keywords {call['keywords']}" if call["keywords"] else "")


# ---------------------------------------------------------------- corpora


def smoke_corpus(num_targets: int, total: int = 300) -> list[tuple[str, bytes]]:
    """The fixed corpus CI replays: the default (all-valid) call of every
    target, then random byte strings from a fixed seed (decode biases them
    towards well-formed calls)."""
    corpus = [(f"target:{i}", bytes([i])) for i in range(num_targets)]
    rng = random.Random(20261201)
    corpus += [(f"random:{i}", bytes([rng.randrange(num_targets)]) + rng.randbytes(rng.randrange(0, 160)))
               for i in range(total - len(corpus))]  # fmt: skip
    return corpus


# Minimal reproducers of the launcher bugs this fuzzer found in
# src/python/py_args.cpp (fixed: packing now works on snapshots that own their
# items). The smoke test runs each in a child; each must print "no crash".
REGRESSIONS = {
    "list_tuple_argument_shrunk_while_packing": '''
import torch, launch_support
from devbridge import launch
kernel = launch_support.load("probe_args")
launcher = launch.launcher({"out": "*i64", "t": ("*fp32", "i32")}, name="t")
out = torch.zeros(64, dtype=torch.int64, device="simdev:0")
class Clearing:
    def __init__(self, target): self.target = target
    def data_ptr(self):
        self.target.clear()  # the list the launcher is iterating
        return 0
t = [None, 5]
t[0] = Clearing(t)
# PackNode (src/python/py_args.cpp) checked len(t) == 2 once, then reads
# PyList_GET_ITEM(t, 1) after t[0].data_ptr() emptied t: NULL[1] -> SIGSEGV.
launcher(1, 1, 1, launch_support.stream_of("simdev:0"), kernel.function, (4, 1, 0), None, None, None, out, t)
print("no crash")
''',
    "tensordesc_shape_entry_freed_while_packing": '''
import torch, launch_support
from devbridge import launch
kernel = launch_support.load("probe_args")
launcher = launch.launcher({"out": "*i64", "d": "tensordesc<fp32[16, 16]>"}, name="d")
out = torch.zeros(64, dtype=torch.int64, device="simdev:0")
class Desc: pass
d = Desc()
d.base, d.strides, d.padding = None, [16, 1], "zero"
d.shape = [int("1000001"), int("1000002")]  # the list holds the only references
class Flip:
    def __bool__(self):
        d.shape[0] = 7  # frees int 1000001, still borrowed by PackTensorDesc
        Flip.junk = [int(str(i) + "123") for i in range(64)]  # reuses its memory
        return True
d.round_f32_to_tf32 = Flip()
launcher(1, 1, 1, launch_support.stream_of("simdev:0"), kernel.function, (4, 1, 0), None, None, None, out, d)
torch.accelerator.synchronize()
words = out.tolist()
params = [words[2 + 2 * i] for i in range(words[0])]
# params: out, base, shape i64 x2, strides i64 x2, padding, round, shape i32 x2, strides x2, scratch x2.
# The i32 copy of shape[0] must be 1000001 (read before) or 7 (after); anything else is freed memory.
assert params[8] in (1000001, 7), f"shape[0] packed as i32 from freed memory: {params[8]} ({params})"
print("no crash")
''',
}


# ---------------------------------------------------------------- entry points


def emit(record: dict) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()  # the parent must see "start" before a crash


def smoke_replay(fuzzer: LauncherFuzzer, start: int) -> int:
    """JSON lines for test_fuzz_launcher_smoke.py: {"start": i} before input i,
    then {"result": i, "label", "outcome", "detail"}."""
    corpus = smoke_corpus(len(fuzzer.targets))
    emit({"targets": [t.name for t in fuzzer.targets], "corpus": len(corpus)})
    for index in range(start, len(corpus)):
        label, data = corpus[index]
        emit({"start": index})
        try:
            outcome = fuzzer.one_input(data)
            detail = fuzzer.last_message[:300]
        except Violation as error:
            outcome, detail = "violated", str(error)
        emit({"result": index, "label": label, "outcome": outcome, "detail": detail})
    return 0


def leak_check(fuzzer: LauncherFuzzer, passes: int) -> int:
    """Replays the smoke corpus `passes` times in this process and reports the
    growth of Python's allocated blocks and gc-tracked objects between the
    last two passes (a leak of new objects shows as growth per pass)."""
    corpus = smoke_corpus(len(fuzzer.targets))
    blocks, objects = [], []
    for _ in range(passes):
        for _, data in corpus:
            fuzzer.one_input(data)
        # CPython 3.11's method cache keeps a strong reference to each attribute
        # name it caches, and PyObject_GetAttrString makes a new name string per
        # call: up to 4096 such strings pile up there. Not a leak: clear it.
        sys._clear_type_cache()
        gc.collect()
        blocks.append(sys.getallocatedblocks())
        objects.append(len(gc.get_objects()))
    emit({"blocks": blocks, "objects": objects, "memory": fuzzer.memory(), "baseline": fuzzer.baseline,
          "inputs": len(corpus), "outcomes": fuzzer.outcomes})
    return 0


def write_seeds(fuzzer: LauncherFuzzer, directory: pathlib.Path) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    written = 0
    for _, data in smoke_corpus(len(fuzzer.targets)):
        path = directory / f"seed-{hashlib.sha1(data).hexdigest()}"
        if not path.exists():
            path.write_bytes(data)
            written += 1
    print(f"seed corpus {directory}: {written} new file(s)")
    return 0


def replay(fuzzer: LauncherFuzzer, files: list[str]) -> int:
    failed = 0
    for name in files:
        data = pathlib.Path(name).read_bytes()
        call = fuzzer.decode(data)
        print(f"{name}: {call['target'].name} {fuzzer.describe(call)}", flush=True)
        del call
        try:
            print(f"  -> {fuzzer.one_input(data)}", flush=True)
        except Violation as error:
            failed += 1
            print(f"  -> VIOLATION: {error}", flush=True)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--hostile", action="store_true")
    parser.add_argument("--replay", nargs="+")
    parser.add_argument("--smoke-replay", action="store_true")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--leak-check", type=int, metavar="PASSES")
    parser.add_argument("--write-seeds", type=pathlib.Path)
    ours, rest = parser.parse_known_args(argv[1:])
    fuzzer = LauncherFuzzer(hostile=ours.hostile)
    if triton is None:
        print("note: triton is not installed; fuzzing the random-signature launchers only", file=sys.stderr)
    if ours.replay:
        return replay(fuzzer, ours.replay)
    if ours.smoke_replay:
        return smoke_replay(fuzzer, ours.start)
    if ours.leak_check:
        return leak_check(fuzzer, ours.leak_check)
    if ours.write_seeds:
        return write_seeds(fuzzer, ours.write_seeds)

    import atheris

    # Coverage comes from Python only (devbridge's C++ is not built with
    # -fsanitize=fuzzer): instrument the decoder and the checks, so inputs
    # that reach new value kinds and outcomes are kept and mutated further.
    for function in (Reader.byte, Reader.below, Reader.odd, LauncherFuzzer.decode, LauncherFuzzer.zoo,
                     LauncherFuzzer.well_typed, LauncherFuzzer.duck_desc, LauncherFuzzer.tensor_desc,
                     LauncherFuzzer.int_value, LauncherFuzzer.float_value, LauncherFuzzer.pointer_value,
                     LauncherFuzzer.refused_pointer, LauncherFuzzer.output_argument, LauncherFuzzer.hook,
                     LauncherFuzzer.grid_value, LauncherFuzzer.check):
        atheris.instrument_func(function)

    def one_input(data: bytes) -> None:
        fuzzer.one_input(data)
        runs = fuzzer.inputs
        if runs & (runs - 1) == 0 and runs >= 1024:  # libFuzzer exits without exit hooks: report as we go
            print(f"#{runs} launcher outcomes: {dict(sorted(fuzzer.outcomes.items()))}, "
                  f"python blocks {sys.getallocatedblocks()}", file=sys.stderr)

    atheris.Setup([argv[0], *rest], one_input)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
