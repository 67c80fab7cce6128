#include "backend/api/shape_class.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <numeric>

namespace kiln {
namespace {

/// Dims outermost first: by stride, larger first (ties keep the dims' own order).
std::vector<int> dim_order(const at::Tensor& t) {
  std::vector<int> order(t.dim());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return t.stride(a) > t.stride(b); });
  return order;
}

/// The strides of a tensor of `sizes` dense in `order` but along its `broadcast` dims (stride 0:
/// an expanded tensor, such as the one-element tensor torch.compile's regions take a size from).
std::vector<int64_t> dense_strides(const std::vector<int64_t>& sizes, const std::vector<int>& order,
                                   const std::vector<bool>& broadcast) {
  std::vector<int64_t> strides(sizes.size(), 0);
  int64_t stride = 1;
  for (auto d = order.rbegin(); d != order.rend(); ++d) {
    if (broadcast[*d]) continue;
    strides[*d] = stride;
    stride *= std::max<int64_t>(sizes[*d], 1);
  }
  return strides;
}

/// Whether `strides` are those dense_strides gives (size-1 dims may have any stride).
bool dense_in(const std::vector<int64_t>& sizes, c10::IntArrayRef strides,
              const ShapeClass::Input& layout) {
  const std::vector<int64_t> want = dense_strides(sizes, layout.dim_order, layout.broadcast);
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] != 1 && strides[d] != want[d]) return false;
  return true;
}

bool same_kind(const ShapeClass::Input& a, const at::Tensor& b) {
  if (a.defined != b.defined()) return false;
  if (!b.defined()) return true;
  return a.dtype == b.scalar_type() && a.device == b.device() &&
         a.requires_grad == b.requires_grad() && b.layout() == at::kStrided &&
         static_cast<int64_t>(a.sizes.size()) == b.dim();
}

int64_t step_of(const ShapeClass& shape_class, size_t s) {
  return shape_class.steps.empty() ? 1 : shape_class.steps[s];
}

int64_t offset_of(const ShapeClass& shape_class, size_t s) {
  return shape_class.offsets.empty() ? 0 : shape_class.offsets[s];
}

/// The value of size input `s` whose dims are `size` long, or -1 where none is (off its step).
int64_t value_of(const ShapeClass& shape_class, size_t s, int64_t size) {
  const int64_t step = step_of(shape_class, s), above = size - offset_of(shape_class, s);
  if (above < 0 || above % step != 0) return -1;
  return above / step;
}

/// The size of a derived dim at a binding whose size inputs' dims are `dims` long.
int64_t derived_size(const SizeExpression& size, std::span<const int64_t> dims) {
  return size.evaluate([&](int64_t s, int64_t) { return dims[static_cast<size_t>(s)]; });
}

/// `size` with its kDim tokens reading size inputs where they read symbols; none where a symbol
/// is no size input.
std::optional<SizeExpression> over_size_inputs(const SizeExpression& size,
                                               const std::map<int, int>& groups) {
  std::vector<SizeExpression::Token> tokens = size.tokens();
  for (SizeExpression::Token& token : tokens) {
    if (token.op != SizeExpression::Op::kDim) continue;
    auto group = groups.find(static_cast<int>(token.a));
    if (group == groups.end()) return std::nullopt;
    token = {SizeExpression::Op::kDim, group->second, 0};
  }
  return SizeExpression(std::move(tokens));
}

}  // namespace

std::vector<ShapeClass::Input> describe(const std::vector<at::Tensor>& inputs,
                                        const std::vector<size_t>& weights) {
  std::vector<ShapeClass::Input> described;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    ShapeClass::Input input;
    input.defined = t.defined();
    if (t.defined() && t.layout() == at::kStrided) {
      input.dtype = t.scalar_type();
      input.device = t.device();
      input.requires_grad = t.requires_grad();
      input.sizes = t.sizes().vec();
      input.strides = t.strides().vec();
      input.dim_order = dim_order(t);
      input.size_input.assign(t.dim(), -1);
      for (int64_t d = 0; d < t.dim(); ++d)
        input.broadcast.push_back(t.stride(d) == 0 && t.size(d) > 1);
      if (std::find(weights.begin(), weights.end(), i) != weights.end())
        input.weight = t.unsafeGetTensorImpl();
    }
    described.push_back(std::move(input));
  }
  return described;
}

std::optional<ShapeClass> form_class(const std::vector<ShapeClass::Input>& earlier,
                                     const std::vector<at::Tensor>& now,
                                     const std::vector<size_t>& weights, std::string* why_not) {
  auto none = [&](const std::string& why) {
    if (why_not) *why_not = why;
    return std::nullopt;
  };
  if (earlier.size() != now.size()) return none("another number of inputs");
  ShapeClass result;
  result.global_state = signature_of(std::vector<at::Tensor>{});
  result.inputs = describe(now, weights);
  std::map<std::pair<int64_t, int64_t>, int> groups;  // (earlier, now) -> size input
  for (size_t i = 0; i < now.size(); ++i) {
    const ShapeClass::Input& a = earlier[i];
    const at::Tensor& b = now[i];
    ShapeClass::Input& input = result.inputs[i];
    const std::string at = "input " + std::to_string(i);
    if (!same_kind(a, b)) return none(at + " differs in dtype, device, rank or requires_grad");
    if (!b.defined()) continue;
    if (input.weight) {
      if (a.weight != input.weight) return none(at + " is another weight");
      continue;
    }
    for (int d = 0; d < b.dim(); ++d) {
      if (a.sizes[d] == b.size(d)) continue;
      if (b.size(d) < 2) return none(at + " has a size below 2 in a dim that moved");
      auto [group, added] =
          groups.try_emplace({a.sizes[d], b.size(d)}, static_cast<int>(result.size_inputs.size()));
      if (added) result.size_inputs.emplace_back();
      result.size_inputs[group->second].emplace_back(i, d);
      input.size_input[d] = group->second;
    }
    const bool moved =
        std::any_of(input.size_input.begin(), input.size_input.end(), [](int s) { return s >= 0; });
    if (moved ? !dense_in(input.sizes, b.strides(), input) || a.broadcast != input.broadcast
              : c10::IntArrayRef(a.strides) != b.strides())
      return none(at + " is not dense in its dim order, or its strides changed");
  }
  if (result.size_inputs.empty()) return none("no dim moved");
  return result;
}

std::optional<ShapeClass> declare_class(const std::vector<at::Tensor>& now,
                                        const std::vector<size_t>& weights,
                                        const DeclaredSizes& declared, std::string* why_not) {
  auto none = [&](const std::string& why) {
    if (why_not) *why_not = why;
    return std::nullopt;
  };
  const std::vector<std::vector<int>>& symbols = declared.symbols;
  if (symbols.size() != now.size()) return none("the symbols name another number of inputs");
  ShapeClass result;
  result.global_state = signature_of(std::vector<at::Tensor>{});
  result.inputs = describe(now, weights);
  std::map<int, int> groups;  // symbol -> size input
  std::vector<bool> sized;    // per input: whether a dim of it is symbolic or derived
  for (size_t i = 0; i < now.size(); ++i) {
    const at::Tensor& t = now[i];
    ShapeClass::Input& input = result.inputs[i];
    const std::string at = "input " + std::to_string(i);
    sized.push_back(
        std::any_of(symbols[i].begin(), symbols[i].end(), [](int s) { return s != -1; }));
    if (!sized.back()) continue;
    if (!t.defined() || t.layout() != at::kStrided || t.dim() != std::ssize(symbols[i]))
      return none(at + " is not a strided tensor of the rank its symbols say");
    if (input.weight) return none(at + " is a weight with a symbolic size");
    for (int d = 0; d < t.dim(); ++d) {
      const int symbol = symbols[i][d];
      if (symbol < 0) continue;
      if (t.size(d) < 2) return none(at + " has a size below 2 in a symbolic dim");
      auto [group, added] = groups.try_emplace(symbol, std::ssize(result.size_inputs));
      if (added) result.size_inputs.emplace_back();
      const auto& first = result.size_inputs[group->second];
      if (!first.empty() && now[first[0].first].size(first[0].second) != t.size(d))
        return none(at + " differs in a dim from another of the same symbol");
      result.size_inputs[group->second].emplace_back(i, d);
      input.size_input[d] = group->second;
    }
  }
  if (result.size_inputs.empty()) return none("no symbolic dim");
  const std::vector<int64_t> dims = dim_sizes(result, base_binding(result));
  // The inputs that are not dense in their dim order (or have symbolic strides only) take the
  // strides the graph declares, checked here.
  for (size_t i = 0; i < now.size(); ++i) {
    ShapeClass::Input& input = result.inputs[i];
    auto declared_strides =
        std::find_if(declared.strides.begin(), declared.strides.end(),
                     [&](const DeclaredSizes::Strides& s) { return s.input == i; });
    const bool dense = !sized[i] || dense_in(input.sizes, now[i].strides(), input);
    if (dense && (sized[i] || declared_strides == declared.strides.end())) continue;
    const std::string at = "input " + std::to_string(i);
    if (declared_strides == declared.strides.end() ||
        std::ssize(declared_strides->strides) != now[i].dim())
      return none(at + " is not dense in its dim order, and the graph declares no strides");
    if (input.weight) return none(at + " is a weight with symbolic strides");
    for (int d = 0; d < now[i].dim(); ++d) {
      std::optional<SizeExpression> stride =
          over_size_inputs(declared_strides->strides[static_cast<size_t>(d)], groups);
      if (!stride || derived_size(*stride, dims) != now[i].stride(d))
        return none(at + "'s strides are not those the graph declares");
      input.stride_terms.push_back(std::move(*stride));
    }
  }
  for (const DeclaredSizes::Derived& derived : declared.derived) {
    const std::string at =
        "input " + std::to_string(derived.input) + "'s dim " + std::to_string(derived.dim);
    if (derived.input >= now.size() || derived.dim < 0 ||
        derived.dim >= std::ssize(symbols[derived.input]) ||
        symbols[derived.input][derived.dim] != -2)
      return none(at + " is not a derived dim of the symbols");
    std::optional<SizeExpression> size = over_size_inputs(derived.size, groups);
    if (!size) return none(at + " is derived from a symbol no dim is");
    if (derived_size(*size, dims) != now[derived.input].size(derived.dim))
      return none(at + " is not the value of its expression");
    result.inputs[derived.input].derived.emplace_back(derived.dim, std::move(*size));
  }
  return result;
}

void merge_size_inputs(ShapeClass& shape_class, size_t keep, size_t drop) {
  auto renumbered = [&](int64_t s) -> int64_t {
    if (s == static_cast<int64_t>(drop)) s = static_cast<int64_t>(keep);
    return s > static_cast<int64_t>(drop) ? s - 1 : s;
  };
  auto rewritten = [&](const SizeExpression& size) {
    std::vector<SizeExpression::Token> tokens = size.tokens();
    for (SizeExpression::Token& token : tokens)
      if (token.op == SizeExpression::Op::kDim) token.a = renumbered(token.a);
    return SizeExpression(std::move(tokens));
  };
  auto& dims = shape_class.size_inputs;
  dims[keep].insert(dims[keep].end(), dims[drop].begin(), dims[drop].end());
  dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(drop));
  for (std::vector<int64_t>* per_input : {&shape_class.steps, &shape_class.offsets})
    if (drop < per_input->size())
      per_input->erase(per_input->begin() + static_cast<std::ptrdiff_t>(drop));
  for (ShapeClass::Input& input : shape_class.inputs) {
    for (int& s : input.size_input)
      if (s >= 0) s = static_cast<int>(renumbered(s));
    for (auto& [dim, size] : input.derived)
      size = rewritten(size);
    for (SizeExpression& stride : input.stride_terms)
      stride = rewritten(stride);
  }
}

std::optional<std::vector<int64_t>> binding_of(const ShapeClass& shape_class,
                                               const std::vector<at::Tensor>& inputs) {
  if (inputs.size() != shape_class.inputs.size()) return std::nullopt;
  if (signature_of(std::vector<at::Tensor>{}) != shape_class.global_state) return std::nullopt;
  std::vector<int64_t> binding(shape_class.size_inputs.size(), -1);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ShapeClass::Input& want = shape_class.inputs[i];
    const at::Tensor& t = inputs[i];
    if (t.defined() != want.defined) return std::nullopt;
    if (!t.defined()) continue;
    if (t.scalar_type() != want.dtype || t.device() != want.device ||
        t.requires_grad() != want.requires_grad || t.layout() != at::kStrided ||
        t.dim() != static_cast<int64_t>(want.sizes.size()))
      return std::nullopt;
    if (want.weight && t.unsafeGetTensorImpl() != want.weight) return std::nullopt;
    // Derived dims and declared strides are checked below, once the binding is known.
    bool moved = !want.derived.empty() || !want.stride_terms.empty();
    for (int d = 0; d < t.dim(); ++d) {
      const int s = want.size_input[d];
      if (s < 0) {
        const bool derived = std::any_of(want.derived.begin(), want.derived.end(),
                                         [&](const auto& e) { return e.first == d; });
        if (!derived && t.size(d) != want.sizes[d]) return std::nullopt;
        continue;
      }
      moved = true;
      const int64_t value = value_of(shape_class, s, t.size(d));
      if (t.size(d) < 2 || value < 2 || (binding[s] >= 0 && binding[s] != value))
        return std::nullopt;
      binding[s] = value;
    }
    if (want.stride_terms.empty() && (moved ? !dense_in(t.sizes().vec(), t.strides(), want)
                                            : t.strides() != c10::IntArrayRef(want.strides)))
      return std::nullopt;
  }
  if (std::find(binding.begin(), binding.end(), -1) != binding.end()) return std::nullopt;
  const std::vector<int64_t> dims = dim_sizes(shape_class, binding);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ShapeClass::Input& want = shape_class.inputs[i];
    try {
      for (const auto& [d, size] : want.derived)
        if (inputs[i].size(d) != derived_size(size, dims)) return std::nullopt;
      for (size_t d = 0; d < want.stride_terms.size(); ++d)
        if (inputs[i].size(d) != 1 &&
            inputs[i].stride(d) != derived_size(want.stride_terms[d], dims))
          return std::nullopt;
    } catch (const std::exception&) {
      return std::nullopt;  // an expression divides by zero at this binding
    }
  }
  return binding;
}

std::vector<int64_t> base_binding(const ShapeClass& shape_class) {
  std::vector<int64_t> binding;
  for (size_t s = 0; s < shape_class.size_inputs.size(); ++s) {
    const auto [input, dim] = shape_class.size_inputs[s].at(0);
    binding.push_back(value_of(shape_class, s, shape_class.inputs[input].sizes[dim]));
  }
  return binding;
}

std::vector<int64_t> dim_sizes(const ShapeClass& shape_class, std::span<const int64_t> binding) {
  std::vector<int64_t> sizes;
  for (size_t s = 0; s < binding.size(); ++s)
    sizes.push_back(step_of(shape_class, s) * binding[s] + offset_of(shape_class, s));
  return sizes;
}

std::vector<at::Tensor> inputs_at(const ShapeClass& shape_class,
                                  const std::vector<at::Tensor>& inputs,
                                  std::span<const int64_t> binding) {
  std::vector<at::Tensor> result = inputs;
  const std::vector<int64_t> dims = dim_sizes(shape_class, binding);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ShapeClass::Input& input = shape_class.inputs[i];
    if (!input.defined) continue;
    std::vector<int64_t> sizes = inputs[i].sizes().vec();
    bool moved = false;
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (input.size_input[d] < 0) continue;
      sizes[d] = dims[input.size_input[d]];
      moved = true;
    }
    for (const auto& [d, size] : input.derived) {
      sizes[d] = derived_size(size, dims);
      moved = true;
    }
    if (!input.stride_terms.empty()) {
      // A view of a buffer just large enough, at its declared strides.
      std::vector<int64_t> strides;
      int64_t extent = 1;
      for (size_t d = 0; d < sizes.size(); ++d) {
        strides.push_back(derived_size(input.stride_terms[d], dims));
        extent += (sizes[d] - 1) * strides.back();
      }
      const bool empty = std::find(sizes.begin(), sizes.end(), 0) != sizes.end();
      result[i] = at::empty({empty ? 0 : extent}, inputs[i].options().requires_grad(false))
                      .as_strided(sizes, strides);
      if (input.requires_grad) result[i].requires_grad_(true);
      continue;
    }
    if (!moved) continue;
    std::vector<int64_t> strides = dense_strides(sizes, input.dim_order, input.broadcast);
    // A dim of one may have any stride, and an import reads it: it follows the layout where it
    // did at these inputs (a [b, 1, n, n] mask), else it is kept (a [1, n] slice of a [1, 512]
    // buffer has a stride of 512 at every n). A member's own import is checked anyway.
    const std::vector<int64_t> was =
        dense_strides(inputs[i].sizes().vec(), input.dim_order, input.broadcast);
    for (size_t d = 0; d < sizes.size(); ++d)
      if (sizes[d] == 1 && inputs[i].size(d) == 1 && inputs[i].stride(d) != was[d])
        strides[d] = inputs[i].stride(d);
    result[i] = at::empty_strided(sizes, strides, inputs[i].options().requires_grad(false));
    if (input.requires_grad) result[i].requires_grad_(true);
  }
  return result;
}

}  // namespace kiln
