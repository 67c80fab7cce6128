// The ORC JIT: turns LLVM modules into machine code for the CPU kiln runs on, in this process.
// Torch-free; the LLVM code generator builds the modules, the runtime calls what lookup() returns.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace llvm {
class DataLayout;
class LLVMContext;
class Module;
namespace orc {
class JITDylib;
class LLJIT;
}  // namespace orc
}  // namespace llvm

namespace kiln::jit {

/// The CPU kiln runs on. Detected when kiln runs, not when it is built, so one build uses AVX-512
/// where the machine has it and still runs where it has only AVX2.
struct HostTarget {
  std::string triple;    // x86_64-pc-linux-gnu
  std::string cpu;       // znver4, skylake-avx512, ...
  std::string features;  // "+avx2,+avx512f,-amx-tile,..." (every feature LLVM knows, sorted)
};
const HostTarget& host_target();

/// Optimizes `module` in place for the host: verifies it (throws kiln::Error of kind Backend with
/// the verifier's message), sets the host triple and data layout where it has none, gives every
/// function definition "target-cpu"/"target-features" attributes (unless already set) and runs
/// the new pass manager's O3 pipeline with loop and SLP vectorization. OrcJit::add calls it.
void optimize_module(llvm::Module& module);

/// The host assembly of `module`, as the JIT would compile it. Codegen mutates IR, so this
/// compiles a copy; `module` is unchanged. Call it after optimize_module to see vectorized code.
std::string emit_assembly(const llvm::Module& module);

/// The code of one module added to the JIT. Destroying it frees the code: no function pointer
/// from lookup() may be called afterwards.
class JitModule {
 public:
  JitModule(const JitModule&) = delete;
  JitModule& operator=(const JitModule&) = delete;
  ~JitModule();

  /// The address of the function (or global) `name` defined by this module. Throws kiln::Error
  /// of kind Backend if the module does not define it.
  void* lookup(const std::string& name) const;
  /// Whether its code was loaded (from the disk cache or a code bundle) rather than compiled.
  bool loaded() const { return loaded_; }

 private:
  friend class OrcJit;
  JitModule(llvm::orc::LLJIT& jit, llvm::orc::JITDylib& dylib) : jit_(jit), dylib_(dylib) {}

  llvm::orc::LLJIT& jit_;
  llvm::orc::JITDylib& dylib_;
  bool loaded_ = false;
};

/// The process-wide JIT. All members may be called from several threads at once.
class OrcJit {
 public:
  /// Created on first use; never destroyed, so a JitModule released during process exit (a
  /// static cache, Python's teardown) still finds its JIT.
  static OrcJit& instance();

  const llvm::DataLayout& data_layout() const;
  const std::string& triple() const;

  /// Optimizes `module` (see optimize_module), and compiles it into a new JITDylib of its own.
  /// One dylib per module, rather than one ResourceTracker per module in a shared dylib, so two
  /// live modules may both define `kernel_0` and lookup() sees only its own module's symbols.
  /// Compiles eagerly: compile errors are thrown here, and lookup() costs no compile time.
  /// `context` must be the context `module` lives in. When `dump_prefix` is not empty, writes
  /// <dump_prefix>.ll (optimized IR) and <dump_prefix>.s (assembly) first. Otherwise, with the
  /// disk cache on (disk_cache.h) or a code bundle in use (code_bundle.h), loads the object code
  /// an earlier compile of the same module stored there (the bundle first), skipping
  /// optimization and codegen, and stores what it compiles in both.
  std::unique_ptr<JitModule> add(std::unique_ptr<llvm::Module> module,
                                 std::unique_ptr<llvm::LLVMContext> context,
                                 const std::string& dump_prefix = {});

  /// Modules compiled and modules loaded since the process began (zero before the JIT exists;
  /// asking does not create it).
  struct Counts {
    int64_t compiled = 0;
    int64_t loaded = 0;
  };
  static Counts counts();

 private:
  OrcJit();
  ~OrcJit() = delete;
  /// The module stored under `key` in the bundle in use or the disk cache, linked into a new
  /// dylib (`symbol` looked up), or null: no entry, or one that does not link (a disk entry is
  /// then deleted).
  std::unique_ptr<JitModule> load(const std::string& key, const std::string& symbol);
  /// `object` linked into a new dylib, or null with `failure` saying why.
  std::unique_ptr<JitModule> link(std::string_view object, const std::string& symbol,
                                  std::string& failure);

  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::string triple_;
  std::atomic<uint64_t> next_dylib_{0};
};

}  // namespace kiln::jit
