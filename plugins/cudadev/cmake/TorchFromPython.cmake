# Locate the torch that the active Python imports and describe it as
# INTERFACE targets, so a build links exactly the libtorch it will be loaded
# with. devbridge and both plugins find torch this one way; each plugin keeps a
# byte-identical copy in its own cmake/ (its sdist builds alone), and
# tests/python/test_layout.py checks that the copies are the same file.
#
# Why not find_package(Torch)? On CUDA builds of torch, TorchConfig re-runs
# torch's own CUDA toolkit discovery (the deprecated FindCUDA module, cuDNN and
# NVTX probes, arch detection by running a program), which fails on machines
# whose toolkit differs from torch's build machine, and none of it is needed
# here: the builds need torch's headers and a few of its shared libraries,
# whose paths the torch package knows.
#
# With TORCH_FROM_PYTHON_ROOT set (environment) to an unpacked torch package
# directory (the folder holding version.py, include/ and lib/), that tree is
# read instead, without importing it: a machine without a GPU, or with another
# torch, can then compile-check and link against the exact wheel it targets.
#
# Defines:
#   torch_from_python         INTERFACE: torch's headers (SYSTEM), c10, torch,
#                             torch_cpu, the C++ ABI definition
#   torch_from_python_cuda    INTERFACE: c10_cuda and torch_cuda, only when
#                             TORCH_FROM_PYTHON_CUDA is not empty
#   TORCH_PYTHON_LIBRARY      libtorch_python
#   TORCH_FROM_PYTHON_VERSION torch.__version__ (e.g. "2.13.0+cpu")
#   TORCH_FROM_PYTHON_CUDA    torch.version.cuda, empty for a CPU build
#   TORCH_FROM_PYTHON_DIR     the torch package directory
#   TORCH_FROM_PYTHON_CXX_STANDARD
#                             the C++ standard torch's headers need, as torch
#                             declares it for its own `torch` CMake target
#                             (share/cmake/Torch/TorchConfig.cmake: 20 on 2.13
#                             and 2.14; 17 where it declares none). It is a
#                             compile feature of torch_from_python, so every
#                             target that includes torch's headers compiles
#                             with it, and torch-free targets keep their own.
#                             torch 2.14's headers do not compile as C++17
#                             (`requires` clauses, pytorch #178150).
#   TORCH_FROM_PYTHON_PYBIND11_DEFINITIONS
#                             torch's pybind11 ABI tags as compile definitions
#                             (what torch.utils.cpp_extension adds), for an
#                             extension whose pybind11 state must be shared
#                             with torch's own bindings
find_package(Python REQUIRED COMPONENTS Interpreter Development.Module)

execute_process(
  COMMAND "${Python_EXECUTABLE}" -c [=[
import os
root = os.environ.get("TORCH_FROM_PYTHON_ROOT")
if root:
    namespace = {}
    with open(os.path.join(root, "version.py"), encoding="utf-8") as f:
        exec(compile(f.read(), "version.py", "exec"), namespace)
    # Every torch wheel since 2.7 uses the C++11 ABI; a tree cannot be asked
    # without importing it, nor for its pybind11 tags.
    facts = {"VERSION": namespace["__version__"], "CUDA": namespace.get("cuda") or "", "DIR": root,
             "CXX11_ABI": "1"}
else:
    import torch
    facts = {"VERSION": torch.__version__, "CUDA": torch.version.cuda or "",
             "DIR": os.path.dirname(torch.__file__), "CXX11_ABI": str(int(torch._C._GLIBCXX_USE_CXX11_ABI))}
    for tag in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI"):
        facts["PYBIND11_" + tag] = getattr(torch._C, "_PYBIND11_" + tag, "") or ""
import re
config = os.path.join(facts["DIR"], "share", "cmake", "Torch", "TorchConfig.cmake")
declared = re.search(r"CXX_STANDARD\s+(\d+)", open(config).read()) if os.path.isfile(config) else None
facts["CXX_STANDARD"] = declared.group(1) if declared else "17"
for key, value in facts.items():
    print(f"{key}={value}")
]=]
  OUTPUT_VARIABLE _torch_facts
  ERROR_VARIABLE _torch_query_error
  RESULT_VARIABLE _torch_query_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _torch_query_rc EQUAL 0)
  message(FATAL_ERROR
    "'${Python_EXECUTABLE}' cannot import torch (${_torch_query_error}). Install torch >= 2.11 "
    "first (a CPU machine: pip install torch==2.13.0), then build with "
    "'pip install --no-build-isolation <dir>' so the build sees that torch.")
endif()
string(REPLACE "\n" ";" _torch_facts "${_torch_facts}")
set(TORCH_FROM_PYTHON_PYBIND11_DEFINITIONS "")
foreach(_line IN LISTS _torch_facts)
  if(_line MATCHES "^PYBIND11_([A-Z_]+)=(.+)$")
    list(APPEND TORCH_FROM_PYTHON_PYBIND11_DEFINITIONS "PYBIND11_${CMAKE_MATCH_1}=\"${CMAKE_MATCH_2}\"")
  elseif(_line MATCHES "^([A-Z0-9_]+)=(.*)$")
    set(TORCH_FROM_PYTHON_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
  endif()
endforeach()

set(_torch_lib_dir "${TORCH_FROM_PYTHON_DIR}/lib")
set(_torch_libraries c10 torch torch_cpu torch_python)
if(NOT TORCH_FROM_PYTHON_CUDA STREQUAL "")
  list(APPEND _torch_libraries c10_cuda torch_cuda)
endif()
foreach(_lib IN LISTS _torch_libraries)
  find_library(TORCH_${_lib}_LIBRARY ${_lib} PATHS "${_torch_lib_dir}" NO_DEFAULT_PATH)
  if(NOT TORCH_${_lib}_LIBRARY)
    message(FATAL_ERROR "lib${_lib}.so is missing from ${_torch_lib_dir}; is this torch "
                        "(${TORCH_FROM_PYTHON_VERSION}) installed completely?")
  endif()
endforeach()
set(TORCH_PYTHON_LIBRARY "${TORCH_torch_python_LIBRARY}")

add_library(torch_from_python INTERFACE)
target_include_directories(torch_from_python SYSTEM INTERFACE
  "${TORCH_FROM_PYTHON_DIR}/include" "${TORCH_FROM_PYTHON_DIR}/include/torch/csrc/api/include")
target_link_libraries(torch_from_python INTERFACE
  "${TORCH_c10_LIBRARY}" "${TORCH_torch_LIBRARY}" "${TORCH_torch_cpu_LIBRARY}")
target_compile_definitions(torch_from_python INTERFACE
  _GLIBCXX_USE_CXX11_ABI=${TORCH_FROM_PYTHON_CXX11_ABI})
target_compile_features(torch_from_python INTERFACE cxx_std_${TORCH_FROM_PYTHON_CXX_STANDARD})
if(NOT TORCH_FROM_PYTHON_CUDA STREQUAL "")
  add_library(torch_from_python_cuda INTERFACE)
  target_link_libraries(torch_from_python_cuda INTERFACE
    torch_from_python "${TORCH_c10_cuda_LIBRARY}" "${TORCH_torch_cuda_LIBRARY}")
endif()
message(STATUS "building against torch ${TORCH_FROM_PYTHON_VERSION} (${TORCH_FROM_PYTHON_DIR}), "
               "C++${TORCH_FROM_PYTHON_CXX_STANDARD} for the targets that include its headers")
