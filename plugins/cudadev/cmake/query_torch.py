"""Print what the cudadev build needs to know about torch, as KEY=VALUE lines.

Normally this imports the torch that the building Python sees. With
CUDADEV_TORCH_ROOT set to an unpacked torch package directory (the folder
holding version.py, include/ and lib/), it reads that tree instead without
importing it; that lets a machine without a GPU, or with another torch,
compile-check and link the plugin against the exact wheel it targets.
"""

import os
import sys


def from_unpacked_tree(root: str) -> dict:
    namespace: dict = {}
    with open(os.path.join(root, "version.py"), encoding="utf-8") as f:
        exec(compile(f.read(), "version.py", "exec"), namespace)
    return {
        "VERSION": namespace["__version__"],
        "CUDA": namespace.get("cuda") or "",
        "DIR": root,
        # Every torch wheel since 2.7 uses the C++11 ABI; the tree cannot be
        # asked without importing it.
        "CXX11_ABI": "1",
        "PYBIND11_COMPILER_TYPE": "",
        "PYBIND11_STDLIB": "",
        "PYBIND11_BUILD_ABI": "",
    }


def from_import() -> dict:
    import torch

    return {
        "VERSION": torch.__version__,
        "CUDA": torch.version.cuda or "",
        "DIR": os.path.dirname(torch.__file__),
        "CXX11_ABI": str(int(torch._C._GLIBCXX_USE_CXX11_ABI)),
        # Same pybind11 ABI tags as torch, as torch.utils.cpp_extension does,
        # so pybind11 state is shared with torch's own bindings.
        "PYBIND11_COMPILER_TYPE": getattr(torch._C, "_PYBIND11_COMPILER_TYPE", "") or "",
        "PYBIND11_STDLIB": getattr(torch._C, "_PYBIND11_STDLIB", "") or "",
        "PYBIND11_BUILD_ABI": getattr(torch._C, "_PYBIND11_BUILD_ABI", "") or "",
    }


def main() -> int:
    root = os.environ.get("CUDADEV_TORCH_ROOT")
    facts = from_unpacked_tree(root) if root else from_import()
    for key, value in facts.items():
        print(f"{key}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
