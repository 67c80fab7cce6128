// The LLVM code generator's front door: the kernels of one plan become LLVM modules (one per
// compile thread, compile_groups.h; one when the plan is dumped), compiled by the ORC JIT for
// the CPU kiln runs on. Kernels an earlier plan compiled are taken from its code. Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/codegen/llvm/kernel_cache.h"
#include "backend/codegen/llvm/schedule.h"
#include "passes/kernel/kernel.h"
#include "runtime/kernel_abi.h"

namespace kiln::codegen {

using kiln::KernelFunction;

struct CompiledKernels {
  /// The JIT modules the functions live in (this plan's, and those of earlier plans it takes
  /// kernels from: kernel_cache.h); the functions live as long as it does.
  std::shared_ptr<void> code;
  std::vector<CompiledKernel> kernels;
  int reused = 0;   // distinct kernels taken from earlier plans' code (KernelCache), not compiled
  int modules = 0;  // JIT modules made for the rest
  int modules_loaded = 0;  // of those, loaded (disk cache or a package), not compiled
  double compile_seconds = 0;
};

struct CodegenOptions {
  /// Where <prefix>.kernel (kernel IR), <prefix>.ll (optimized LLVM IR) and <prefix>.s
  /// (assembly) are written; empty: nowhere.
  std::string dump_prefix;
  /// 0: the host's widest (512 with AVX-512, else 256 with AVX2/AVX, else 128).
  int vector_bits = 0;
  /// Use AVX-512 instructions in exp and the functions built on it where the host has them
  /// (math.h: MathTarget); false: generic IR only (tests compare the two).
  bool avx512_math = true;
  /// Take kernels that earlier plans compiled from their code (KernelCache); false: compile
  /// every kernel of the plan (`KILN_DISABLE=kernel_cache`, for bisecting).
  bool reuse_kernels = true;
  /// Outputs of this many bytes or more are written with streaming stores; 0: this process's
  /// choice (host_stream_bytes in store_policy.h: 8 MB, or half the L3 on huge pages).
  int64_t stream_bytes = 0;
  /// Threads the plan's fresh kernels compile on, in modules of their own (compile_groups.h);
  /// kiln's callers pass PyTorch's intra-op thread count (torch.set_num_threads).
  int compile_threads = 1;
  /// A mean and its variance (layer norm, var, std) share one pass over each row (moments.h);
  /// false: two passes (`KILN_DISABLE=one_pass_moments`, for bisecting).
  bool one_pass_moments = true;
};

/// The (op, operand dtype) pairs the LLVM emitter covers: every pair the kernel IR defines
/// (kernel::defined_on) but integer division, which the lowering never asks for (ATen divides
/// integers in float). compile_kernels rejects a kernel with any other op before emitting.
bool llvm_covers(kernel::Op op, kernel::DType operand);

/// Kernels compiled before in this process (KernelCache) are reused, unless the code is dumped
/// (`dump_prefix`: the dump shows the whole plan) or `reuse_kernels` is false. Throws kiln::Error:
/// Unsupported for a kernel the generator cannot express, Backend when LLVM fails.
CompiledKernels compile_kernels(const std::vector<kernel::Kernel>& kernels,
                                const CodegenOptions& options);

/// The vector width and math functions `options` choose on this host.
CodeVariant code_variant(const CodegenOptions& options);

/// The optimized module's assembly for these kernels (what the JIT runs), for tests.
std::string kernels_assembly(const std::vector<kernel::Kernel>& kernels,
                             const CodegenOptions& options);

}  // namespace kiln::codegen
