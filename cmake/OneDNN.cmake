# Defines kiln::onednn: oneDNN 3.2 built with GNU OpenMP, from the onednn-cpu-gomp and
# onednn-devel-cpu-gomp wheels (scripts/requirements.txt) in the Python environment kiln builds
# against. Not the oneDNN inside libtorch_cpu: its symbols are hidden, and ATen's convolution op
# creates a oneDNN primitive on every call (~25 us), where kiln creates one per shape
# (runtime/onednn/conv_primitive.h). Its libdnnl.so.3 needs libgomp.so.1: the process loads one,
# the torch wheel's, so oneDNN and ATen share one OpenMP thread pool.
#
# KILN_WITH_ONEDNN=OFF, or no oneDNN found: kiln builds without it, and prepack_conv's
# convolutions run through ATen's op.
option(KILN_WITH_ONEDNN "Run convolutions on kiln's own oneDNN primitives (onednn-cpu-gomp wheel)" ON)
if(NOT KILN_WITH_ONEDNN OR TARGET kiln::onednn)
  return()
endif()
set(_kiln_onednn_prefix "")
if(KILN_PYTHON)
  execute_process(COMMAND "${KILN_PYTHON}" -c "import sys; print(sys.prefix)"
                  OUTPUT_VARIABLE _kiln_onednn_prefix OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
find_path(KILN_ONEDNN_INCLUDE_DIR oneapi/dnnl/dnnl.hpp
          PATHS "${_kiln_onednn_prefix}/include" NO_DEFAULT_PATH)
find_library(KILN_ONEDNN_LIBRARY NAMES libdnnl.so.3
             PATHS "${_kiln_onednn_prefix}/lib" NO_DEFAULT_PATH)
if(KILN_ONEDNN_INCLUDE_DIR)
  file(STRINGS "${KILN_ONEDNN_INCLUDE_DIR}/oneapi/dnnl/dnnl_config.h" _kiln_onednn_runtime
       REGEX "#define DNNL_CPU_RUNTIME ")
endif()
if(NOT KILN_ONEDNN_INCLUDE_DIR OR NOT KILN_ONEDNN_LIBRARY
   OR NOT _kiln_onednn_runtime MATCHES "DNNL_RUNTIME_OMP")
  message(WARNING "kiln: no oneDNN 3 with GNU OpenMP under '${_kiln_onednn_prefix}' (pip install "
                  "onednn-cpu-gomp onednn-devel-cpu-gomp): building without it; convolutions run "
                  "through ATen's oneDNN op")
  set(KILN_WITH_ONEDNN OFF CACHE BOOL "" FORCE)
  return()
endif()
get_filename_component(KILN_ONEDNN_LIBRARY_DIR "${KILN_ONEDNN_LIBRARY}" DIRECTORY)
add_library(kiln::onednn INTERFACE IMPORTED GLOBAL)
# Only the files that include dnnl.hpp see these headers, first: the torch wheel ships another
# oneDNN's headers under the same names.
set_target_properties(kiln::onednn PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${KILN_ONEDNN_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES "${KILN_ONEDNN_LIBRARY}")
message(STATUS "kiln: oneDNN from ${KILN_ONEDNN_LIBRARY}")
