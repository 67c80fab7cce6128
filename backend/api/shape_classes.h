// A region's shape classes (shape_class.h, compile_class.h): formed when a new signature differs
// from one compiled before only in some input dims, compiled once, and the plans made from them
// per binding (a few hundred kept; the rest made again when needed, without compiling).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "backend/api/compile_class.h"
#include "backend/api/region_specialization.h"
#include "backend/api/shape_class.h"

namespace kiln {

class ShapeClasses {
 public:
  using Import = std::function<ImportedGraph(const std::vector<at::Tensor>& inputs)>;
  static constexpr size_t kMaxPlans = 256;
  /// Classes over the same dims that fail to compile (from different base sizes) before those
  /// dims are not tried again: each attempt runs the pipeline three or more times.
  static constexpr int kMaxAttempts = 3;
  /// Classes compiled over the same dims, one per outcome of the size decisions. Past them (or
  /// past kMaxAttempts failures over those dims, or when a class for a new outcome fails to
  /// compile), a binding whose outcomes no class has runs the plan of the class whose guards it
  /// fails fewest: every guard is a choice of speed (which kernel, which schedule), never of what
  /// is computed, so that plan is correct there, only perhaps slower.
  static constexpr size_t kMaxClassesPerDims = 2;

  /// The plan of the class these inputs are a member of, made now if it is new; null when they
  /// are in none (or its plan cannot be made at their sizes).
  std::shared_ptr<const RegionSpecialization> plan(const std::vector<at::Tensor>& inputs) const;

  /// A new signature's specialization as a class: the one the graph declares (`declared`: its
  /// inputs' symbolic sizes; see declare_class), else one with a signature
  /// recorded before (the most recent first). Imported through `import` with the weights
  /// `weights` frozen; null where it forms none or the class fails to compile (logged at debug
  /// level; after kMaxAttempts failures those dims are not tried again).
  std::shared_ptr<const RegionSpecialization> compile(const std::vector<at::Tensor>& inputs,
                                                      const std::vector<FrozenWeight>& weights,
                                                      const Import& import,
                                                      const CompileOptions& options,
                                                      const std::string& name,
                                                      const DeclaredSizes& declared = {}) const;

  /// A signature compiled on its own (`frozen`: the inputs frozen as constants): one a later
  /// signature may form a class with.
  void record(const std::vector<at::Tensor>& inputs, const std::vector<size_t>& frozen) const;

  /// Drops the classes whose plans hold frozen weights, and the signatures recorded.
  void forget_frozen() const;

 private:
  struct Entry;
  /// The entry's plan at `binding` (`inputs`' own; made now if new), or null where its guards do
  /// not hold (unless `despite_guards`) or the region imported at these inputs is not the class's
  /// import there (then the entry's dims count as a failed attempt).
  std::shared_ptr<const RegionSpecialization> plan_of(Entry& entry,
                                                      const std::vector<int64_t>& binding,
                                                      const std::vector<at::Tensor>& inputs,
                                                      bool despite_guards = false) const;
  /// Why the region imported at `inputs` (at `binding`) is not the entry's class's import there,
  /// or empty.
  std::string member_import_difference(Entry& entry, const std::vector<int64_t>& binding,
                                       const std::vector<at::Tensor>& inputs) const;
  /// The plan of the class whose guards these inputs fail fewest, made despite them; null when
  /// they are a member of no class's dims, or (`only_past_bounds`) while more classes over
  /// those dims may still be compiled.
  std::shared_ptr<const RegionSpecialization> nearest_plan(const std::vector<at::Tensor>& inputs,
                                                           bool only_past_bounds) const;
  /// Whether `shape` (its steps chosen) is the first signature seen off the step of classes
  /// over its dims: neither a class nor a recorded signature has its offsets. Such a one is
  /// compiled on its own, and its offset gets a class from its second size: an offset seen once
  /// would cost a class compile (several pipelines) for one signature.
  bool first_of_its_offset(const ShapeClass& shape) const;
  std::shared_ptr<const RegionSpecialization> compile_class_of(
      ShapeClass shape, const std::vector<at::Tensor>& inputs,
      const std::vector<FrozenWeight>& weights, const Import& import, const CompileOptions& options,
      const std::string& name) const;

  struct Entry {
    ShapeClass shape;
    std::shared_ptr<const CompiledClass> compiled;
    std::vector<FrozenWeight> frozen;
    Import import;  // to check a new binding's import against the class's
    std::mutex mutex;
    std::map<std::vector<int64_t>, std::shared_ptr<const RegionSpecialization>> plans;
  };
  mutable std::shared_mutex mutex_;
  mutable std::vector<std::shared_ptr<Entry>> classes_;
  mutable std::vector<std::vector<ShapeClass::Input>> recorded_;
  /// The moved dims of classes that failed to compile, once per failure.
  mutable std::vector<std::vector<std::pair<size_t, int>>> failed_;
};

}  // namespace kiln
