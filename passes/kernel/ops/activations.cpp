// Activations: relu, gelu, sigmoid, tanh, silu, the hard ones, the smooth ones (elu and its
// relatives, softplus, mish) and the clamps. Those composed in lowering.cpp compute in float.
#include "passes/kernel/op_lowering.h"

namespace kiln::kernel {

using namespace lowering;

OpFamily activation_ops() {
  return {
      {"aten::tanh", [](Lowering& l) { return l.un(Op::Tanh, l.arg(0)); }},
      {"aten::sigmoid", [](Lowering& l) { return l.sigmoid(l.arg(0)); }},
      {"aten::relu", [](Lowering& l) { return l.bin(Op::Max, l.arg(0), l.constant(0)); }},
      {"aten::gelu", [](Lowering& l) { return l.gelu(l.arg(0)); }},
      {"aten::silu", [](Lowering& l) { return l.bin(Op::Mul, l.arg(0), l.sigmoid(l.arg(0))); }},
      {"aten::hardswish", [](Lowering& l) { return l.hard_activation(true); }, float_output},
      {"aten::hardsigmoid", [](Lowering& l) { return l.hard_activation(false); }, float_output},
      {"aten::leaky_relu", [](Lowering& l) { return l.leaky_relu(); }, float_output},
      {"aten::elu",
       [](Lowering& l) {
         return l.elu(scalar_or(l.node, "alpha", 1), scalar_or(l.node, "scale", 1),
                      scalar_or(l.node, "input_scale", 1));
       },
       float_output},
      // ATen's selu and celu call its elu with these.
      {"aten::selu",
       [](Lowering& l) { return l.elu(1.6732632423543772848, 1.0507009873554804934, 1); },
       float_output},
      {"aten::celu",
       [](Lowering& l) {
         const double alpha = scalar_or(l.node, "alpha", 1);
         return l.elu(alpha, 1, 1 / alpha);
       },
       float_output},
      {"aten::softplus", [](Lowering& l) { return l.softplus(); }, float_output},
      {"aten::mish", [](Lowering& l) { return l.mish(); }, float_output},
      {"aten::clamp",
       [](Lowering& l) {
         std::optional<int> lo, hi;
         if (!is_none(l.node, "min")) lo = l.scalar("min");
         if (!is_none(l.node, "max")) hi = l.scalar("max");
         return l.clamp(l.arg(0), lo, hi);
       }},
      {"aten::clamp_min",
       [](Lowering& l) { return l.clamp(l.arg(0), l.scalar("min"), std::nullopt); }},
      {"aten::clamp_max",
       [](Lowering& l) { return l.clamp(l.arg(0), std::nullopt, l.scalar("max")); }},
      {"aten::hardtanh",
       [](Lowering& l) {
         return l.clamp(l.arg(0), l.scalar("min_val", -1), l.scalar("max_val", 1));
       }},
  };
}

}  // namespace kiln::kernel
