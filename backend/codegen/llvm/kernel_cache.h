// Kernels compiled earlier in this process, found by their code key (kernel_emitter.h). A plan
// compiled for another input size, or a region compiled again (its frozen weights changed, a
// trainer compiled the module again), shares many kernels with a plan compiled before: the layer
// norms and activations of a decoding step do not depend on the cache's length. Those are taken
// from the earlier plan's code, which stays loaded while any plan uses it, instead of being
// compiled again. Torch-free.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/codegen/llvm/cpu_schedule.h"
#include "backend/codegen/llvm/schedule.h"
#include "passes/kernel/kernel.h"
#include "runtime/jit/orc_jit.h"
#include "runtime/kernel_abi.h"

namespace kiln::codegen {

// What the generator makes of a kernel: the plan's type (runtime/kernel_abi.h); a split kernel's
// finish phase is run by run_compiled_kernel.
using kiln::CompiledKernel;

/// Runs `kernel` over its whole launch range in the pieces `cuts` gives ([0, range) when empty,
/// a size-generic kernel's range at `sizes`), then its finish phase if it has one: how the
/// executor runs it, without threads (tests). `sizes`: the size inputs of a size-generic kernel.
void run_compiled_kernel(const CompiledKernel& kernel, std::vector<void*> buffers,
                         const std::vector<int64_t>& cuts = {}, const int64_t* sizes = nullptr);

/// What a kernel's machine code depends on besides the kernel itself.
struct CodeVariant {
  CpuTarget target;          // what the schedules are computed for (cpu_schedule.h)
  bool avx512_math = false;  // math.h
  bool operator==(const CodeVariant&) const = default;
};

/// What a kernel's machine code depends on: its code key (kernel_emitter.h: code_key), its
/// schedule (cpu_schedule.h: schedule_key) and the variant.
struct CacheKey {
  kernel::Kernel kernel;
  std::string schedule;
  CodeVariant variant;
};

struct CachedKernel {
  std::shared_ptr<jit::JitModule> code;  // holding it keeps `kernel.function` loaded
  CompiledKernel kernel;
};

class KernelCache {
 public:
  static KernelCache& instance();

  /// Code for a kernel with the same computation (kernel::same_computation) as `key.kernel`,
  /// the same schedule and variant, from code that is still loaded; nullopt if there is none.
  /// The launch of a hit is the one it was compiled with: the caller's kernel may have another
  /// outermost size.
  std::optional<CachedKernel> find(const CacheKey& key);

  /// Records `compiled`, which lives in `code`. The cache holds no reference to `code`: once
  /// every plan using it is gone, the entry is dropped.
  void add(const CacheKey& key, const std::shared_ptr<jit::JitModule>& code,
           const CompiledKernel& compiled);

 private:
  struct Entry {
    CacheKey key;
    std::weak_ptr<jit::JitModule> code;
    CompiledKernel compiled;
  };
  void drop_unloaded();

  std::mutex mutex_;
  std::unordered_multimap<std::string, Entry> entries_;  // by text(key)
  size_t size_after_sweep_ = 0;
};

}  // namespace kiln::codegen
