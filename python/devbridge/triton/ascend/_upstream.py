"""Every name of triton-ascend and FlagTree's Ascend backend devbridge touches,
in one place, with the versions each was checked on. Anything else is
refused with an error naming the versions, never run on guesses.

triton-ascend 3.2.0 (the wheel on the package index; release/3.2.x at 23ac2717c):
  triton.backends.backends["ascend"].driver   the NPUDriver Triton discovered.
                                 Discovery loads backends/ascend/driver.py by
                                 path as a module named "ascend", so this class
                                 is not triton.backends.ascend.driver.NPUDriver
                                 and patching that module would not reach it.
  its __init__.__globals__       the discovered module's names: the launch-rule
                                 helpers below are read from there
    get_ascend_arch_from_env()   TRITON_ASCEND_ARCH, validated ("" when unset)
    is_ffts_supported(arch)      False for Ascend910A and Ascend310B4
    force_disable_ffts()         TRITON_DISABLE_FFTS
    _is_auto_map_parallel_blocks_enabled()   TRITON_ALL_BLOCKS_PARALLEL
  CompiledKernel.metadata        workspace_size, lock_num, lock_init_value
                                 (the compiler writes lock_init_val), mix_mode,
                                 force_simt_only, name = "<kernel> <mix_mode>"
  src.signature / src.constants  non-constexpr args by name; constants by
                                 name (constexprs, ints specialised to 1, None)
  utils.load_binary              returns 4 values (module, function, n_regs,
                                 n_spills)

triton-ascend main (a84b1eb52) and FlagTree triton_v3.5.x (7e364f165), the registry:
  triton.backends.ascend.backend_register.backend_strategy_registry
                                 register(category, method) -> decorator; a
                                 duplicate raises ValueError
  triton.backends.ascend.utils.backend_policy
                                 module global, None until the first
                                 get_backend_func() call, then frozen; setting
                                 it first is the only way to select a third
                                 category (TRITON_BACKEND is whitelisted)
  triton.backends.ascend.driver.NPUDriver.get_active_torch_device
                                 imports torch_npu (and on main lacks `import
                                 torch`): replaced by the policy's answer

Public names used: triton.runtime.driver.driver.set_active,
triton.backends.driver.DriverBase, triton.backends.compiler.GPUTarget,
triton.__version__.
"""

from __future__ import annotations

import importlib
import importlib.metadata

DRIVER_VERSIONS = ("3.2.0",)  # triton-ascend releases whose discovered driver devbridge subclasses
REGISTRY_MODULE = "triton.backends.ascend.backend_register"
UTILS_MODULE = "triton.backends.ascend.utils"
DRIVER_MODULE = "triton.backends.ascend.driver"


def triton_ascend_version() -> str | None:
    """The installed triton-ascend distribution's version (None: not installed)."""
    try:
        return importlib.metadata.version("triton-ascend")
    except importlib.metadata.PackageNotFoundError:
        return None


def registry():
    """The BackendStrategyRegistry singleton, or None when this Ascend backend has none."""
    try:
        module = importlib.import_module(REGISTRY_MODULE)
    except ImportError:
        return None
    return getattr(module, "backend_strategy_registry", None)


def select_policy(category: str) -> None:
    """Select `category` through utils.backend_policy (before the first get_backend_func)."""
    utils = importlib.import_module(UTILS_MODULE)
    current = getattr(utils, "backend_policy", None)
    if current not in (None, category):
        raise RuntimeError(
            f"devbridge: the Ascend backend already chose its host-runtime policy {current!r} (it freezes the "
            f"choice at the first kernel), so {category!r} cannot take over; call "
            "devbridge.triton.ascend.install() before any Triton kernel runs (from the plugin's autoload hook)")
    utils.backend_policy = category


def registry_npu_driver_class():
    """triton.backends.ascend.driver.NPUDriver of the registry versions (imported as a package module there)."""
    return importlib.import_module(DRIVER_MODULE).NPUDriver


def discovered_npu_driver_class():
    """The NPUDriver class Triton's directory scan discovered (3.2.0)."""
    version = triton_ascend_version()
    if version not in DRIVER_VERSIONS:
        raise RuntimeError(
            f"devbridge: triton-ascend {version} is not a version devbridge's Ascend driver was checked on "
            f"({', '.join(DRIVER_VERSIONS)}); versions with the host-runtime registry (triton-ascend main, "
            "FlagTree) take devbridge.triton.ascend.install() instead")
    import triton.backends

    backend = triton.backends.backends.get("ascend")
    if backend is None:
        raise RuntimeError("devbridge: triton-ascend is installed but Triton discovered no 'ascend' backend "
                           "(triton.backends.backends); reinstall triton-ascend==3.2.0")
    return backend.driver


def launch_rules():
    """(ffts, cap_blocks) as the discovered driver's module decides them from the environment."""
    names = discovered_npu_driver_class().__init__.__globals__
    arch = names["get_ascend_arch_from_env"]()
    ffts = names["is_ffts_supported"](arch) and not names["force_disable_ffts"]()
    return bool(ffts), bool(names["_is_auto_map_parallel_blocks_enabled"]())


def set_active(driver) -> None:
    from triton.runtime.driver import driver as config

    config.set_active(driver)
