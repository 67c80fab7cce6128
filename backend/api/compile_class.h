// A shape class: one region compiled once for every binding of its size inputs (dims of its
// inputs that vary from call to call), and the plan for each binding made from it without
// compiling anything.
//
// The region is imported and run through the pass pipeline at a base binding and once per size
// input moved alone. The optimized graphs become one template (passes/generalize_graph.h), the
// kernels one size-generic kernel each (passes/kernel/generalize.h), compiled once. A binding's
// plan is the template instantiated there, its memory planned, its kernels told their sizes:
// integer work, a fraction of a millisecond for a small model. Graphs that differ in more than
// their integers (a size-dependent decision came out otherwise), an integer that is not a
// monomial of the sizes, a folded constant that depends on them, a kernel the code generator
// cannot make size-generic: each makes compile_class throw Unsupported with the reason, and the
// caller compiles per signature as before.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/api/compile_graph.h"
#include "backend/capture/import_ops.h"
#include "passes/generalize_graph.h"

namespace kiln {

/// A size-dependent decision of the passes (passes/kernel/size_decisions.h) that the class's
/// plan relies on: `value`'s term of the size inputs less `less`'s compared with `threshold`
/// must come out as `outcome` at a member's binding.
struct DecisionGuard {
  kernel::SizeTerm value;
  int64_t threshold = 0;
  bool outcome = false;
  std::string what;
  kernel::SizeTerm less = {0, {}};
};

struct CompiledClass {
  GraphTemplate graph;
  /// The imported graphs (before the passes) as one template: a member's import must be it
  /// instantiated there (`import_difference`).
  GraphTemplate imported;
  /// The decisions whose value moves with the sizes, once each.
  std::vector<DecisionGuard> guards;
  std::vector<at::Tensor> constants;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  CompileOptions options;
  std::string name;
  bool plan_memory = true;
  /// One size-generic kernel per fused node (its `kernel` attribute), compiled once.
  std::vector<kernel::Kernel> kernels;
  std::vector<CompiledKernel> compiled;
  std::shared_ptr<void> code;
  int layout_conversions = 0;
  double compile_seconds = 0;
  double codegen_seconds = 0;
};

/// The bindings a class is compiled at: the base, then each size input moved alone by one
/// (`fitted`, laid out as kernel::Bindings says), and every one moved by two (`check`).
struct ClassBindings {
  kernel::Bindings fitted;
  std::vector<int64_t> check;
};
ClassBindings class_bindings(std::span<const int64_t> base);

/// `imports[j]`: the region imported at `bindings[j]` (laid out as kernel::Bindings says);
/// `check`: imported at `check_binding`, which the fit does not use: the template and the
/// kernels instantiated there must be what the pipeline makes there. `dims[j]`: the sizes of the
/// dims the size inputs stand for at each binding, the check's last (ShapeClass::steps); empty
/// where they are the bindings themselves. CPU only. Throws kiln::Error (Unsupported) where the
/// region has no shape class, saying why.
std::shared_ptr<const CompiledClass> compile_class(
    std::vector<ImportedGraph> imports, const kernel::Bindings& bindings, ImportedGraph check,
    std::span<const int64_t> check_binding, const CompileOptions& options, const std::string& name,
    bool plan_memory, const std::vector<std::vector<int64_t>>& dims = {});

/// Why `imported` (the region imported at `sizes`) is not the class's import template there, or
/// empty. The fit sees three bindings next to each other: an integer that is not a polynomial of
/// the sizes (a size floored by a stride of 4, `H // 4`) can take values there that a term gives
/// (a constant) and others elsewhere. A binding whose import differs is not a member: its plan
/// would compute other shapes than the graph does.
std::string import_difference(const CompiledClass& compiled, const ir::Graph& imported,
                              std::span<const int64_t> sizes);

/// Whether every guard of the class holds at `sizes`.
bool guards_hold(const CompiledClass& compiled, std::span<const int64_t> sizes);

/// How many of the class's guards (size decisions, kernel schedules) fail at `sizes`.
size_t guards_failing(const CompiledClass& compiled, std::span<const int64_t> sizes);

/// Empty when every guard of the class holds at `sizes`; else the first that fails, said.
std::string guard_failure(const CompiledClass& compiled, std::span<const int64_t> sizes);

/// The plan at `sizes` (one value per size input, each at least 2). Throws kiln::Error
/// (Unsupported) where the memory plan made there writes other buffers in place than the
/// kernels were compiled for.
std::shared_ptr<CompiledRegion> instantiate_class(const CompiledClass& compiled,
                                                  std::span<const int64_t> sizes);

}  // namespace kiln
