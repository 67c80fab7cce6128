#include "backend/capture/fold_metadata.h"

#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <optional>

namespace kiln {

using torch::jit::Node;
using torch::jit::Value;

bool replace_with_constant(Value* value, const c10::IValue& constant) {
  if (value->uses().empty()) return false;  // folded before
  torch::jit::WithInsertPoint guard(value->node());
  std::optional<Value*> folded = torch::jit::tryInsertConstant(*value->owningGraph(), constant);
  if (folded) value->replaceAllUsesWith(*folded);
  return folded.has_value();
}

bool fold_shape_reads(Value* value, c10::IntArrayRef sizes, const std::vector<int>& unknown) {
  bool folded = false;
  for (const torch::jit::Use& use : value->uses()) {
    Node* node = use.user;
    if (use.offset != 0) continue;
    if (node->kind() == c10::aten::dim && node->inputs().size() == 1) {
      folded |= replace_with_constant(node->output(), static_cast<int64_t>(sizes.size()));
    } else if (node->kind() == c10::aten::size && node->inputs().size() == 1 && unknown.empty()) {
      folded |= replace_with_constant(node->output(), c10::IValue(sizes.vec()));
    } else if (node->kind() == c10::aten::size && node->inputs().size() == 2) {
      std::optional<c10::IValue> dim = torch::jit::toIValue(node->input(1));
      if (dim && dim->isInt() && !sizes.empty()) {
        const int64_t d = c10::maybe_wrap_dim(dim->toInt(), static_cast<int64_t>(sizes.size()));
        if (std::find(unknown.begin(), unknown.end(), d) != unknown.end()) continue;
        folded |= replace_with_constant(node->output(), sizes[d]);
      }
    }
  }
  return folded;
}

void fold_metadata(Value* value, const at::Tensor& tensor, const std::vector<int>& unknown) {
  for (const torch::jit::Use& use : value->uses()) {
    Node* node = use.user;
    const auto kind = node->kind();
    if (kind == c10::prim::dtype) {
      replace_with_constant(node->output(), static_cast<int64_t>(tensor.scalar_type()));
    } else if (kind == c10::prim::device) {
      replace_with_constant(node->output(), tensor.device());
    } else if (kind == c10::prim::requires_grad) {
      replace_with_constant(node->output(), tensor.requires_grad());
    } else if (kind == c10::prim::is_cuda) {
      replace_with_constant(node->output(), tensor.is_cuda());
    }
  }
  if (tensor.layout() == at::kStrided) fold_shape_reads(value, tensor.sizes(), unknown);
}

}  // namespace kiln
