# Defines the imported target kiln::torch_cpu: LibTorch's CPU libraries (torch_cpu, c10) from the
# torch wheel in KILN_TORCH_DIR. We do not use TorchConfig.cmake: for a CUDA wheel it looks for a
# CUDA toolkit and links the CUDA libraries, which kiln must not need.
if(TARGET kiln::torch_cpu)
  return()
endif()
if(NOT KILN_TORCH_DIR OR NOT EXISTS "${KILN_TORCH_DIR}/include/torch/script.h")
  message(FATAL_ERROR "KILN_TORCH_DIR='${KILN_TORCH_DIR}' is not a torch package directory "
                      "(expected include/torch/script.h under it). Pass -DKILN_TORCH_DIR=<site-packages>/torch.")
endif()
if(NOT DEFINED KILN_TORCH_CXX11_ABI)
  set(KILN_TORCH_CXX11_ABI 1)
endif()
add_library(kiln::torch_cpu INTERFACE IMPORTED GLOBAL)
set_target_properties(kiln::torch_cpu PROPERTIES
  INTERFACE_SYSTEM_INCLUDE_DIRECTORIES
    "${KILN_TORCH_DIR}/include;${KILN_TORCH_DIR}/include/torch/csrc/api/include"
  INTERFACE_INCLUDE_DIRECTORIES
    "${KILN_TORCH_DIR}/include;${KILN_TORCH_DIR}/include/torch/csrc/api/include"
  INTERFACE_LINK_LIBRARIES "${KILN_TORCH_DIR}/lib/libtorch_cpu.so;${KILN_TORCH_DIR}/lib/libc10.so"
  INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=${KILN_TORCH_CXX11_ABI}")

# KILN_TORCH_CUDA: kiln's C++ test programs (tests, the fuzzer) also load libtorch_cuda, so they
# can make CUDA tensors (scripts/gpu-check turns it on). libkiln itself never links CUDA: it finds
# CUDA at run time (the device guard registry, NVRTC and the driver through dlopen).
option(KILN_TORCH_CUDA "Link kiln's C++ test programs with libtorch_cuda" OFF)
add_library(kiln::torch_cuda_for_tests INTERFACE IMPORTED GLOBAL)
if(KILN_TORCH_CUDA)
  if(NOT EXISTS "${KILN_TORCH_DIR}/lib/libtorch_cuda.so")
    message(FATAL_ERROR "KILN_TORCH_CUDA=ON, but ${KILN_TORCH_DIR}/lib has no libtorch_cuda.so "
                        "(this torch was built without CUDA)")
  endif()
  # --no-as-needed: nothing references its symbols; loading it registers CUDA with ATen.
  set_target_properties(kiln::torch_cuda_for_tests PROPERTIES INTERFACE_LINK_LIBRARIES
    "-Wl,--no-as-needed;${KILN_TORCH_DIR}/lib/libtorch_cuda.so;-Wl,--as-needed")
endif()
