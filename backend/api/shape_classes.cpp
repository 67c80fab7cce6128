#include "backend/api/shape_classes.h"

#include <algorithm>
#include <chrono>

#include "backend/api/environment.h"
#include "backend/api/stats_recorder.h"
#include "kiln/error.h"
#include "passes/generalize_graph.h"

namespace kiln {
namespace {

/// The largest step choose_steps tries: the product of a network's strides (32 for ResNets,
/// MobileNets and ConvNeXts, 16 for a ViT's patches), with one more stage to spare.
constexpr int64_t kMaxStep = 64;

/// The dims a class moves, whatever their grouping into size inputs: what a failed attempt is
/// counted by (choose_steps may merge a graph's size inputs).
std::vector<std::pair<size_t, int>> moved_dims(const ShapeClass& shape) {
  std::vector<std::pair<size_t, int>> dims;
  for (const auto& size_input : shape.size_inputs)
    dims.insert(dims.end(), size_input.begin(), size_input.end());
  std::sort(dims.begin(), dims.end());
  return dims;
}

/// How far the region's imports along one size input are one template (imports_follow).
enum class Follows {
  kNo,
  kNear,  // at the base and one and two steps from it
  kFar,   // there and at a distant binding too
};

/// Whether the region imported at `shape`'s base binding (`base`) and with size input `s` moved
/// by one and by two is one template along that input: every size a polynomial of it there; and
/// whether the import at a distant binding is that template there. Sizes floored by a stride
/// larger than the step can stay put over three steps (AlexNet's `(H - 7) // 4` is 55 at heights
/// 224 to 226), which the fit takes for constants; the distant binding is kMaxStep sizes away
/// (at least three steps), below the base where that is a binding (a sequence near its model's
/// longest has no room above).
Follows imports_follow(const ShapeClass& shape, size_t s, const std::vector<at::Tensor>& inputs,
                       const ir::Graph& base, const ShapeClasses::Import& import,
                       std::string& why_not) {
  const std::vector<int64_t> binding = base_binding(shape);
  auto moved = [&](int64_t by) {
    std::vector<int64_t> at = binding;
    at[s] += by;
    return import(inputs_at(shape, inputs, at));
  };
  std::optional<GraphTemplate> fitted;
  try {
    const ImportedGraph one = moved(1), two = moved(2);
    fitted = generalize_graph({&base, one.graph.get(), two.graph.get()},
                              {{binding[s]}, {binding[s] + 1}, {binding[s] + 2}}, why_not);
  } catch (const std::exception& e) {
    why_not = std::string("importing it there threw ") + e.what();
    return Follows::kNo;  // the graph refuses those sizes (a view that needs them even)
  }
  if (!fitted) return Follows::kNo;
  const int64_t distance = std::max<int64_t>(3, kMaxStep / shape.steps[s]);
  for (const int64_t by : {-distance, distance}) {
    if (binding[s] + by < 2) continue;
    try {
      const ImportedGraph distant = moved(by);
      const std::vector<int64_t> there = {binding[s] + by};
      return template_difference(*fitted, *distant.graph, there).empty() ? Follows::kFar
                                                                         : Follows::kNear;
    } catch (const std::exception&) {
      // sizes the graph refuses below the base: try above it
    }
  }
  return Follows::kNear;
}

/// Sets each size input's step to the smallest power of two, up to kMaxStep, whose bindings
/// the region's import follows near and far (imports_follow): 1 for a sequence length or a
/// batch, the product of the strides an image's height meets for a CNN (a floored size is a
/// polynomial only over sizes that many apart); else the smallest it follows near (a slice
/// clamped at a weight's length differs far away, and its members' imports are checked
/// anyway). Imports alone, a few milliseconds: a region with none has no class, and no pass has
/// run. Throws Unsupported where a size input has none.
void choose_steps(ShapeClass& shape, const std::vector<at::Tensor>& inputs,
                  const ShapeClasses::Import& import) {
  const ImportedGraph base = import(inputs);
  std::vector<int64_t> sizes = base_binding(shape);
  shape.steps.assign(sizes.size(), 1);
  shape.offsets.assign(sizes.size(), 0);
  for (size_t s = 0; s < sizes.size(); ++s) {
    std::optional<int64_t> near, far;
    std::string why_not;  // at step 1: the likeliest to say what varies
    for (int64_t step = 1; step <= kMaxStep && !far && sizes[s] / step >= 2; step *= 2) {
      shape.steps[s] = step;
      shape.offsets[s] = sizes[s] % step;
      std::string why;
      const Follows follows = imports_follow(shape, s, inputs, *base.graph, import, why);
      if (why_not.empty()) why_not = why;
      if (follows == Follows::kFar) far = step;
      if (follows != Follows::kNo && !near) near = step;
    }
    // A size input the graph cannot follow alone may be one symbol under two names: a frame
    // after a graph break has its own symbols per input (labels [s97, s38] beside logits
    // [s88, s3, V]). One at the same size now is taken as the same, and the steps chosen anew.
    size_t twin = 0;
    while (!near && twin < sizes.size() && (twin == s || sizes[twin] != sizes[s]))
      ++twin;
    if (!near && twin < sizes.size()) {
      merge_size_inputs(shape, twin, s);
      sizes.erase(sizes.begin() + static_cast<std::ptrdiff_t>(s));
      shape.steps.assign(sizes.size(), 1);
      shape.offsets.assign(sizes.size(), 0);
      s = static_cast<size_t>(-1);  // from the first again
      continue;
    }
    if (!near)
      throw Error(ErrorKind::Unsupported,
                  "no shape class: the imported graph's sizes follow size input " +
                      std::to_string(s) + " at no step up to " + std::to_string(kMaxStep) +
                      " (a size it floors by a stride the sizes seen do not divide); at step 1: " +
                      why_not);
    shape.steps[s] = far.value_or(*near);
    shape.offsets[s] = sizes[s] % shape.steps[s];
  }
}

}  // namespace

std::shared_ptr<const RegionSpecialization> ShapeClasses::plan(
    const std::vector<at::Tensor>& inputs) const {
  // Every call of a member comes here (its plans are not in the region's signature cache): the
  // lock is held only to find the class. Classes over the same dims differ in the outcome of a
  // size decision: a binding belongs to the one whose guards it passes. The plans made first
  // (every call), then the guards (once per new binding).
  for (const bool made : {true, false}) {
    for (size_t next = 0;;) {
      std::shared_ptr<Entry> entry;
      std::optional<std::vector<int64_t>> binding;
      {
        std::shared_lock lock(mutex_);
        for (; next < classes_.size() && !entry; ++next) {
          binding = binding_of(classes_[next]->shape, inputs);
          if (binding) entry = classes_[next];
        }
      }
      if (!entry) break;
      if (made) {
        std::lock_guard lock(entry->mutex);
        if (auto found = entry->plans.find(*binding); found != entry->plans.end())
          return found->second;
      } else if (auto spec = plan_of(*entry, *binding, inputs)) {
        return spec;
      }
    }
  }
  return nearest_plan(inputs, /*only_past_bounds=*/true);
}

std::shared_ptr<const RegionSpecialization> ShapeClasses::nearest_plan(
    const std::vector<at::Tensor>& inputs, bool only_past_bounds) const {
  std::shared_ptr<Entry> nearest;
  std::vector<int64_t> binding;
  size_t fewest = 0;
  {
    std::shared_lock lock(mutex_);
    size_t over_dims = 0;
    for (const auto& entry : classes_) {
      std::optional<std::vector<int64_t>> at = binding_of(entry->shape, inputs);
      if (!at || (nearest && entry->shape.size_inputs != nearest->shape.size_inputs)) continue;
      ++over_dims;
      const size_t failing = guards_failing(*entry->compiled, *at);
      if (!nearest || failing < fewest) {
        nearest = entry;
        binding = std::move(*at);
        fewest = failing;
      }
    }
    if (!nearest) return nullptr;
    const bool past_bounds =
        over_dims >= kMaxClassesPerDims ||
        std::count(failed_.begin(), failed_.end(), moved_dims(nearest->shape)) >= kMaxAttempts;
    if (only_past_bounds && !past_bounds) return nullptr;
  }
  log(LogLevel::Debug, nearest->compiled->name + ": run by the plan of a class compiled for " +
                           "other size decisions (" + guard_failure(*nearest->compiled, binding) +
                           ")");
  return plan_of(*nearest, binding, inputs, /*despite_guards=*/true);
}

std::string ShapeClasses::member_import_difference(Entry& entry,
                                                   const std::vector<int64_t>& binding,
                                                   const std::vector<at::Tensor>& inputs) const {
  // Once per new binding: an import reads the inputs' metadata and runs no pass (a fraction of
  // a millisecond for a transformer layer's region).
  try {
    const ImportedGraph imported = entry.import(inputs);
    const std::string why = import_difference(*entry.compiled, *imported.graph, binding);
    return why.empty() ? why : "its import at these sizes is not the class's: " + why;
  } catch (const std::exception& e) {
    return std::string("importing it at these sizes threw ") + e.what();
  }
}

std::shared_ptr<const RegionSpecialization> ShapeClasses::plan_of(
    Entry& entry, const std::vector<int64_t>& binding, const std::vector<at::Tensor>& inputs,
    bool despite_guards) const {
  std::lock_guard lock(entry.mutex);
  if (auto found = entry.plans.find(binding); found != entry.plans.end()) return found->second;
  // Guards are tested once per new binding, not per call.
  if (!despite_guards && !guards_hold(*entry.compiled, binding)) {
    log(LogLevel::Debug, entry.compiled->name + ": not a member of a shape class: " +
                             guard_failure(*entry.compiled, binding));
    return nullptr;
  }
  const std::string differs = member_import_difference(entry, binding, inputs);
  if (!differs.empty()) {
    log(LogLevel::Debug, entry.compiled->name + ": not a member of a shape class: " + differs);
    std::unique_lock lock(mutex_);
    failed_.push_back(moved_dims(entry.shape));
    return nullptr;
  }
  auto spec = std::make_shared<RegionSpecialization>();
  try {
    spec->compiled = instantiate_class(*entry.compiled, binding);
  } catch (const Error& e) {
    log(LogLevel::Debug,
        entry.compiled->name + ": " + e.what() + "; compiling these sizes on their own");
    return nullptr;
  }
  spec->frozen = entry.frozen;
  if (entry.plans.size() >= kMaxPlans) entry.plans.clear();  // made again when needed
  entry.plans.emplace(binding, spec);
  record_class_plan();
  return spec;
}

std::shared_ptr<const RegionSpecialization> ShapeClasses::compile(
    const std::vector<at::Tensor>& inputs, const std::vector<FrozenWeight>& weights,
    const Import& import, const CompileOptions& options, const std::string& name,
    const DeclaredSizes& declared) const {
  if (disabled_names().contains("shape_classes")) return nullptr;
  std::vector<size_t> frozen;
  for (const FrozenWeight& w : weights)
    frozen.push_back(w.input);
  // The graph's own symbolic sizes (dynamo's), at the first signature: no second one to wait for.
  if (!declared.empty()) {
    std::string why_not;
    if (std::optional<ShapeClass> shape = declare_class(inputs, frozen, declared, &why_not))
      return compile_class_of(std::move(*shape), inputs, weights, import, options, name);
    log(LogLevel::Debug, name + ": no shape class from the graph's symbolic sizes: " + why_not);
  }
  std::vector<std::vector<ShapeClass::Input>> earlier;
  {
    std::shared_lock lock(mutex_);
    earlier = recorded_;
  }
  // The most recent signature first: the one a stream of sizes is likeliest to share dims with.
  for (auto it = earlier.rbegin(); it != earlier.rend(); ++it) {
    std::string why_not;
    std::optional<ShapeClass> shape = form_class(*it, inputs, frozen, &why_not);
    if (!shape) {
      log(LogLevel::Debug, name + ": no shape class with an earlier signature: " + why_not);
      continue;
    }
    return compile_class_of(std::move(*shape), inputs, weights, import, options, name);
  }
  return nullptr;
}

bool ShapeClasses::first_of_its_offset(const ShapeClass& shape) const {
  if (std::all_of(shape.steps.begin(), shape.steps.end(), [](int64_t s) { return s == 1; }))
    return false;
  // The offsets of a signature over the class's dims (those of its first dim per size input).
  auto same_offsets = [&](const std::vector<ShapeClass::Input>& signature) {
    for (size_t s = 0; s < shape.size_inputs.size(); ++s) {
      const auto [input, dim] = shape.size_inputs[s].at(0);
      if (input >= signature.size() || !signature[input].defined ||
          dim >= std::ssize(signature[input].sizes) ||
          signature[input].sizes[dim] % shape.steps[s] != shape.offsets[s])
        return false;
    }
    return true;
  };
  std::shared_lock lock(mutex_);
  bool over_these_dims = false;
  for (const auto& entry : classes_) {
    if (entry->shape.size_inputs != shape.size_inputs) continue;
    over_these_dims = true;
    if (entry->shape.steps == shape.steps && entry->shape.offsets == shape.offsets) return false;
  }
  return over_these_dims && std::none_of(recorded_.begin(), recorded_.end(), same_offsets);
}

std::shared_ptr<const RegionSpecialization> ShapeClasses::compile_class_of(
    ShapeClass shape, const std::vector<at::Tensor>& inputs,
    const std::vector<FrozenWeight>& weights, const Import& import, const CompileOptions& options,
    const std::string& name) const {
  {
    std::shared_lock lock(mutex_);
    if (std::count(failed_.begin(), failed_.end(), moved_dims(shape)) >= kMaxAttempts)
      return nullptr;
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    choose_steps(shape, inputs, import);
    if (first_of_its_offset(shape)) {
      log(LogLevel::Debug, name + ": the first signature off the step of the classes over its " +
                               "dims; compiled on its own (its offset gets a class from its " +
                               "second size)");
      return nullptr;
    }
    const std::vector<int64_t> base = base_binding(shape);
    const auto [bindings, check] = class_bindings(base);
    std::vector<ImportedGraph> imports;
    std::vector<std::vector<int64_t>> dims;
    for (size_t j = 0; j < bindings.size(); ++j) {
      imports.push_back(import(j == 0 ? inputs : inputs_at(shape, inputs, bindings[j])));
      dims.push_back(dim_sizes(shape, bindings[j]));
    }
    ImportedGraph checked = import(inputs_at(shape, inputs, check));
    dims.push_back(dim_sizes(shape, check));
    auto compiled = compile_class(std::move(imports), bindings, std::move(checked), check, options,
                                  name, /*plan_memory=*/true, dims);
    auto region = instantiate_class(*compiled, base);
    region->compile_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    region->codegen_seconds = compiled->codegen_seconds;
    auto spec = std::make_shared<RegionSpecialization>();
    spec->compiled = region;
    spec->frozen = weights;
    auto entry = std::make_shared<Entry>();
    entry->shape = std::move(shape);
    entry->compiled = std::move(compiled);
    entry->frozen = weights;
    entry->import = import;
    entry->plans.emplace(base, spec);
    {
      std::unique_lock lock(mutex_);
      classes_.push_back(entry);
    }
    record_compiled(*region);
    record_shape_class();
    record_frozen_weights(static_cast<int64_t>(weights.size()));
    std::string steps;
    for (size_t s = 0; s < base.size(); ++s) {
      if (entry->shape.steps[s] > 1)
        steps += (steps.empty() ? ", size input " : ", ") + std::to_string(s) + " in steps of " +
                 std::to_string(entry->shape.steps[s]);
    }
    log(LogLevel::Info, name + ": compiled once for every size of " + std::to_string(base.size()) +
                            " input dims (a shape class" + steps + ") in " +
                            std::to_string(static_cast<int>(region->compile_seconds * 1e3)) +
                            " ms");
    return spec;
  } catch (const std::exception& e) {
    // Not kiln's failure: the region's graph changes with sizes near these in a way a class
    // cannot follow (a pass decides otherwise for a batch of 3 than of 4), or an import at a
    // moved size failed. Tried again from a later signature's sizes, a few times.
    {
      std::unique_lock lock(mutex_);
      failed_.push_back(moved_dims(shape));
    }
    // A class over these dims compiled before serves them instead, whatever its decisions.
    auto nearest = nearest_plan(inputs, /*only_past_bounds=*/false);
    log(LogLevel::Debug,
        name + ": " + e.what() + (nearest ? "" : "; compiling this signature on its own"));
    return nearest;
  }
}

void ShapeClasses::record(const std::vector<at::Tensor>& inputs,
                          const std::vector<size_t>& frozen) const {
  std::unique_lock lock(mutex_);
  recorded_.push_back(describe(inputs, frozen));
}

void ShapeClasses::forget_frozen() const {
  std::unique_lock lock(mutex_);
  std::erase_if(classes_, [](const auto& entry) { return !entry->frozen.empty(); });
  recorded_.clear();
}

}  // namespace kiln
