"""The interpreter Triton target's compiler: Triton's front end for an sm80
part, whose binary is a description of the kernel for Triton's interpreter
(interpreter.py).

A plugin declares it by name, compiler="interpreter"
(devbridge.triton.declare_hardware("<device>", compiler="interpreter",
kernel_runtime="host"), or simdev's own kernel runtime), like any plugin
names its hardware's Triton backend; devbridge's compiler
backend then delegates every stage to it. The front end still builds (and so
checks) the TTIR, with NVIDIA's options and language modules, so a kernel
that would not compile for a GPU fails here too; the stages after it make
no machine code, only the description.

The devbridge hooks it sets (docs/plugin-authors.md, "Triton: declare the
hardware your device runs on"): times_kernels (interpreted times say nothing
about any hardware), l2_cache_size (no cache to flush) and before_load (a
kernel is loaded by finding its Python function again).
"""

from __future__ import annotations

from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import CUDABackend

_FRONT_END_TARGET = GPUTarget("cuda", 80, 32)


class InterpreterBackend(CUDABackend):
    """NVIDIA's front end; the binary ("interp") is JSON for the interpreter."""

    # devbridge hooks. Autotuning picks the first config untimed: timing every
    # config of every kernel in the interpreter would make each compile take
    # minutes and measure nothing of any hardware.
    times_kernels = False
    # Inductor's benchmarker zeroes this much between timings instead of its
    # 256 MiB default: there is no cache to flush, and the zeroing runs on the CPU.
    l2_cache_size = 1 << 20

    def __init__(self, target: GPUTarget) -> None:
        # The plugin's own target (arch 0) names no instruction set;
        # the front end checks kernels as for an sm80 part.
        super().__init__(_FRONT_END_TARGET)
        self.binary_ext = "interp"

    def hash(self) -> str:
        from .interpreter import FORMAT

        return f"{FORMAT}-{super().hash()}"

    def parse_options(self, options):
        # The front end checks fp8 types and dot operands against these
        # options; the code runs in the interpreter, which takes every fp8
        # type (an sm80 part takes neither fp8e4nv nor fp8e4b8).
        from .interpreter import front_end_options

        return super().parse_options({**front_end_options(), **dict(options)})

    def get_codegen_implementation(self, options):
        # The interpreter multiplies any dot shape (what TRITON_INTERPRET=1
        # runs); an sm80 part's minimum (K >= 32 for fp8) would refuse them.
        from .interpreter import front_end_codegen

        return {**super().get_codegen_implementation(options), **front_end_codegen()}

    def add_stages(self, stages, options, *language):
        from devbridge.triton import compiling_source

        from . import interpreter

        source = compiling_source()
        if source is None or not hasattr(source, "fn"):
            raise NotImplementedError("devbridge: the interpreter Triton target compiles @triton.jit functions through "
                                      "triton.compile(ASTSource(...)) or kernel[grid](...), not IR files")
        interpreter.remember(source.fn)
        # Triton runs the front end (source.make_ir) after add_stages
        # (_triton_api's note): it must not meet an interpreted launch.
        source.make_ir = interpreter.front_end_outside_launches(source.make_ir)

        def ttir(module, metadata):
            # What launching needs of the metadata; no shared memory or scratch.
            metadata.update(name=source.fn.fn.__name__, shared=0, tmem_size=0, global_scratch_size=0,
                            global_scratch_align=1, profile_scratch_size=0, profile_scratch_align=1,
                            tensordesc_meta=[])
            return module

        stages["ttir"] = ttir
        stages["interp"] = lambda module, metadata: interpreter.make_binary(source, metadata)

    @staticmethod
    def before_load(src, metadata) -> None:
        """devbridge's hook, called when it builds the launcher of a kernel
        this compiler built, right before the binary is loaded: a kernel from
        Triton's disk cache skipped add_stages, so its Python function is
        remembered here. Inductor hands its parent process kernels compiled
        in its workers with the Python function stripped (fn.fn is None):
        those are found by name when they load."""
        jit_fn = getattr(src, "fn", None)
        if not hasattr(jit_fn, "src") or getattr(jit_fn, "fn", None) is None:
            return
        from . import interpreter

        interpreter.remember(jit_fn)
