"""devbridge's Triton compiler backend: claims targets named after a plugin
device that declared its hardware (devbridge.triton.declare_hardware) and
delegates every stage to that hardware's own Triton compiler (NVIDIA's for
cudadev).

The hardware's compiler is reached through its *module*: importing its class
into this module would give Triton two concrete BaseBackend subclasses here,
which makes `import triton` itself fail.
"""

from __future__ import annotations

import importlib

from triton.backends.compiler import BaseBackend, GPUTarget


def _hardware_of(device_name: str):
    # Imported late: this module is loaded while `import triton` runs.
    from devbridge.triton.hardware import declared

    return declared(device_name)


class DevbridgeBackend(BaseBackend):
    """A plugin device's compiler: the hardware's compiler under the plugin's target name."""

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return _hardware_of(target.backend) is not None

    def __init__(self, target: GPUTarget) -> None:
        super().__init__(target)
        hardware = _hardware_of(target.backend)
        if hardware is None:
            raise RuntimeError(f"devbridge: no Triton hardware is declared for the '{target.backend}' device")
        self.hardware = hardware
        self.interpreted = hardware.compiler == "interpreter"
        if self.interpreted:
            # simdev's target: Triton's front end still builds (and so checks)
            # the TTIR, with NVIDIA's options and language modules for an
            # sm80 part; the binary is then a description for the interpreter.
            module = importlib.import_module("triton.backends.nvidia.compiler")
            self.delegate = module.CUDABackend(GPUTarget("cuda", 80, 32))
            self.binary_ext = "interp"
            return
        module_name, class_name, backend_name = hardware.compiler_class()
        module = importlib.import_module(module_name)
        compiler = getattr(module, class_name)
        hardware_target = GPUTarget(backend_name or target.backend, target.arch, target.warp_size)
        self.delegate = compiler(hardware_target)
        self.binary_ext = self.delegate.binary_ext

    # Every stage is the hardware compiler's own.
    def hash(self) -> str:
        if self.interpreted:
            from devbridge.triton._interpreter import FORMAT

            return f"devbridge-{self.target.backend}-{FORMAT}-{self.delegate.hash()}"
        return f"devbridge-{self.target.backend}-{self.hardware.compiler}-{self.delegate.hash()}"

    def parse_options(self, options):
        if self.interpreted:
            # The front end checks fp8 types and dot operands against these
            # options; the code runs in the interpreter, which takes every fp8
            # type (an sm80 part takes neither fp8e4nv nor fp8e4b8).
            from devbridge.triton import _interpreter

            options = {**_interpreter.front_end_options(), **dict(options)}
        return self.delegate.parse_options(options)

    def add_stages(self, stages, options, *language):
        if not self.interpreted:
            return self.delegate.add_stages(stages, options, *language)
        from devbridge.triton import _interpreter, _triton_api

        source = _triton_api.compiling_source()
        if source is None or not hasattr(source, "fn"):
            raise NotImplementedError("devbridge: simdev's Triton target compiles @triton.jit functions through "
                                      "triton.compile(ASTSource(...)) or kernel[grid](...), not IR files")
        _interpreter.remember(source.fn)

        def ttir(module, metadata):
            # What launching needs of the metadata; no shared memory or scratch.
            metadata.update(name=source.fn.fn.__name__, shared=0, tmem_size=0, global_scratch_size=0,
                            global_scratch_align=1, profile_scratch_size=0, profile_scratch_align=1,
                            tensordesc_meta=[])
            return module

        stages["ttir"] = ttir
        stages["interp"] = lambda module, metadata: _interpreter.make_binary(source, metadata)

    def load_dialects(self, context):
        return self.delegate.load_dialects(context)

    def get_module_map(self):
        return self.delegate.get_module_map()

    def pack_metadata(self, metadata):
        return self.delegate.pack_metadata(metadata)

    def get_codegen_implementation(self, options):
        codegen = self.delegate.get_codegen_implementation(options)
        if self.interpreted:
            # The interpreter multiplies any dot shape (what TRITON_INTERPRET=1
            # runs); an sm80 part's minimum (K >= 32 for fp8) would refuse them.
            from devbridge.triton import _interpreter

            codegen = {**codegen, **_interpreter.front_end_codegen()}
        return codegen

    def __getattr__(self, name):
        # Anything else Triton's core asks of a backend (parse_attr,
        # specialization helpers, ...) is the hardware compiler's.
        if name in ("delegate", "hardware"):
            raise AttributeError(name)
        return getattr(self.delegate, name)
