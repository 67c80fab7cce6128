#include "passes/kernel/lower_ops.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "kiln/error.h"
#include "passes/ir/op_table.h"
#include "passes/kernel/op_lowering.h"
#include "passes/kernel/size_decisions.h"

namespace kiln::kernel {

using namespace lowering;  // the attribute readers and Lowering (lowering.h)

namespace {

// Every family's definitions, by name (op_lowering.h).
const std::unordered_map<std::string_view, OpLowering>& registry() {
  static const std::unordered_map<std::string_view, OpLowering> table = [] {
    std::unordered_map<std::string_view, OpLowering> all;
    for (OpFamily (*family)() :
         {arithmetic_ops, activation_ops, selection_ops, reduction_ops, normalization_ops}) {
      for (OpLowering& op : family()) {
        const std::string_view name = op.name;
        if (!all.emplace(name, std::move(op)).second)
          throw std::logic_error("two lowerings of " + std::string(name));
      }
    }
    return all;
  }();
  return table;
}

bool supported_dtype(DType t) {
  return t != DType::Complex64 && t != DType::Complex128;
}

}  // namespace

const OpLowering* find_op_lowering(std::string_view op) {
  auto found = registry().find(op);
  return found == registry().end() ? nullptr : &found->second;
}

std::vector<const OpLowering*> op_lowerings() {
  std::vector<const OpLowering*> all;
  for (const auto& [name, op] : registry())
    all.push_back(&op);
  std::sort(all.begin(), all.end(),
            [](const OpLowering* a, const OpLowering* b) { return a->name < b->name; });
  return all;
}

bool float_output(const ir::Node& node) {
  return ir::is_floating(node.output()->type().dtype);
}

std::vector<std::string> lowered_ops() {
  std::vector<std::string> names;
  for (const OpLowering* op : op_lowerings())
    names.emplace_back(op->name);
  return names;
}

bool is_reshaping_view(const std::string& op) {
  return op == "aten::unsqueeze" || op == "aten::view" || op == "aten::reshape" ||
         op == "aten::_unsafe_view";
}

DType compute_dtype(DType dtype) {
  return dtype == DType::Float16 || dtype == DType::BFloat16 ? DType::Float32 : dtype;
}

bool can_lower(const ir::Node& node) {
  const OpLowering* op = find_op_lowering(node.op());
  if (!op || node.outputs().size() != 1) return false;
  const DType out = node.output()->type().dtype;
  if (!supported_dtype(out)) return false;
  for (const ir::Value* v : node.inputs()) {
    if (!supported_dtype(v->type().dtype)) return false;
  }
  if (node.output()->type().device.kind == ir::DeviceKind::Meta) return false;
  // A reduction over no dimension (of a 0-dim tensor) is a copy; ATen does it.
  if (auto dims = reduced_dims(node); dims && dims->empty()) return false;
  if (op->supports && !op->supports(node)) return false;
  // Arithmetic on bool tensors means logic in ATen; leave it to ATen.
  const ir::OpInfo* info = ir::find_op(node.op());
  return !(info && info->kind == ir::OpKind::Elementwise && !op->bool_output && out == DType::Bool);
}

std::optional<std::vector<int>> reduced_dims(const ir::Node& node) {
  const ir::OpInfo* info = ir::find_op(node.op());
  const bool reduces =
      info && (info->kind == ir::OpKind::Reduction || info->kind == ir::OpKind::Normalization);
  if (!reduces && !is_contraction(node)) return std::nullopt;
  const int rank = static_cast<int>(node.input(0)->type().rank());
  std::vector<int> dims;
  auto add = [&](int64_t d) {
    if (d < 0) d += rank;
    if (d >= 0 && d < rank && std::find(dims.begin(), dims.end(), d) == dims.end())
      dims.push_back(static_cast<int>(d));
  };
  const OpLowering* op = find_op_lowering(node.op());
  switch (op ? op->reduced : ReducedDims::DimAttr) {
    case ReducedDims::LastDim:
      add(rank - 1);  // K, the last dim of x
      break;
    case ReducedDims::All:
      for (int d = 0; d < rank; ++d)
        add(d);
      break;
    case ReducedDims::NormalizedShape: {
      const auto shape = ints_attr(node, "normalized_shape").value_or(std::vector<int64_t>{});
      for (int d = rank - static_cast<int>(shape.size()); d < rank; ++d)
        add(d);
      break;
    }
    case ReducedDims::None:
    case ReducedDims::DimAttr:
      if (auto dim = int_attr(node, "dim");
          dim && node.find_attr("dim") && std::holds_alternative<int64_t>(*node.find_attr("dim"))) {
        add(*dim);
        break;
      }
      // A dim list; an empty or absent list reduces every dimension, as ATen does.
      const auto list = ints_attr(node, "dim").value_or(std::vector<int64_t>{});
      if (list.empty()) {
        for (int d = 0; d < rank; ++d)
          add(d);
      }
      for (int64_t d : list)
        add(d);
      break;
  }
  std::sort(dims.begin(), dims.end());
  return dims;
}

bool is_contraction(const ir::Node& node) {
  // Up to this many rows, a dot product per output beats the BLAS call's fixed cost.
  constexpr int64_t kMaxRows = 4;
  if (node.op() != "aten::linear" || node.inputs().size() < 2) return false;
  const ir::TensorType& x = node.input(0)->type();
  const ir::TensorType& w = node.input(1)->type();
  const DType t = node.output()->type().dtype;
  if (x.rank() < 1 || w.rank() != 2 || (t != DType::Float32 && t != DType::Float64)) return false;
  // A bf16 weight under a float32 linear is prepack_linear's, for precision=bf16: read as bf16,
  // multiplied in float32.
  const bool bf16_weight = t == DType::Float32 && w.dtype == DType::BFloat16;
  if (x.dtype != t || (w.dtype != t && !bf16_weight)) return false;
  if (node.inputs().size() > 2 &&
      (node.input(2)->type().dtype != t || node.input(2)->type().rank() != 1))
    return false;
  return x.sizes.back() > 0 && at_most(x.numel() / x.sizes.back(), kMaxRows,
                                       "a linear's rows, to compute it in a kernel of its own");
}

bool computes_transcendental(const ir::Node& node) {
  if (!can_lower(node) || reduced_dims(node)) return false;
  // Lowered alone, over one element of each input.
  Kernel kernel;
  KernelBuilder builder(kernel);
  std::vector<int> args;
  for (const ir::Value* input : node.inputs()) {
    kernel.buffers.push_back(
        {"b" + std::to_string(kernel.buffers.size()), input->type().dtype, false});
    args.push_back(builder.load(static_cast<int>(kernel.buffers.size()) - 1, {}));
  }
  lower_node(builder, node, args);
  return std::any_of(kernel.exprs.begin(), kernel.exprs.end(),
                     [](const Expr& e) { return op_traits(e.op).transcendental; });
}

bool keeps_reduced_dims(const ir::Node& node) {
  const ir::OpInfo* info = ir::find_op(node.op());
  if (info && info->kind == ir::OpKind::Normalization) return true;
  return bool_attr(node, "keepdim");
}

int lower_node(KernelBuilder& builder, const ir::Node& node, const std::vector<int>& args) {
  const OpLowering* op = find_op_lowering(node.op());
  if (!op) throw Error(ErrorKind::Unsupported, "no lowering for " + node.op());
  Lowering lowering{builder, node, args, compute_dtype(node.output()->type().dtype)};
  return op->lower(lowering);
}

}  // namespace kiln::kernel
