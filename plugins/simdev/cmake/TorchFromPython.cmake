# Locate the torch that the active Python imports and describe it as the
# INTERFACE target `torch_from_python` (+ TORCH_PYTHON_LIBRARY), so the build
# links exactly the libtorch it will be loaded with.
#
# Why not find_package(Torch)? On CUDA builds of torch, TorchConfig re-runs
# torch's own CUDA toolkit discovery (nvrtc, cuDNN, ...), which fails on
# machines whose toolkit differs from torch's build machine — and we need none
# of it: devbridge and the CPU-side plugins link only c10 and torch_cpu.
#
# Defines: torch_from_python (INTERFACE target), TORCH_PYTHON_LIBRARY,
#          TORCH_FROM_PYTHON_VERSION (e.g. "2.13.0+cpu").
find_package(Python REQUIRED COMPONENTS Interpreter Development.Module)

execute_process(
  COMMAND "${Python_EXECUTABLE}" -c [=[
import torch
from torch.utils.cpp_extension import include_paths, library_paths
print(torch.__version__)
print(";".join(include_paths()))
print(library_paths()[0])
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
]=]
  OUTPUT_VARIABLE _torch_query
  ERROR_VARIABLE _torch_query_error
  RESULT_VARIABLE _torch_query_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _torch_query_rc EQUAL 0)
  message(FATAL_ERROR
    "'${Python_EXECUTABLE}' cannot import torch (${_torch_query_error}). Install torch >= 2.11 "
    "first (on the CI machine: pip install torch==2.13.0), then build with "
    "'pip install --no-build-isolation <dir>' so the build sees that torch.")
endif()
string(REPLACE "\n" ";" _torch_query "${_torch_query}")
list(GET _torch_query 0 TORCH_FROM_PYTHON_VERSION)
list(GET _torch_query -2 _torch_lib_dir)
list(GET _torch_query -1 _torch_cxx11_abi)
list(SUBLIST _torch_query 1 -1 _torch_includes)  # the joined include list
list(REMOVE_AT _torch_includes -1 -2)

foreach(_lib c10 torch torch_cpu torch_python)
  find_library(TORCH_${_lib}_LIBRARY ${_lib} PATHS "${_torch_lib_dir}" REQUIRED NO_DEFAULT_PATH)
endforeach()
set(TORCH_PYTHON_LIBRARY "${TORCH_torch_python_LIBRARY}")

add_library(torch_from_python INTERFACE)
target_include_directories(torch_from_python SYSTEM INTERFACE ${_torch_includes})
target_link_libraries(torch_from_python INTERFACE
  "${TORCH_c10_LIBRARY}" "${TORCH_torch_LIBRARY}" "${TORCH_torch_cpu_LIBRARY}")
target_compile_definitions(torch_from_python INTERFACE
  _GLIBCXX_USE_CXX11_ABI=${_torch_cxx11_abi})
message(STATUS "building against torch ${TORCH_FROM_PYTHON_VERSION} (${_torch_lib_dir})")
