# Locate the torch that the active Python imports, through torch's own CMake
# package (torch.utils.cmake_prefix_path), so the extension is built against
# exactly the libtorch it will be loaded with.
#
# Defines: TORCH_LIBRARIES, TORCH_INCLUDE_DIRS (from TorchConfig),
#          TORCH_PYTHON_LIBRARY, DEVBRIDGE_TORCH_VERSION (e.g. "2.13.0+cpu").
find_package(Python REQUIRED COMPONENTS Interpreter Development.Module)

execute_process(
  COMMAND "${Python_EXECUTABLE}" -c
          "import torch; print(torch.utils.cmake_prefix_path); print(torch.__version__)"
  OUTPUT_VARIABLE _torch_query
  RESULT_VARIABLE _torch_query_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _torch_query_rc EQUAL 0)
  message(FATAL_ERROR
    "devbridge: '${Python_EXECUTABLE}' cannot import torch. Install torch >= 2.11 "
    "first (on the CI machine: pip install torch==2.13.0), then build with "
    "'pip install --no-build-isolation .' so the build sees that torch.")
endif()
string(REPLACE "\n" ";" _torch_query "${_torch_query}")
list(GET _torch_query 0 _torch_prefix)
list(GET _torch_query 1 DEVBRIDGE_TORCH_VERSION)
list(APPEND CMAKE_PREFIX_PATH "${_torch_prefix}")

# TorchConfig warns about kineto on CPU builds; that is noise for us.
set(_saved_log_level "${CMAKE_MESSAGE_LOG_LEVEL}")
set(CMAKE_MESSAGE_LOG_LEVEL ERROR)
find_package(Torch REQUIRED)
set(CMAKE_MESSAGE_LOG_LEVEL "${_saved_log_level}")

find_library(TORCH_PYTHON_LIBRARY torch_python PATHS "${TORCH_INSTALL_PREFIX}/lib" REQUIRED
             NO_DEFAULT_PATH)
message(STATUS "devbridge: building against torch ${DEVBRIDGE_TORCH_VERSION}")
