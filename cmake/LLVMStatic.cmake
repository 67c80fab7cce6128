# Defines the imported target kiln::llvm: Debian's LLVM 19 as static archives, only the components
# kiln's CPU backend needs (ORC JIT, the native X86 target, the new pass manager's O3 pipeline).
#
# Why static: kiln must run next to other LLVM copies in one process (Triton, llvmlite, a
# libLLVM.so pulled in by someone else) and must not need an LLVM shared library where it runs.
# kiln::llvm carries the link option `--exclude-libs libLLVMCore.a:libLLVMSupport.a:...`, so in
# the shared library that links it (libkiln.so) every symbol from these archives becomes local:
# no LLVM symbol is exported, and no other LLVM copy in the process can interpose on ours (or we
# on it). kiln's own objects are compiled with hidden visibility (CMakeLists.txt), which covers
# the LLVM inline functions they instantiate (llvm::Error::~Error, LLJIT::lookup, ...); the option
# covers the archives' own definitions, which were not. It reaches libkiln.so through kiln_jit as
# a link requirement; in an executable (kiln's C++ tests) it changes nothing.
#
# Why llvm-config and not find_package(LLVM CONFIG): Debian's LLVMExports.cmake gives LLVMSupport
# the interface libraries /usr/lib/x86_64-linux-gnu/libz3.so (23 MB, only for the clang static
# analyzer's Z3 solver) and zstd::libzstd_shared; llvm-config --system-libs adds libxml2 (only for
# the Windows manifest tool). None of that code is reached from the components below, so we link
# the system libraries ourselves: zlib and zstd (LLVMSupport's compression), threads, dl, m, rt.
#
# RTTI and exceptions: `llvm-config-19 --has-rtti` says YES for Debian's build (the archives
# define `typeinfo for llvm::Value` etc.), so kiln keeps RTTI on everywhere and may even subclass
# LLVM's polymorphic classes. With an LLVM built without RTTI, a kiln file that subclasses an LLVM
# class with virtual methods fails to link ("undefined reference to typeinfo for llvm::...");
# such files would need `set_source_files_properties(<file> PROPERTIES COMPILE_OPTIONS -fno-rtti)`,
# and kiln must not dynamic_cast LLVM classes (use llvm::dyn_cast). The configure step below stops
# with that advice when RTTI is missing. LLVM is built with -fno-exceptions: kiln compiles with
# exceptions, which is fine as long as no kiln::Error is thrown through LLVM frames (callbacks
# LLVM calls: ORC transform layers, pass callbacks, diagnostic handlers); those frames run no
# destructors while unwinding. Throw only after the LLVM call returned.
if(TARGET kiln::llvm)
  return()
endif()

set(KILN_LLVM_VERSION_MAJOR 19)
find_program(KILN_LLVM_CONFIG NAMES llvm-config-${KILN_LLVM_VERSION_MAJOR}
             HINTS /usr/lib/llvm-${KILN_LLVM_VERSION_MAJOR}/bin)
if(NOT KILN_LLVM_CONFIG)
  message(FATAL_ERROR "llvm-config-${KILN_LLVM_VERSION_MAJOR} not found: install llvm-19-dev "
                      "(Debian/Ubuntu) or pass -DKILN_LLVM_CONFIG=<path to llvm-config of LLVM 19>.")
endif()

function(_kiln_llvm_config out_var)
  execute_process(COMMAND "${KILN_LLVM_CONFIG}" ${ARGN}
                  OUTPUT_VARIABLE output ERROR_VARIABLE error RESULT_VARIABLE result
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${KILN_LLVM_CONFIG} ${ARGN} failed: ${error}")
  endif()
  set(${out_var} "${output}" PARENT_SCOPE)
endfunction()

_kiln_llvm_config(KILN_LLVM_VERSION --version)
if(NOT KILN_LLVM_VERSION MATCHES "^${KILN_LLVM_VERSION_MAJOR}\\.")
  message(FATAL_ERROR "${KILN_LLVM_CONFIG} is LLVM ${KILN_LLVM_VERSION}; kiln needs LLVM "
                      "${KILN_LLVM_VERSION_MAJOR}.")
endif()
_kiln_llvm_config(KILN_LLVM_HAS_RTTI --has-rtti)
if(NOT KILN_LLVM_HAS_RTTI STREQUAL "YES")
  message(FATAL_ERROR "This LLVM was built without RTTI; see the comment at the top of "
                      "${CMAKE_CURRENT_LIST_FILE} for the -fno-rtti files kiln would need.")
endif()
_kiln_llvm_config(KILN_LLVM_INCLUDE_DIR --includedir)

# `passes` brings ipo, vectorize, instcombine, scalaropts, analysis, ...; `native` the X86 target
# with its asm printer (assembly dumps) and asm parser (inline asm). llvm-config returns the
# archives in dependency order, so no --start-group is needed.
set(KILN_LLVM_COMPONENTS
    orcjit native passes ipo vectorize instcombine scalaropts transformutils analysis target
    codegen asmprinter mc core support)
_kiln_llvm_config(KILN_LLVM_LIBFILES --link-static --libfiles ${KILN_LLVM_COMPONENTS})
separate_arguments(KILN_LLVM_LIBFILES UNIX_COMMAND "${KILN_LLVM_LIBFILES}")
foreach(lib IN LISTS KILN_LLVM_LIBFILES)
  if(NOT lib MATCHES "\\.a$")
    # Never fall back to libLLVM.so: it would export LLVM's symbols into the process.
    message(FATAL_ERROR "Expected a static LLVM archive, got ${lib}")
  endif()
endforeach()

set(_kiln_llvm_archives "")
foreach(lib IN LISTS KILN_LLVM_LIBFILES)
  get_filename_component(name "${lib}" NAME)
  list(APPEND _kiln_llvm_archives "${name}")
endforeach()
list(JOIN _kiln_llvm_archives ":" _kiln_llvm_archives)

find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)
find_library(KILN_ZSTD_LIBRARY NAMES zstd REQUIRED)

add_library(kiln::llvm INTERFACE IMPORTED GLOBAL)
# SYSTEM include: LLVM's headers are not built with kiln's -Wall -Wextra.
set_target_properties(kiln::llvm PROPERTIES
  INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${KILN_LLVM_INCLUDE_DIR}"
  INTERFACE_INCLUDE_DIRECTORIES "${KILN_LLVM_INCLUDE_DIR}"
  # What `llvm-config --cppflags` defines; LLVM's headers rely on the limit/format macros.
  INTERFACE_COMPILE_DEFINITIONS
    "_GNU_SOURCE;__STDC_CONSTANT_MACROS;__STDC_FORMAT_MACROS;__STDC_LIMIT_MACROS"
  INTERFACE_COMPILE_OPTIONS "-fvisibility-inlines-hidden"
  INTERFACE_LINK_LIBRARIES
    "${KILN_LLVM_LIBFILES};ZLIB::ZLIB;${KILN_ZSTD_LIBRARY};Threads::Threads;${CMAKE_DL_LIBS};m;rt"
  INTERFACE_LINK_OPTIONS "LINKER:--exclude-libs,${_kiln_llvm_archives}")
message(STATUS "kiln: LLVM ${KILN_LLVM_VERSION} (static, ${KILN_LLVM_CONFIG})")
