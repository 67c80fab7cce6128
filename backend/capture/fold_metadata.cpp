#include "backend/capture/fold_metadata.h"

#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <optional>

namespace kiln {

using torch::jit::Node;
using torch::jit::Value;

bool may_be_written(const Value* value) {
  static const c10::Symbol region = c10::Symbol::fromQualString("kiln::Region");
  for (const torch::jit::Use& use : value->uses()) {
    const auto kind = use.user->kind();
    if (kind == region) continue;
    const c10::FunctionSchema* schema = use.user->maybeSchema();
    if (!schema) {
      const bool reads_metadata = kind == c10::prim::dtype || kind == c10::prim::device ||
                                  kind == c10::prim::requires_grad || kind == c10::prim::is_cuda ||
                                  kind == c10::prim::Return;
      if (!reads_metadata) return true;
      continue;
    }
    if (use.offset >= schema->arguments().size()) return true;  // varargs
    const c10::AliasInfo* alias = schema->arguments()[use.offset].alias_info();
    if (alias && alias->isWrite()) return true;
  }
  return false;
}

bool replace_with_constant(Value* value, const c10::IValue& constant) {
  if (value->uses().empty()) return false;  // folded before
  torch::jit::WithInsertPoint guard(value->node());
  std::optional<Value*> folded = torch::jit::tryInsertConstant(*value->owningGraph(), constant);
  if (folded) value->replaceAllUsesWith(*folded);
  return folded.has_value();
}

namespace {

bool contains(const std::vector<int>& dims, int64_t d) {
  return std::find(dims.begin(), dims.end(), d) != dims.end();
}

// `value.size()` where the `unknown` dims' sizes vary: a list of the others' sizes and reads of
// those, so that `len()` and indexing by a constant fold (TorchScript's list peepholes), as
// torch.nn.functional's checks of a batch's spatial sizes ask.
bool fold_known_sizes(Value* value, Node* read, c10::IntArrayRef sizes,
                      const std::vector<int>& unknown) {
  if (!read->output()->hasUses()) return false;
  torch::jit::Graph& graph = *read->owningGraph();
  torch::jit::WithInsertPoint guard(read);
  std::vector<Value*> elements;
  for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d) {
    elements.push_back(contains(unknown, d)
                           ? graph.insert(c10::aten::size, {value, graph.insertConstant(d)})
                           : graph.insertConstant(sizes[d]));
  }
  Value* list = graph.insertNode(graph.createList(c10::IntType::get(), elements))->output();
  read->output()->replaceAllUsesWith(list);
  return true;
}

}  // namespace

bool fold_shape_reads(Value* value, c10::IntArrayRef sizes, const std::vector<int>& unknown) {
  bool folded = false;
  const std::vector<torch::jit::Use> uses = value->uses();  // fold_known_sizes adds reads
  for (const torch::jit::Use& use : uses) {
    Node* node = use.user;
    if (use.offset != 0) continue;
    if (node->kind() == c10::aten::dim && node->inputs().size() == 1) {
      folded |= replace_with_constant(node->output(), static_cast<int64_t>(sizes.size()));
    } else if (node->kind() == c10::aten::size && node->inputs().size() == 1) {
      folded |= unknown.empty() ? replace_with_constant(node->output(), c10::IValue(sizes.vec()))
                                : fold_known_sizes(value, node, sizes, unknown);
    } else if (node->kind() == c10::aten::size && node->inputs().size() == 2) {
      std::optional<c10::IValue> dim = torch::jit::toIValue(node->input(1));
      if (dim && dim->isInt() && !sizes.empty()) {
        const int64_t d = c10::maybe_wrap_dim(dim->toInt(), static_cast<int64_t>(sizes.size()));
        if (contains(unknown, d)) continue;
        folded |= replace_with_constant(node->output(), sizes[d]);
      }
    }
  }
  return folded;
}

bool fold_metadata(Value* value, const at::Tensor& tensor, const std::vector<int>& unknown) {
  bool folded = false;
  for (const torch::jit::Use& use : value->uses()) {
    Node* node = use.user;
    const auto kind = node->kind();
    if (kind == c10::prim::dtype) {
      folded |= replace_with_constant(node->output(), static_cast<int64_t>(tensor.scalar_type()));
    } else if (kind == c10::prim::device) {
      folded |= replace_with_constant(node->output(), tensor.device());
    } else if (kind == c10::prim::requires_grad) {
      folded |= replace_with_constant(node->output(), tensor.requires_grad());
    } else if (kind == c10::prim::is_cuda) {
      folded |= replace_with_constant(node->output(), tensor.is_cuda());
    }
  }
  if (tensor.layout() == at::kStrided) folded |= fold_shape_reads(value, tensor.sizes(), unknown);
  return folded;
}

}  // namespace kiln
