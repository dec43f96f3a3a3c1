# torch's own extension builder, as most third-party plugins use it: the
# sources in csrc/ become torch_hostplug/_C.<abi>.so, compiled in parallel by
# ninja (MAX_JOBS). -O1 and no debug info keep the CI build short; the
# numeric work is ATen's CPU kernels, built already.
import glob
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

HERE = os.path.dirname(os.path.abspath(__file__))

setup(
    ext_modules=[
        CppExtension(
            "torch_hostplug._C",
            sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, "csrc", "*.cpp"))),
            extra_compile_args=["-O1", "-g0", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
