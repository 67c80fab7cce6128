#include "backend/api/class_constants.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace kiln {
namespace {

/// The sizes among `sizes` that an integer attribute of `node` holds.
std::vector<int64_t> sizes_in_attributes(const ir::Node& node, const std::vector<int64_t>& sizes) {
  std::vector<int64_t> held;
  auto note = [&](int64_t v) {
    if (std::find(sizes.begin(), sizes.end(), v) != sizes.end()) held.push_back(v);
  };
  for (const auto& [name, attr] : node.attrs()) {
    if (const auto* i = std::get_if<int64_t>(&attr)) note(*i);
    if (const auto* list = std::get_if<std::vector<int64_t>>(&attr))
      std::for_each(list->begin(), list->end(), note);
  }
  return held;
}

/// Attributes of the weight-packing ops that name the input a packed weight is for (oneDNN picks
/// its layout for those sizes): the packed values do not follow them. A layout that did would
/// give constants that differ between the bindings, and no class.
bool packing_hint(const std::string& attr) {
  return attr == "input_size" || attr == "rows" || attr == "batch_size";
}

/// The constants `graph` reads (its prim::Constant nodes' indices).
std::vector<int64_t> constants_read(const ir::Graph& graph) {
  std::vector<int64_t> indices;
  for (const ir::Node* node : graph.nodes()) {
    if (node->op() != ir::kConstantOp) continue;
    if (const auto* index = std::get_if<int64_t>(node->find_attr("index")))
      indices.push_back(*index);
  }
  return indices;
}

/// The nodes that read constant `index`, each with the input it reads it at.
std::vector<std::pair<const ir::Node*, size_t>> readers_of(const ir::Graph& graph, int64_t index) {
  std::vector<std::pair<const ir::Node*, size_t>> readers;
  const ir::Value* constant = nullptr;
  for (const ir::Node* node : graph.nodes()) {
    if (node->op() == ir::kConstantOp) {
      const auto* i = std::get_if<int64_t>(node->find_attr("index"));
      if (i && *i == index) constant = node->output();
      continue;
    }
    for (size_t k = 0; constant && k < node->inputs().size(); ++k)
      if (node->input(k) == constant) readers.emplace_back(node, k);
  }
  return readers;
}

/// Whether constant `index` is read only as the `packed` operand of kiln's oneDNN ops (a weight
/// packed in the layout oneDNN picks for the input's sizes). A class keeps the base binding's:
/// at sizes where the primitive reads another layout, the op packs its dense operand again
/// (runtime/onednn_packed.h), so that packing is a choice of speed, not of what is computed.
bool read_as_packed_weight_only(const ir::Graph& graph, int64_t index) {
  const auto readers = readers_of(graph, index);
  return !readers.empty() && std::all_of(readers.begin(), readers.end(), [](const auto& reader) {
    const std::string& op = reader.first->op();
    return reader.second == 2 && (op == "kiln::onednn_conv2d" || op == "kiln::onednn_conv3d" ||
                                  op == "kiln::onednn_linear");
  });
}

}  // namespace

bool shaped_by_a_size(const ir::Node& node, const std::vector<int64_t>& sizes, bool type_only) {
  const std::vector<int64_t> held = type_only ? sizes : sizes_in_attributes(node, sizes);
  if (held.empty()) return false;
  for (const ir::Value* out : node.outputs()) {
    for (int64_t dim : out->type().sizes)
      if (std::find(held.begin(), held.end(), dim) != held.end()) return true;
  }
  return false;
}

std::vector<int64_t> staying_integers(const GraphTemplate& imported) {
  std::vector<int64_t> staying;
  for (size_t i = 0; i < imported.terms.size(); ++i)
    if (!imported.terms[i]) staying.push_back(imported.base_integers[i]);
  std::sort(staying.begin(), staying.end());
  return staying;
}

std::vector<std::vector<int64_t>> moving_integers(const GraphTemplate& imported,
                                                  const std::vector<const ir::Graph*>& imports) {
  const std::vector<int64_t> staying = staying_integers(imported);
  std::vector<std::vector<int64_t>> moving;
  for (const ir::Graph* g : imports) {
    const std::vector<int64_t> values = integers(*g);
    std::vector<int64_t>& at = moving.emplace_back();
    for (size_t i = 0; i < values.size() && i < imported.terms.size(); ++i) {
      if (imported.terms[i] && !std::binary_search(staying.begin(), staying.end(), values[i]))
        at.push_back(values[i]);
    }
    std::sort(at.begin(), at.end());
  }
  return moving;
}

bool follows_the_sizes(const ir::Node& node, const std::vector<int64_t>& moving, bool type_only) {
  auto moves = [&](int64_t v) { return std::binary_search(moving.begin(), moving.end(), v); };
  for (const ir::Value* out : node.outputs()) {
    if (type_only && std::any_of(out->type().sizes.begin(), out->type().sizes.end(), moves))
      return true;
  }
  for (const auto& [name, attr] : node.attrs()) {
    if (packing_hint(name)) continue;
    if (const auto* i = std::get_if<int64_t>(&attr); i && moves(*i)) return true;
    if (const auto* list = std::get_if<std::vector<int64_t>>(&attr);
        list && std::any_of(list->begin(), list->end(), moves))
      return true;
  }
  return false;
}

bool ImportedNodes::has(const ir::Node& node) const {
  return !node.outputs().empty() && node.output(0)->id() < values;
}

bool ImportedNodes::moves(const ir::Node& node) const {
  return std::any_of(node.outputs().begin(), node.outputs().end(), [&](const ir::Value* v) {
    return std::binary_search(moving.begin(), moving.end(), v);
  });
}

ImportedNodes imported_nodes_of(const GraphTemplate& imported, const ir::Graph& graph) {
  ImportedNodes result;
  for (const ir::Value* v : graph.inputs())
    result.values = std::max(result.values, v->id() + 1);
  for (const ir::Node* node : graph.nodes()) {
    for (const ir::Value* v : node->outputs())
      result.values = std::max(result.values, v->id() + 1);
  }
  for (const ir::Node* node : nodes_with_terms(imported, graph))
    result.moving.insert(result.moving.end(), node->outputs().begin(), node->outputs().end());
  std::sort(result.moving.begin(), result.moving.end());
  return result;
}

std::string constants_difference(const ir::Graph& graph, const std::vector<at::Tensor>& a,
                                 const std::vector<at::Tensor>& b) {
  for (int64_t i : constants_read(graph)) {
    if (i < 0 || static_cast<size_t>(i) >= a.size() || static_cast<size_t>(i) >= b.size())
      return "constant " + std::to_string(i) + " is missing at one size";
    const at::Tensor &x = a[i], &y = b[i];
    if (x.unsafeGetTensorImpl() == y.unsafeGetTensorImpl()) continue;
    const bool same = x.layout() == at::kStrided && y.layout() == at::kStrided &&
                      x.sizes() == y.sizes() && x.strides() == y.strides() &&
                      x.scalar_type() == y.scalar_type() && at::equal(x, y);
    if (same || read_as_packed_weight_only(graph, i)) continue;
    const auto readers = readers_of(graph, i);
    return "the passes fold constant " + std::to_string(i) + " (read by " +
           (readers.empty() ? std::string("no node") : readers[0].first->op()) +
           ") to other values";
  }
  return "";
}
}  // namespace kiln
