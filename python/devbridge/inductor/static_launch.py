"""Plugin kernels on Inductor's static-launch path, as cuda kernels are.

For cuda, Inductor keeps a compiled kernel as a small picklable object
around its binary (PyTorch's StaticallyLaunchedCudaKernel) instead of
Triton's CompiledKernel. TritonBundler saves those with the FX graph, so a
warm start restores every kernel from its binary with no triton.compile, no
compile worker and no C compiler. PluginStaticKernel is that object for a
plugin device: the binary is loaded through devbridge's driver (the
declared hardware's kernel runtime) and launched by devbridge's generic
launcher bound to it (Launcher.bind: (gx, gy, gz, stream, *args), the call
shape Inductor's static launchers are called with).

A kernel stays on Triton's launcher (and so on Inductor's usual path) when
a Triton launch hook is installed (a static launch has none, as PyTorch's
refuses too), when the binary is not in Triton's cache, or when the kernel
needs what a static launch cannot give; the reason is logged at INFO by
torch._inductor.runtime.triton_heuristics.
"""

from __future__ import annotations

import os

from . import _torch_api


def _binary_ext(kernel) -> str:
    """The extension of the kernel's binary in Triton's cache: the asm entry
    that CompiledKernel.kernel is (Triton 3.6.0, 3.7.1 and 3.8.0 keep the binary in
    asm[backend.binary_ext] and in .kernel)."""
    for ext, value in kernel.asm.items():
        if value is kernel.kernel:
            return ext
    raise KeyError("the compiled kernel's binary is not among its asm entries")


class PluginStaticKernel:
    """A compiled plugin-device kernel as Inductor's static launch uses it:
    the attributes StaticTritonCompileResult reads (name, hash, arg_names,
    declared_constexprs, full_constexprs, shared, n_regs, n_spills,
    cubin_path, cubin_raw, load_kernel, run, close)."""

    def __init__(self, kernel, binary_dir: str, refusal=RuntimeError) -> None:
        from devbridge.triton import _describe
        from devbridge._triton_api import launch_hooks_empty

        if not launch_hooks_empty():
            raise refusal("a Triton launch hook is installed (a static launch calls none)")
        src = kernel.src
        try:
            entry, plan, _, metadata = _describe.describe(src, kernel.metadata)
        except (NotImplementedError, ValueError, TypeError) as error:
            raise refusal(str(error)) from error
        self.name = src.fn.__name__
        self.binary_ext = _binary_ext(kernel)
        self.cubin_path = self._binary_path(binary_dir)
        if not os.path.exists(self.cubin_path):
            raise refusal(f"binary not found in Triton's cache: {self.cubin_path}")
        self.cubin_raw = kernel.kernel
        self.entry = entry  # the binary's kernel symbol
        self.hash = kernel.hash
        self.arg_names = list(src.fn.arg_names)
        self.declared_constexprs = _torch_api.declared_constexprs(src.fn)
        # Positions the binary has no parameter for: every constexpr
        # (declared, or found constant by the compiler); Inductor passes only
        # the others to run().
        self.full_constexprs = [i for i, node in enumerate(plan) if node is None]
        self.plan = tuple(node for node in plan if node is not None)
        self.param_names = [name for i, name in enumerate(self.arg_names) if plan[i] is not None]
        self.metadata = metadata
        self.num_warps = metadata.get("num_warps", 4)
        self.shared = metadata.get("shared", 0)
        self.n_regs = self.n_spills = None
        self.module = self.function = None

    def _binary_path(self, binary_dir: str) -> str:
        return os.path.join(binary_dir, f"{self.name}.{self.binary_ext}")

    def locate(self, binary_dir: str) -> None:
        """Point at the binary in `binary_dir` (Triton's cache of this
        kernel's hash), writing it there from cubin_raw if it is missing."""
        path = self._binary_path(binary_dir)
        if not os.path.exists(path):
            if self.cubin_raw is None:
                raise RuntimeError(f"devbridge: the binary of kernel '{self.name}' is not at {path} and was not "
                                   "kept with the cached graph")
            os.makedirs(binary_dir, exist_ok=True)
            with open(path, "wb") as f:
                f.write(self.cubin_raw)
        self.cubin_path = path

    def reload_cubin_from_raw(self, filepath: str) -> str:
        self.locate(os.path.dirname(filepath))
        return self.cubin_path

    def load_kernel(self, device: int) -> None:
        """Load the binary on `device` through devbridge's driver and bind
        the launcher to it: self.run is then the C launch itself."""
        if self.function is not None:
            return
        import devbridge.triton
        from devbridge import _C

        image = self.cubin_raw
        if image is None:
            with open(self.cubin_path, "rb") as f:
                image = f.read()
        driver = devbridge.triton.driver()
        module, function, n_regs, n_spills, _ = driver.utils.load_binary(self.entry, image, self.shared, device)
        self.module, self.function, self.n_regs, self.n_spills = module, function, n_regs, n_spills
        launcher = _C.Launcher._from_plan(self.entry, self.plan, self.param_names, dict(self.metadata))
        self.run = launcher.bind(function)
        self.cubin_path = self.cubin_raw = None

    def run(self, grid_x, grid_y, grid_z, stream, *args):  # noqa: F811 - replaced per instance by load_kernel
        raise RuntimeError(f"devbridge: kernel '{self.name}' was launched before load_kernel()")

    def close(self) -> None:
        module = self.module
        self.module = self.function = None
        self.__dict__.pop("run", None)
        if module is not None:
            from devbridge import launch

            try:
                launch.unload(module)
            except ValueError:
                pass  # already released with its runtime

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("run", None)  # the bound launch lives in this process only
        state["module"] = state["function"] = None
        return state


def install(device: str) -> None:
    _torch_api.install_static_launch(device, PluginStaticKernel, PluginStaticKernel.locate)


__all__ = ["PluginStaticKernel", "install"]
