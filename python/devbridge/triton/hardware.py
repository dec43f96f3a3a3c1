"""What hardware a plugin device runs on, as devbridge's Triton backend needs it.

A plugin declares it once, when its package is imported (torch's autoload
imports it, and so do Inductor's compile workers, fresh interpreters):

    devbridge.triton.declare_hardware("cudadev", compiler="nvidia", kernel_runtime="cuda")

  compiler        the Triton backend whose compiler produces the device's
                  binaries: "nvidia" (triton.backends.nvidia), "amd", or a
                  module path "pkg.compiler:ClassName"; "interpreter" runs
                  kernels with Triton's interpreter (simdev, tests only)
  kernel_runtime  how devbridge loads and launches those binaries: "cuda",
                  "simdev:<library path>", "simdev-interpreter:<library path>"
                  (with compiler="interpreter"), or a
                  "devbridge_kernel_runtime" capsule the plugin provides

The target a kernel is compiled for is GPUTarget(<device name>, arch,
warp_size) with arch and warp size read from the hardware through the
kernel runtime, so compiles for a plugin device never collide with compiles
for the hardware's own device type ("cuda") in Triton's caches.

This module imports nothing heavy: devbridge's Triton compiler consults it
while `import triton` is still running.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from .. import _kernel_runtimes  # cheap: opens no runtime, imports nothing of Triton

# Compiler names -> (module, class name, the target backend name it compiles for).
KNOWN_COMPILERS = {
    "nvidia": ("triton.backends.nvidia.compiler", "CUDABackend", "cuda"),
    "amd": ("triton.backends.amd.compiler", "HIPBackend", "hip"),
}
INTERPRETER = "interpreter"


@dataclass(frozen=True)
class Hardware:
    device: str          # the plugin's device type name ("cudadev")
    compiler: str        # a KNOWN_COMPILERS key, INTERPRETER, or "module:Class"
    kernel_runtime: Any  # a spec: "cuda", "simdev:<path>", ... or a capsule (devbridge._kernel_runtimes)

    def compiler_class(self):
        """(module path, class name, backend name the class compiles for)."""
        if self.compiler in KNOWN_COMPILERS:
            return KNOWN_COMPILERS[self.compiler]
        module, _, cls = self.compiler.partition(":")
        if not module or not cls:
            raise ValueError(f"devbridge: compiler {self.compiler!r} of device '{self.device}' is neither one of "
                             f"{sorted(KNOWN_COMPILERS) + [INTERPRETER]} nor 'module.path:ClassName'")
        return module, cls, None


_lock = threading.Lock()
_declared: dict[str, Hardware] = {}


def declare_hardware(device: str, *, compiler: str, kernel_runtime) -> Hardware:
    """Declare the hardware a plugin device runs on (see the module docstring).
    Declaring the same device again replaces the declaration. torch.compile
    then serves the device from Dynamo's first compile on
    (devbridge.inductor.arm(), which devbridge.install() also calls)."""
    if not isinstance(device, str) or not device or ":" in device:
        raise ValueError(f"devbridge: declare_hardware needs the plugin's device type name (e.g. 'cudadev'), "
                         f"got {device!r}")
    if compiler != INTERPRETER:
        Hardware(device, compiler, kernel_runtime).compiler_class()  # validates the name
    # Only the type: the spec is resolved (and its runtime opened) by the
    # driver, when a kernel is first loaded.
    _kernel_runtimes.check_type(kernel_runtime)
    hardware = Hardware(device, compiler, kernel_runtime)
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
            f"'package.module:BackendClass') and kernel_runtime 'cuda' (cubins through libcuda) or the "
            f"plugin's own 'devbridge_kernel_runtime' capsule (docs/plugin-authors.md, 'Triton: declare the "
            f"hardware your device runs on'); a device whose hardware no Triton backend compiles for cannot run "
            f"Triton kernels")


def require(device: str) -> Hardware:
    hardware = declared(device)
    if hardware is None:
        raise RuntimeError(
            f"devbridge: no Triton hardware is declared for the '{device}' device, so devbridge does not know "
            f"which Triton compiler and kernel runtime serve it; {how_to_declare(device)}")
    return hardware
