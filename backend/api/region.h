// Compiled regions. A RegionRunner owns one region and compiles it per input signature
// (import -> pass pipeline -> plan), or once for every size of the dims a new signature shows to
// vary (a shape class: shape_classes.h), then runs the plan. A region that fails to compile runs
// without kiln (the TorchScript interpreter, or eager PyTorch for an FX graph), with one warning
// (strict: an error). The frontend supplies the import and the fallback as a RegionSource.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/api/compile_graph.h"
#include "backend/api/region_specialization.h"
#include "backend/api/shape_classes.h"
#include "backend/api/signature_cache.h"
#include "backend/capture/import_ops.h"
#include "backend/fx/fx_program.h"
#include "kiln/kiln.h"
#include "passes/base/export.h"
#include "runtime/plan.h"

namespace kiln {

using Tensors = std::vector<at::Tensor>;

/// The frontend's half of a region.
struct RegionSource {
  /// The region as a graph IR for these inputs, the inputs at `frozen` (a subset of
  /// weight_inputs) imported as constants; throws kiln::Error (unsupported) if it cannot.
  std::function<ImportedGraph(const Tensors& inputs, const std::vector<size_t>& frozen)> import;
  /// Inputs that are the model's weights (parameters and buffers). A compile that needs no
  /// autograd freezes them: imports them as constants, so the passes fold batch norms into them
  /// and convert them once. The plan then serves only those very tensors, unchanged (same
  /// tensor, storage and version); when one changes, the region stops freezing and compiles
  /// again with the weights as inputs.
  std::vector<size_t> weight_inputs;
  /// Runs the region without kiln.
  std::function<Tensors(const Tensors&)> fallback;
  /// What runs the fallback, for messages and explain.
  RunsIn fallback_in = RunsIn::Interpreter;
  /// The region's ops, for explain when it is not compiled.
  std::vector<std::string> op_names;
  /// The graph's symbolic sizes of its inputs (torch.compile's dynamic dims). Empty where the
  /// graph has none: its region then forms shape classes only from two signatures
  /// (shape_classes.h).
  DeclaredSizes declared_sizes;
};

/// A TorchScript subgraph of dispatcher ops (see partition.h) as a region source.
RegionSource torchscript_region(std::shared_ptr<torch::jit::Graph> region);

/// An FX program's region; `fallback` runs the FX graph eagerly. The inputs at `weights` are the
/// module's parameters and buffers (frozen as constants when nothing needs their gradients).
KILN_INTERNAL RegionSource fx_region(std::shared_ptr<const FxProgram> program,
                                     std::function<Tensors(const Tensors&)> fallback,
                                     std::vector<size_t> weights,
                                     DeclaredSizes declared_sizes = {});

class KILN_INTERNAL RegionRunner {
 public:
  /// Sets of weights a region keeps frozen specializations for (instances of one model class
  /// compiled in one process); past it the region compiles with its weights as inputs, so that
  /// dead instances' weights are not kept without bound.
  static constexpr int kMaxWeightSets = 4;

  RegionRunner(RegionSource source, CompileOptions options, std::string name);

  Tensors run(const Tensors& inputs) const;
  /// Compiles the specialization for these inputs, if it is not compiled yet, without running.
  void prepare(const Tensors& inputs) const { specialize(inputs); }
  /// Adds the entries of the specialization that ran last (nothing if it never ran).
  void explain_into(Explanation& explanation) const;
  /// Number of input signatures seen (compiled or not).
  int num_specializations() const;

 private:
  using FrozenWeight = kiln::FrozenWeight;
  using Specialization = RegionSpecialization;
  std::shared_ptr<const Specialization> specialize(const Tensors& inputs) const;
  /// The key of these inputs' specialization in the cache: their signature, and where it would
  /// freeze their weights, the set of weights they hold; none past kMaxWeightSets sets.
  std::optional<SignatureKey> key_of(const Tensors& inputs) const;
  /// Whether a specialization compiled for these inputs would freeze their weights.
  bool may_freeze(const Tensors& inputs) const;
  /// Which set of weights `inputs` hold (the index of their TensorImpls among the sets met so
  /// far): part of a frozen specialization's key, since model instances of one class share
  /// dynamo's compiled graph and so this region. False when the region has met kMaxWeightSets
  /// other sets already. (A frozen specialization holds its weights, so their addresses are not
  /// reused while it lives.)
  bool admit_weight_set(const Tensors& inputs, int64_t& set) const;
  /// A new signature's specialization: compiled, or (unless strict) the reason it is not.
  std::shared_ptr<const Specialization> compile_specialization(const Tensors& inputs) const;
  /// For a signature past max_specializations (not cached).
  std::shared_ptr<const Specialization> past_limit() const;
  std::shared_ptr<const CompiledRegion> compile(const Tensors& inputs,
                                                const std::vector<size_t>& frozen) const;
  std::vector<FrozenWeight> weights_to_freeze(const Tensors& inputs) const;
  /// Called when a frozen weight changed (or past kMaxWeightSets), `why`: no more freezing;
  /// every signature compiles again.
  std::shared_ptr<const Specialization> unfreeze(const Tensors& inputs,
                                                 const std::string& why) const;
  /// Records the specialization that ran last, for explain.
  std::shared_ptr<const Specialization> remember(std::shared_ptr<const Specialization> spec) const;
  /// After the compiled plan failed with `failure`: runs the fallback (whose error, if it fails
  /// too, is the caller's and propagates), then raises (strict: Unsupported where the plan met
  /// one of kiln's stated limits, else Internal) or keeps these inputs' signature on the
  /// fallback from now on.
  /// Its optimized graph is deleted from the disk cache (graph_cache.h).
  Tensors recover(const Tensors& inputs, const CompiledRegion& compiled,
                  const std::exception& failure) const;

  RegionSource source_;
  CompileOptions options_;
  std::string name_;
  mutable SignatureCache<Specialization> cache_;
  mutable std::mutex last_mutex_;
  mutable std::shared_ptr<const Specialization> last_;
  mutable std::atomic<bool> warned_limit_ = false;
  mutable std::atomic<bool> unfrozen_ = false;
  mutable ShapeClasses classes_;
  mutable std::mutex weight_sets_mutex_;
  mutable std::vector<std::vector<const c10::TensorImpl*>> weight_sets_;
};

/// The TorchScript interpreter rethrows what a kiln::Region node raises as a plain
/// std::runtime_error, and the error's kind is lost. The region operator keeps the last kiln::Error
/// it let through on this thread; the compiled module takes it back (and clears it) to raise it
/// with its kind, when `rethrown` is that error rethrown.
std::optional<Error> take_region_error(const std::exception& rethrown);
void keep_region_error(const Error& error);
void clear_region_error();

/// Makes `runner` reachable from kiln::Region nodes whose attribute region_id is the result.
int64_t register_region_runner(std::shared_ptr<RegionRunner> runner);
void unregister_region_runner(int64_t id);
c10::Symbol region_id_attr();

}  // namespace kiln
