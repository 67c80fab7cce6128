// Normalizations over rows: softmax, log_softmax and layer_norm, computed in float.
#include "passes/kernel/op_lowering.h"

namespace kiln::kernel {

using namespace lowering;

namespace {

bool softmax_supported(const ir::Node& node) {
  return is_none(node, "dtype") && float_output(node);
}

// The internal overloads: half_to_float asks for a float32 result of a half input.
bool internal_softmax_supported(const ir::Node& node) {
  return !bool_attr(node, "half_to_float") && float_output(node);
}

}  // namespace

OpFamily normalization_ops() {
  using D = ReducedDims;
  return {
      {"aten::softmax.int", [](Lowering& l) { return l.softmax(false); }, softmax_supported,
       D::DimAttr},
      {"aten::_softmax", [](Lowering& l) { return l.softmax(false); }, internal_softmax_supported,
       D::DimAttr},
      {"aten::log_softmax.int", [](Lowering& l) { return l.softmax(true); }, softmax_supported,
       D::DimAttr},
      {"aten::_log_softmax", [](Lowering& l) { return l.softmax(true); },
       internal_softmax_supported, D::DimAttr},
      {"aten::layer_norm", [](Lowering& l) { return l.layer_norm(); }, float_output,
       D::NormalizedShape},
  };
}

}  // namespace kiln::kernel
