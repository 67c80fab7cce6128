// The interface both code generators implement: the kernels of one plan in, one compiled kernel
// per kernel out, in order, for the plan to run (runtime/kernel_abi.h). The driver picks the
// generator for the plan's device (backend/api/code_generators.h). Torch-free.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "passes/kernel/kernel.h"
#include "runtime/kernel_abi.h"

namespace kiln::codegen {

/// What a generator is asked for besides the kernels. A generator ignores what does not concern
/// its target.
struct CodegenRequest {
  /// Where the generator writes what it made (kernel IR, LLVM IR and assembly, or CUDA C and
  /// PTX), each file named <prefix>.<kind>; empty: nowhere.
  std::string dump_prefix;
  int device_index = 0;     // the GPU the kernels run on
  int compile_threads = 1;  // CPU: threads the plan's fresh kernels compile on
  /// CPU switches (KILN_DISABLE): reuse kernels earlier plans compiled, one pass for a mean and
  /// its variance.
  bool reuse_kernels = true;
  bool one_pass_moments = true;
};

struct GeneratedKernels {
  std::vector<CompiledKernel> kernels;  // one per kernel asked for, in order
  std::shared_ptr<void> code;           // keeps the kernels' code loaded
  double compile_seconds = 0;
  int reused = 0;          // kernels taken from code compiled for earlier plans
  int modules = 0;         // code modules made for the others
  int modules_loaded = 0;  // of those, loaded (disk cache or a package's code bundle), not compiled
};

class CodeGenerator {
 public:
  virtual ~CodeGenerator() = default;
  virtual const char* name() const = 0;
  /// "" when the generator can make and run code in this process; else why not.
  virtual std::string unavailable_reason() const = 0;
  /// Into how many pieces this target splits a full reduction so that threads share it (0: it
  /// does not), asked by the pipeline's split_reductions pass, which records the answer on the
  /// kernel (Kernel::split_pieces); the generator then performs that split.
  virtual int64_t reduction_pieces(const kernel::Kernel& kernel) const { return 0; }
  /// Throws kiln::Error: Unsupported for a kernel the generator cannot express (an op it does
  /// not cover is rejected before any code is emitted), Backend when its compiler fails.
  virtual GeneratedKernels compile(const std::vector<kernel::Kernel>& kernels,
                                   const CodegenRequest& request) const = 0;
};

}  // namespace kiln::codegen
