#include "passes/kernel/lower_ops.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "passes/ir/op_table.h"
#include "passes/kernel/lowering.h"

namespace kiln::kernel {

using namespace lowering;  // the attribute readers and Lowering (lowering.h)

namespace {

using ir::Node;

using LowerFn = std::function<int(Lowering&)>;

const std::unordered_map<std::string, LowerFn>& lowerings() {
  static const std::unordered_map<std::string, LowerFn> table = {
      {"aten::add.Tensor", [](Lowering& l) { return l.add_scaled(Op::Add, l.arg(0), l.arg(1)); }},
      {"aten::add.Scalar",
       [](Lowering& l) { return l.add_scaled(Op::Add, l.arg(0), l.scalar("other")); }},
      {"aten::sub.Tensor", [](Lowering& l) { return l.add_scaled(Op::Sub, l.arg(0), l.arg(1)); }},
      {"aten::sub.Scalar",
       [](Lowering& l) { return l.add_scaled(Op::Sub, l.arg(0), l.scalar("other")); }},
      {"aten::rsub.Tensor", [](Lowering& l) { return l.add_scaled(Op::Sub, l.arg(1), l.arg(0)); }},
      {"aten::rsub.Scalar",
       [](Lowering& l) { return l.add_scaled(Op::Sub, l.scalar("other"), l.arg(0)); }},
      {"aten::mul.Tensor", [](Lowering& l) { return l.bin(Op::Mul, l.arg(0), l.arg(1)); }},
      {"aten::mul.Scalar", [](Lowering& l) { return l.bin(Op::Mul, l.arg(0), l.scalar("other")); }},
      {"aten::div.Tensor", [](Lowering& l) { return l.bin(Op::Div, l.arg(0), l.arg(1)); }},
      {"aten::div.Scalar", [](Lowering& l) { return l.bin(Op::Div, l.arg(0), l.scalar("other")); }},
      {"aten::div.Tensor_mode",
       [](Lowering& l) {
         const int q = l.bin(Op::Div, l.arg(0), l.arg(1));
         return string_attr(l.node, "rounding_mode") == "trunc" ? l.un(Op::Trunc, q) : q;
       }},
      {"aten::neg", [](Lowering& l) { return l.un(Op::Neg, l.arg(0)); }},
      {"aten::abs", [](Lowering& l) { return l.un(Op::Abs, l.arg(0)); }},
      {"aten::exp", [](Lowering& l) { return l.un(Op::Exp, l.arg(0)); }},
      {"aten::log", [](Lowering& l) { return l.un(Op::Log, l.arg(0)); }},
      {"aten::sqrt", [](Lowering& l) { return l.un(Op::Sqrt, l.arg(0)); }},
      {"aten::rsqrt", [](Lowering& l) { return l.un(Op::Rsqrt, l.arg(0)); }},
      {"aten::reciprocal", [](Lowering& l) { return l.un(Op::Reciprocal, l.arg(0)); }},
      {"aten::erf", [](Lowering& l) { return l.un(Op::Erf, l.arg(0)); }},
      {"aten::log1p", [](Lowering& l) { return l.log1p(l.arg(0)); }},
      {"aten::expm1", [](Lowering& l) { return l.expm1(l.arg(0)); }},
      {"aten::tanh", [](Lowering& l) { return l.un(Op::Tanh, l.arg(0)); }},
      {"aten::sigmoid", [](Lowering& l) { return l.sigmoid(l.arg(0)); }},
      {"aten::relu", [](Lowering& l) { return l.bin(Op::Max, l.arg(0), l.constant(0)); }},
      {"aten::gelu", [](Lowering& l) { return l.gelu(l.arg(0)); }},
      {"aten::hardswish", [](Lowering& l) { return l.hard_activation(true); }},
      {"aten::hardsigmoid", [](Lowering& l) { return l.hard_activation(false); }},
      {"aten::leaky_relu", [](Lowering& l) { return l.leaky_relu(); }},
      {"aten::elu",
       [](Lowering& l) {
         return l.elu(scalar_or(l.node, "alpha", 1), scalar_or(l.node, "scale", 1),
                      scalar_or(l.node, "input_scale", 1));
       }},
      // ATen's selu and celu call its elu with these.
      {"aten::selu",
       [](Lowering& l) { return l.elu(1.6732632423543772848, 1.0507009873554804934, 1); }},
      {"aten::celu",
       [](Lowering& l) {
         const double alpha = scalar_or(l.node, "alpha", 1);
         return l.elu(alpha, 1, 1 / alpha);
       }},
      {"aten::softplus", [](Lowering& l) { return l.softplus(); }},
      {"aten::mish", [](Lowering& l) { return l.mish(); }},
      {"aten::sign", [](Lowering& l) { return l.sign(); }},
      {"aten::maximum", [](Lowering& l) { return l.bin(Op::Max, l.arg(0), l.arg(1)); }},
      {"aten::minimum", [](Lowering& l) { return l.bin(Op::Min, l.arg(0), l.arg(1)); }},
      {"aten::silu", [](Lowering& l) { return l.bin(Op::Mul, l.arg(0), l.sigmoid(l.arg(0))); }},
      {"aten::pow.Tensor_Scalar",
       [](Lowering& l) { return l.pow_scalar(l.arg(0), scalar_or(l.node, "exponent", 1)); }},
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
      {"aten::where.self",
       [](Lowering& l) {
         const int c = l.b.cast(l.args.at(0), DType::Bool);
         return l.b.where(c, l.arg(1), l.arg(2), l.out);
       }},
      {"aten::eq.Tensor", [](Lowering& l) { return l.compare(Op::Eq); }},
      {"aten::eq.Scalar", [](Lowering& l) { return l.compare(Op::Eq); }},
      {"aten::ne.Tensor", [](Lowering& l) { return l.compare(Op::Ne); }},
      {"aten::ne.Scalar", [](Lowering& l) { return l.compare(Op::Ne); }},
      {"aten::lt.Tensor", [](Lowering& l) { return l.compare(Op::Lt); }},
      {"aten::lt.Scalar", [](Lowering& l) { return l.compare(Op::Lt); }},
      {"aten::le.Tensor", [](Lowering& l) { return l.compare(Op::Le); }},
      {"aten::le.Scalar", [](Lowering& l) { return l.compare(Op::Le); }},
      {"aten::gt.Tensor", [](Lowering& l) { return l.compare(Op::Gt); }},
      {"aten::gt.Scalar", [](Lowering& l) { return l.compare(Op::Gt); }},
      {"aten::ge.Tensor", [](Lowering& l) { return l.compare(Op::Ge); }},
      {"aten::ge.Scalar", [](Lowering& l) { return l.compare(Op::Ge); }},
      {"aten::_to_copy", [](Lowering& l) { return l.convert(); }},
      // A copy into the layout the output's type has (canonicalize drops the ones that keep
      // their input's): written by the kernel's store, the value passes through.
      {"aten::clone", [](Lowering& l) { return l.convert(); }},
      {"aten::to.dtype", [](Lowering& l) { return l.convert(); }},
      {"aten::type_as", [](Lowering& l) { return l.convert(); }},
      {"aten::sum", [](Lowering& l) { return l.reduce(ReduceKind::Sum); }},
      {"aten::sum.dim_IntList", [](Lowering& l) { return l.reduce(ReduceKind::Sum); }},
      {"aten::mean", [](Lowering& l) { return l.reduce(ReduceKind::Mean); }},
      {"aten::mean.dim", [](Lowering& l) { return l.reduce(ReduceKind::Mean); }},
      {"aten::amax", [](Lowering& l) { return l.reduce(ReduceKind::Max); }},
      {"aten::amin", [](Lowering& l) { return l.reduce(ReduceKind::Min); }},
      {"aten::softmax.int", [](Lowering& l) { return l.softmax(false); }},
      {"aten::_softmax", [](Lowering& l) { return l.softmax(false); }},
      {"aten::log_softmax.int", [](Lowering& l) { return l.softmax(true); }},
      {"aten::_log_softmax", [](Lowering& l) { return l.softmax(true); }},
      {"aten::layer_norm", [](Lowering& l) { return l.layer_norm(); }},
      {"aten::var", [](Lowering& l) { return l.variance(false); }},
      {"aten::var.dim", [](Lowering& l) { return l.variance(false); }},
      {"aten::var.correction", [](Lowering& l) { return l.variance(false); }},
      {"aten::std", [](Lowering& l) { return l.variance(true); }},
      {"aten::std.dim", [](Lowering& l) { return l.variance(true); }},
      {"aten::std.correction", [](Lowering& l) { return l.variance(true); }},
      {"aten::linear", [](Lowering& l) { return l.linear(); }},
  };
  return table;
}

}  // namespace

std::vector<std::string> lowered_ops() {
  std::vector<std::string> names;
  for (const auto& [name, lower] : lowerings())
    names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

bool supported_dtype(DType t) {
  return t != DType::Complex64 && t != DType::Complex128;
}

// Per-op conditions beyond the dtype: attributes with values the lowering does not model.
bool attributes_supported(const Node& node) {
  const std::string& op = node.op();
  const DType out = node.output()->type().dtype;
  const bool float_out = ir::is_floating(out);
  const bool half = out == DType::Float16 || out == DType::BFloat16;
  if (half &&
      (op.starts_with("aten::add.") || op.starts_with("aten::sub.") ||
       op.starts_with("aten::rsub.")) &&
      scalar_or(node, "alpha", 1) != 1) {
    // Eager rounds alpha * other to the half dtype before adding; in float32, near cancellation
    // kiln's more exact result differs from eager's by many half ulps. ATen keeps these.
    return false;
  }
  if (op == "aten::div.Tensor_mode") {
    if (is_none(node, "rounding_mode")) return float_out;
    // Eager rounds a float16/bfloat16 quotient to its dtype before truncating it; kiln computes
    // halves in float32, which would truncate the unrounded quotient (2.99 -> 2, not 3).
    return string_attr(node, "rounding_mode") == "trunc" &&
           (out == DType::Float32 || out == DType::Float64);
  }
  if (op == "aten::pow.Tensor_Scalar") {
    const double e = scalar_or(node, "exponent", 0);
    return float_out && (e == 1 || e == 2 || e == 3 || e == 0.5 || e == -0.5 || e == -1 || e == -2);
  }
  if (op == "aten::_to_copy") {
    return is_none(node, "device") && is_none(node, "layout") && !bool_attr(node, "pin_memory");
  }
  if (op == "aten::sum" || op == "aten::sum.dim_IntList" || op == "aten::mean" ||
      op == "aten::mean.dim") {
    return is_none(node, "dtype") && (float_out || op.starts_with("aten::sum"));
  }
  if (op == "aten::softmax.int" || op == "aten::log_softmax.int") {
    return is_none(node, "dtype") && float_out;
  }
  if (op == "aten::_softmax" || op == "aten::_log_softmax") {
    return !bool_attr(node, "half_to_float") && float_out;
  }
  if (op == "aten::layer_norm") return float_out;
  if (op == "aten::hardswish" || op == "aten::hardsigmoid" || op == "aten::leaky_relu" ||
      op == "aten::elu" || op == "aten::selu" || op == "aten::celu" || op == "aten::softplus" ||
      op == "aten::mish")
    return float_out;
  if (is_variance(op)) {
    // n - correction <= 0 divides by zero or less (ATen: inf or NaN); ATen keeps those.
    return float_out && static_cast<double>(reduced_count(node)) - correction(node) > 0;
  }
  if (op == "aten::linear") return is_contraction(node);
  if (op == "aten::amax" || op == "aten::amin") return out != DType::Bool;
  // Arithmetic on bool tensors means logic in ATen; leave it to ATen.
  const ir::OpInfo* info = ir::find_op(op);
  const bool comparison_like =
      op.find("::eq") != std::string::npos || op.find("::ne") != std::string::npos ||
      op.find("::lt") != std::string::npos || op.find("::le") != std::string::npos ||
      op.find("::gt") != std::string::npos || op.find("::ge") != std::string::npos ||
      op.starts_with("aten::where") || op == "aten::_to_copy" || op == "aten::to.dtype" ||
      op == "aten::type_as";
  if (info && info->kind == ir::OpKind::Elementwise && !comparison_like && out == DType::Bool)
    return false;
  return true;
}

}  // namespace

bool is_reshaping_view(const std::string& op) {
  return op == "aten::unsqueeze" || op == "aten::view" || op == "aten::reshape" ||
         op == "aten::_unsafe_view";
}

DType compute_dtype(DType dtype) {
  return dtype == DType::Float16 || dtype == DType::BFloat16 ? DType::Float32 : dtype;
}

bool can_lower(const ir::Node& node) {
  if (!lowerings().contains(node.op()) || node.outputs().size() != 1) return false;
  if (!supported_dtype(node.output()->type().dtype)) return false;
  for (const ir::Value* v : node.inputs()) {
    if (!supported_dtype(v->type().dtype)) return false;
  }
  if (node.output()->type().device.kind == ir::DeviceKind::Meta) return false;
  // A reduction over no dimension (of a 0-dim tensor) is a copy; ATen does it.
  if (auto dims = reduced_dims(node); dims && dims->empty()) return false;
  return attributes_supported(node);
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
  const std::string& op = node.op();
  if (op == "aten::linear") {
    add(rank - 1);  // K, the last dim of x
  } else if (op == "aten::sum" || op == "aten::mean" || op == "aten::var" || op == "aten::std") {
    for (int d = 0; d < rank; ++d)
      add(d);
  } else if (op == "aten::layer_norm") {
    const auto shape = ints_attr(node, "normalized_shape").value_or(std::vector<int64_t>{});
    for (int d = rank - static_cast<int>(shape.size()); d < rank; ++d)
      add(d);
  } else if (auto dim = int_attr(node, "dim");
             dim && node.find_attr("dim") &&
             std::holds_alternative<int64_t>(*node.find_attr("dim"))) {
    add(*dim);
  } else {
    // A dim list; an empty or absent list reduces every dimension, as ATen does.
    const auto list = ints_attr(node, "dim").value_or(std::vector<int64_t>{});
    if (list.empty()) {
      for (int d = 0; d < rank; ++d)
        add(d);
    }
    for (int64_t d : list)
      add(d);
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
  if (x.dtype != t || w.dtype != t) return false;
  if (node.inputs().size() > 2 &&
      (node.input(2)->type().dtype != t || node.input(2)->type().rank() != 1))
    return false;
  return x.numel() / std::max<int64_t>(x.sizes.back(), 1) <= kMaxRows && x.sizes.back() > 0;
}

bool keeps_reduced_dims(const ir::Node& node) {
  const ir::OpInfo* info = ir::find_op(node.op());
  if (info && info->kind == ir::OpKind::Normalization) return true;
  return bool_attr(node, "keepdim");
}

int lower_node(KernelBuilder& builder, const ir::Node& node, const std::vector<int>& args) {
  auto found = lowerings().find(node.op());
  if (found == lowerings().end()) throw std::invalid_argument("no lowering for " + node.op());
  Lowering lowering{builder, node, args, compute_dtype(node.output()->type().dtype)};
  return found->second(lowering);
}

}  // namespace kiln::kernel
