"""devbridge's Triton compiler backend: claims targets named after a plugin
device that declared its hardware (devbridge.triton.declare_hardware) and
delegates every stage to that hardware's own Triton compiler (NVIDIA's for
cudadev, the plugin's own class for any other).

The hardware's compiler class is looked up through the declaration, when a
target is first compiled: importing it into this module would give Triton
two concrete BaseBackend subclasses here, which makes `import triton` itself
fail.
"""

from __future__ import annotations

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
        compiler, backend_name = hardware.compiler_backend()
        # A named backend ("nvidia") compiles for its own device type; a
        # plugin's class gets the plugin's target.
        self.delegate = compiler(GPUTarget(backend_name or target.backend, target.arch, target.warp_size))
        self.binary_ext = self.delegate.binary_ext

    # Every stage is the hardware compiler's own.
    def hash(self) -> str:
        return f"devbridge-{self.target.backend}-{self.hardware.compiler}-{self.delegate.hash()}"

    def parse_options(self, options):
        return self.delegate.parse_options(options)

    def add_stages(self, stages, options, *language):
        return self.delegate.add_stages(stages, options, *language)

    def load_dialects(self, context):
        return self.delegate.load_dialects(context)

    def get_module_map(self):
        return self.delegate.get_module_map()

    def pack_metadata(self, metadata):
        return self.delegate.pack_metadata(metadata)

    def get_codegen_implementation(self, options):
        return self.delegate.get_codegen_implementation(options)

    def __getattr__(self, name):
        # Anything else Triton's core asks of a backend (parse_attr,
        # specialization helpers, ...) is the hardware compiler's.
        if name in ("delegate", "hardware"):
            raise AttributeError(name)
        return getattr(self.delegate, name)
