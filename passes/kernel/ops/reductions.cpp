// Reductions: sum, mean, amax, amin, var and std over all dims or some, and a linear with few
// rows computed as a reduction over K (is_contraction).
#include "passes/kernel/lower_ops.h"
#include "passes/kernel/op_lowering.h"

namespace kiln::kernel {

using namespace lowering;

namespace {

// No dtype argument; a mean of integers is ATen's (it promotes them).
bool plain_sum_or_mean(const ir::Node& node) {
  return is_none(node, "dtype") && (float_output(node) || node.op().starts_with("aten::sum"));
}

// n - correction <= 0 divides by zero or less (ATen: inf or NaN); ATen keeps those.
bool variance_supported(const ir::Node& node) {
  return float_output(node) && static_cast<double>(reduced_count(node)) - correction(node) > 0;
}

bool not_bool(const ir::Node& node) {
  return node.output()->type().dtype != DType::Bool;
}

OpLowering reduction(std::string_view name, ReduceKind kind, ReducedDims dims,
                     std::function<bool(const ir::Node&)> supports) {
  return {name, [kind](Lowering& l) { return l.reduce(kind); }, std::move(supports), dims};
}

OpLowering variance(std::string_view name, bool std_dev, ReducedDims dims) {
  return {name, [std_dev](Lowering& l) { return l.variance(std_dev); }, variance_supported, dims};
}

}  // namespace

OpFamily reduction_ops() {
  using D = ReducedDims;
  return {
      reduction("aten::sum", ReduceKind::Sum, D::All, plain_sum_or_mean),
      reduction("aten::sum.dim_IntList", ReduceKind::Sum, D::DimAttr, plain_sum_or_mean),
      reduction("aten::mean", ReduceKind::Mean, D::All, plain_sum_or_mean),
      reduction("aten::mean.dim", ReduceKind::Mean, D::DimAttr, plain_sum_or_mean),
      reduction("aten::amax", ReduceKind::Max, D::DimAttr, not_bool),
      reduction("aten::amin", ReduceKind::Min, D::DimAttr, not_bool),
      variance("aten::var", false, D::All),
      variance("aten::var.dim", false, D::DimAttr),
      variance("aten::var.correction", false, D::DimAttr),
      variance("aten::std", true, D::All),
      variance("aten::std.dim", true, D::DimAttr),
      variance("aten::std.correction", true, D::DimAttr),
      {"aten::linear", [](Lowering& l) { return l.linear(); }, is_contraction, D::LastDim},
  };
}

}  // namespace kiln::kernel
