"""What hardware a plugin device runs on, as devbridge's Triton backend needs it.

A plugin declares it once, when its package is imported (torch's autoload
imports it, and so do Inductor's compile workers, fresh Python processes):

    devbridge.triton.declare_hardware("cudadev", compiler="nvidia", kernel_runtime="cuda")

  compiler        the Triton backend class whose compiler produces the
                  device's binaries: "nvidia" (triton.backends.nvidia), "amd",
                  "interpreter" (devbridge.triton.interpreter: Triton's
                  interpreter over host memory), a module path "pkg.compiler:ClassName", or the class itself
                  (a triton.backends.compiler.BaseBackend subclass); the class
                  may also set devbridge's optional hooks (COMPILER_HOOKS)
  kernel_runtime  how devbridge loads and launches those binaries: a spec
                  ("cuda", "host" for the interpreter on a plugin whose
                  tensors are host memory, "simdev:<library path>"), a
                  "devbridge_kernel_runtime" capsule the plugin provides, or a
                  function returning that capsule, called when the driver
                  first needs the runtime (devbridge._kernel_runtimes)
  memory_clock_khz, memory_bus_width
                  optional: the device memory's clock (kHz) and bus width
                  (bits), which Triton's device properties carry as
                  mem_clock_rate and mem_bus_width and
                  triton.testing.get_dram_gbps() turns into a bandwidth
                  (clock * width * 2 / 8e6 GB/s); Inductor's runtime
                  estimates (overlap scheduling, fusion regions) divide by
                  it. Given together or not at all; without them the
                  driver reports NOMINAL_MEMORY (1024 GB/s), never 0

The target a kernel is compiled for is GPUTarget(<device name>, arch,
warp_size) with arch and warp size read from the hardware through the
kernel runtime, so compiles for a plugin device never collide with compiles
for the hardware's own device type ("cuda") in Triton's caches.

This module imports nothing heavy: devbridge's Triton compiler consults it
while `import triton` is still running (a compiler class is imported only
when it is first used).
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field
from typing import Any

from .. import _device_names, _kernel_runtimes  # cheap: opens no runtime, imports nothing of Triton

# Compiler names -> (module, class name, the target backend name it compiles
# for; None: the plugin's own target). "interpreter" is devbridge's
# interpreter target (devbridge.triton.interpreter), for plugins whose tensors
# live in host memory, with kernel_runtime="host" (or a runtime of their own).
KNOWN_COMPILERS = {
    "nvidia": ("triton.backends.nvidia.compiler", "CUDABackend", "cuda"),
    "amd": ("triton.backends.amd.compiler", "HIPBackend", "hip"),
    "interpreter": ("devbridge.triton.interpreter.compiler", "InterpreterBackend", None),
}
# Older spellings, kept so that declarations written for them still work:
# the interpreter compiler's class while it lived in simdev's package.
COMPATIBLE_COMPILERS = {
    "torch_simdev.triton_target.compiler:InterpreterBackend": "devbridge.triton.interpreter.compiler:InterpreterBackend",
}

#: devbridge's optional hooks on a compiler class, with what their absence
#: means (docs/plugin-authors.md, "Triton: declare the hardware your device
#: runs on"). Everything else the class does is Triton's own BaseBackend
#: interface: its binary_ext, hash, parse_options, add_stages and
#: get_codegen_implementation serve the plugin's target unchanged.
COMPILER_HOOKS = {
    # False: torch.compile's autotuning does not time the configs of a kernel
    # (it takes the first); for targets whose timings mean nothing
    "times_kernels": True,
    # bytes Inductor's benchmarker zeroes between timings to flush the
    # cache; None: Inductor's default (256 MiB)
    "l2_cache_size": None,
    # before_load(src, metadata), called when devbridge builds the launcher
    # of a kernel of this compiler, right before the binary is loaded (also
    # for kernels from Triton's cache, which skip add_stages)
    "before_load": None,
}


#: (mem_clock_rate in kHz, mem_bus_width in bits) the driver reports for a
#: device whose declaration gives none: 1 GHz over 4096 bits, 1024 GB/s by
#: triton.testing.get_dram_gbps(), an HBM-class accelerator. Only a finite,
#: nonzero bandwidth matters: Inductor divides bytes by it to estimate a
#: node's memory time (torch/utils/_runtime_estimation.py get_transfer_time),
#: and a 0 there is a ZeroDivisionError (docs/torch-compile.md, distributed
#: optimizations). A plugin that knows its memory declares it.
NOMINAL_MEMORY = (1_000_000, 4096)


@dataclass(frozen=True)
class Hardware:
    device: str          # the plugin's device type name ("cudadev")
    compiler: str        # a KNOWN_COMPILERS key or "module:Class"
    kernel_runtime: Any  # a spec, a capsule or a function returning one (devbridge._kernel_runtimes)
    compiler_type: Any = field(default=None, compare=False, repr=False)  # the class, once known
    memory_clock_khz: int | None = None  # declared memory clock (kHz), or None: NOMINAL_MEMORY
    memory_bus_width: int | None = None  # declared memory bus width (bits), with the clock

    def memory_properties(self) -> dict:
        """Triton's device-property names for the memory: {"mem_clock_rate":
        kHz, "mem_bus_width": bits}, the declared ones or NOMINAL_MEMORY."""
        declared_memory = self.memory_clock_khz is not None
        clock, width = (self.memory_clock_khz, self.memory_bus_width) if declared_memory else NOMINAL_MEMORY
        return {"mem_clock_rate": clock, "mem_bus_width": width}

    def compiler_class(self):
        """(module path, class name, backend name the class compiles for)."""
        if self.compiler in KNOWN_COMPILERS:
            return KNOWN_COMPILERS[self.compiler]
        module, _, cls = COMPATIBLE_COMPILERS.get(self.compiler, self.compiler).partition(":")
        if not module or not cls:
            raise ValueError(f"devbridge: compiler {self.compiler!r} of device '{self.device}' is neither one of "
                             f"{sorted(KNOWN_COMPILERS)} nor 'module.path:ClassName' nor a Triton backend class")
        return module, cls, None

    def compiler_backend(self):
        """(the compiler class, the backend name it compiles for or None: the plugin's own)."""
        module_name, class_name, backend_name = self.compiler_class()
        compiler = self.compiler_type
        if compiler is None:
            compiler = importlib.import_module(module_name)
            for part in class_name.split("."):
                compiler = getattr(compiler, part)
            object.__setattr__(self, "compiler_type", compiler)  # a cache: compare=False
        return compiler, backend_name

    def hook(self, name: str):
        """The compiler class's devbridge hook `name` (COMPILER_HOOKS), or its default."""
        return getattr(self.compiler_backend()[0], name, COMPILER_HOOKS[name])


def _compiler_name(device: str, compiler) -> tuple[str, Any]:
    """(the compiler's name as Hardware keeps it, the class where one was given)."""
    if isinstance(compiler, type):
        # The class is used as given; its name is for messages and cache keys.
        return f"{compiler.__module__}:{compiler.__qualname__}", compiler
    if not isinstance(compiler, str):
        raise TypeError(f"devbridge: compiler must be a name ({', '.join(repr(c) for c in KNOWN_COMPILERS)}), "
                        f"'module.path:ClassName' or a Triton backend class, got {type(compiler).__name__}")
    return compiler, None


_lock = threading.Lock()
_declared: dict[str, Hardware] = {}


def _checked_memory(device: str, clock_khz, bus_width) -> tuple[int | None, int | None]:
    if clock_khz is None and bus_width is None:
        return None, None
    given = {"memory_clock_khz": clock_khz, "memory_bus_width": bus_width}
    for name, value in given.items():
        if value is None:
            raise ValueError(f"devbridge: declare_hardware('{device}', ...) got one of memory_clock_khz and "
                             f"memory_bus_width without the other: give both (the memory's clock in kHz and "
                             f"its bus width in bits) or neither")
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"devbridge: declare_hardware('{device}', ...): {name} must be a positive int, "
                             f"got {value!r}")
    return clock_khz, bus_width


def declare_hardware(device: str, *, compiler, kernel_runtime, memory_clock_khz: int | None = None,
                     memory_bus_width: int | None = None) -> Hardware:
    """Declare the hardware a plugin device runs on (see the module docstring).
    Declaring the same device again replaces the declaration. torch.compile
    then serves the device from Dynamo's first compile on
    (devbridge.inductor.arm(), which devbridge.install() also calls).
    memory_clock_khz and memory_bus_width (optional, together) are what the
    driver reports as the device's mem_clock_rate and mem_bus_width."""
    if not isinstance(device, str) or not device or ":" in device:
        raise ValueError(f"devbridge: declare_hardware needs the plugin's device type name (e.g. 'cudadev'), "
                         f"got {device!r}")
    _device_names.check_plugin_name(device)  # before the plugin renames PrivateUse1: checked at the look-up
    name, compiler_type = _compiler_name(device, compiler)
    Hardware(device, name, kernel_runtime).compiler_class()  # validates the name; imports nothing
    # Only the type: the spec is resolved (and its runtime opened) by the
    # driver, when a kernel is first loaded.
    _kernel_runtimes.check_type(kernel_runtime)
    clock_khz, bus_width = _checked_memory(device, memory_clock_khz, memory_bus_width)
    hardware = Hardware(device, name, kernel_runtime, compiler_type, clock_khz, bus_width)
    with _lock:
        _declared[device] = hardware
    from ..inductor import arm  # cheap: imports nothing of torch's compiler

    arm()
    return hardware


def declared(device: str) -> Hardware | None:
    with _lock:
        return _declared.get(device)


def how_to_declare(device: str) -> str:
    """What declaring the hardware of `device` means, for messages that ask
    for it: no compiler or kernel runtime is suggested, since only the plugin
    knows what chip it drives."""
    return (f"the plugin declares, once, when it is imported, which Triton compiler builds kernels for the "
            f"hardware it drives and how those binaries are loaded and launched: "
            f"devbridge.triton.declare_hardware('{device}', compiler=..., kernel_runtime=...), with compiler "
            f"the Triton backend of that hardware ({', '.join(repr(c) for c in KNOWN_COMPILERS)} or "
            f"'package.module:BackendClass') and kernel_runtime 'cuda' (cubins through libcuda), 'host' (for a "
            f"plugin whose tensors are host memory, with the 'interpreter' compiler: Triton's interpreter, "
            f"launched on the current stream) or the plugin's own 'devbridge_kernel_runtime' capsule (docs/plugin-authors.md, 'Triton: declare the "
            f"hardware your device runs on'); a device whose hardware no Triton backend compiles for cannot run "
            f"Triton kernels{_misnamed_declarations()}")


def _misnamed_declarations() -> str:
    """Declarations made before the plugin renamed PrivateUse1 (declare_hardware
    could not check their names then) under a name that is not the plugin's."""
    with _lock:
        names = _device_names.unclaimed_names(_declared)
    return "".join(f"; declare_hardware('{name}', ...) was called before the plugin renamed PrivateUse1, and "
                   f"{_device_names.not_loaded(name)}" for name in names)


def require(device: str) -> Hardware:
    hardware = declared(device)
    if hardware is None:
        raise RuntimeError(
            f"devbridge: no Triton hardware is declared for the '{device}' device, so devbridge does not know "
            f"which Triton compiler and kernel runtime serve it; {how_to_declare(device)}")
    return hardware
