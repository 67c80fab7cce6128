#include "passes/kernel/lower_ops.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "passes/ir/op_table.h"

namespace kiln::kernel {
namespace {

using ir::Attr;
using ir::Node;

// --- Attributes --------------------------------------------------------------------------------

bool is_none(const Node& node, const char* name) {
  const Attr* attr = node.find_attr(name);
  return !attr || std::holds_alternative<ir::NoneAttr>(*attr);
}

/// A Scalar attribute: its value and the dtype ATen gives a wrapped number of its kind.
struct ScalarAttr {
  double value;
  DType kind;  // Float64, Int64 or Bool
};

std::optional<ScalarAttr> scalar_attr(const Node& node, const char* name) {
  const Attr* attr = node.find_attr(name);
  if (!attr) return std::nullopt;
  if (auto* d = std::get_if<double>(attr)) return ScalarAttr{*d, DType::Float64};
  if (auto* i = std::get_if<int64_t>(attr))
    return ScalarAttr{static_cast<double>(*i), DType::Int64};
  if (auto* b = std::get_if<bool>(attr)) return ScalarAttr{*b ? 1.0 : 0.0, DType::Bool};
  return std::nullopt;
}

double scalar_or(const Node& node, const char* name, double fallback) {
  auto s = scalar_attr(node, name);
  return s ? s->value : fallback;
}

std::optional<int64_t> int_attr(const Node& node, const char* name) {
  const Attr* attr = node.find_attr(name);
  if (auto* i = attr ? std::get_if<int64_t>(attr) : nullptr) return *i;
  return std::nullopt;
}

bool bool_attr(const Node& node, const char* name) {
  const Attr* attr = node.find_attr(name);
  auto* b = attr ? std::get_if<bool>(attr) : nullptr;
  return b && *b;
}

std::optional<std::vector<int64_t>> ints_attr(const Node& node, const char* name) {
  const Attr* attr = node.find_attr(name);
  if (!attr) return std::nullopt;
  if (auto* v = std::get_if<std::vector<int64_t>>(attr)) return *v;
  if (auto* i = std::get_if<int64_t>(attr)) return std::vector<int64_t>{*i};
  return std::nullopt;
}

std::optional<std::string> string_attr(const Node& node, const char* name) {
  const Attr* attr = node.find_attr(name);
  if (auto* s = attr ? std::get_if<std::string>(attr) : nullptr) return *s;
  return std::nullopt;
}

// --- Type promotion (ATen's result_type, for comparisons) ---------------------------------------

int category(DType t) {
  if (t == DType::Bool) return 0;
  return ir::is_floating(t) ? 2 : 1;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (category(a) != category(b)) return category(a) > category(b) ? a : b;
  if (category(a) == 2) {
    if ((a == DType::Float16 && b == DType::BFloat16) ||
        (b == DType::Float16 && a == DType::BFloat16))
      return DType::Float32;
    return ir::dtype_size(a) >= ir::dtype_size(b) ? a : b;
  }
  // Integers: uint8 with a signed type needs a signed type wider than 8 bits.
  if (a == DType::UInt8 || b == DType::UInt8) {
    DType other = a == DType::UInt8 ? b : a;
    return other == DType::Int8 ? DType::Int16 : other;
  }
  return ir::dtype_size(a) >= ir::dtype_size(b) ? a : b;
}

struct ResultType {
  std::optional<DType> dim, zero_dim, wrapped;

  void add_tensor(const ir::TensorType& t) {
    auto& slot = t.rank() > 0 ? dim : zero_dim;
    slot = slot ? promote_types(*slot, t.dtype) : t.dtype;
  }
  void add_scalar(DType kind) {
    // A wrapped Python float counts as the default dtype.
    DType t = kind == DType::Float64 ? DType::Float32 : kind;
    wrapped = wrapped ? promote_types(*wrapped, t) : t;
  }
  static std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
    if (!higher) return lower;
    if (!lower) return higher;
    if (category(*higher) == 2) return higher;
    if (*higher == DType::Bool || category(*lower) == 2) return promote_types(*higher, *lower);
    return higher;
  }
  DType result() const { return combine(dim, combine(zero_dim, wrapped)).value_or(DType::Float32); }
};

// --- Variance ----------------------------------------------------------------------------------

bool is_variance(const std::string& op) {
  return op == "aten::var" || op.starts_with("aten::var.") || op == "aten::std" ||
         op.starts_with("aten::std.");
}

/// What var/std subtract from the element count: `correction` (None means 1), else `unbiased`
/// (the overloads without `correction`; default true).
double correction(const Node& node) {
  if (node.find_attr("correction")) return scalar_or(node, "correction", 1);
  const Attr* unbiased = node.find_attr("unbiased");
  return !unbiased || bool_attr(node, "unbiased") ? 1 : 0;
}

/// How many elements each output of a reduction combines.
int64_t reduced_count(const Node& node) {
  int64_t n = 1;
  for (int d : reduced_dims(node).value_or(std::vector<int>{}))
    n *= node.input(0)->type().sizes.at(d);
  return n;
}

// --- Lowering ----------------------------------------------------------------------------------

struct Lowering {
  KernelBuilder& b;
  const Node& node;
  const std::vector<int>& args;
  DType out;  // the compute dtype of the node's output

  int arg(size_t i) { return b.cast(args.at(i), out); }
  int scalar(const char* name, double fallback = 0) {
    return b.constant(scalar_or(node, name, fallback), out);
  }
  int un(Op op, int x) { return b.unary(op, x, out); }
  int bin(Op op, int x, int y) { return b.binary(op, x, y, out); }
  int constant(double v) { return b.constant(v, out); }
  /// x + alpha * y, skipping the multiply when alpha is 1.
  int add_scaled(Op op, int x, int y) {
    const double alpha = scalar_or(node, "alpha", 1);
    if (alpha != 1) y = bin(Op::Mul, constant(alpha), y);
    return bin(op, x, y);
  }
  int clamp(int x, std::optional<int> lo, std::optional<int> hi) {
    if (lo) x = bin(Op::Max, x, *lo);
    if (hi) x = bin(Op::Min, x, *hi);
    return x;
  }
  int sigmoid(int x) { return un(Op::Sigmoid, x); }
  /// ATen's hard activations, in its order of operations: min(max(x + 3, 0), 6) / 6, times x
  /// first for hardswish.
  int hard_activation(bool swish) {
    const int x = arg(0);
    const int gate = clamp(bin(Op::Add, x, constant(3)), constant(0), constant(6));
    return bin(Op::Div, swish ? bin(Op::Mul, x, gate) : gate, constant(6));
  }
  int leaky_relu() {
    const int x = arg(0);
    const int positive = b.binary(Op::Gt, x, constant(0), DType::Bool);
    return b.where(positive, x, bin(Op::Mul, x, scalar("negative_slope", 0.01)), out);
  }
  /// log(1 + x) without losing x's digits to the rounding of 1 + x (Goldberg's correction):
  /// log(u) * (x / (u - 1)) with u = 1 + x, x itself where u is 1, log(u) where u is x (x = inf,
  /// and x so large that 1 + x rounds to it, where the correction is 1 anyway).
  int log1p(int x) {
    const int u = bin(Op::Add, constant(1), x);
    const int log_u = un(Op::Log, u);
    const int r = bin(Op::Mul, log_u, bin(Op::Div, x, bin(Op::Sub, u, constant(1))));
    const int tiny = b.binary(Op::Eq, u, constant(1), DType::Bool);
    return b.where(b.binary(Op::Eq, u, x, DType::Bool), log_u, b.where(tiny, x, r, out), out);
  }
  /// exp(x) - 1 without the cancellation (Kahan's): (u - 1) * (x / log(u)) with u = exp(x); x
  /// where u is 1, -1 where u - 1 is, u itself where u is infinite or NaN.
  int expm1(int x) {
    const int u = un(Op::Exp, x);
    const int u_1 = bin(Op::Sub, u, constant(1));
    int r = bin(Op::Mul, u_1, bin(Op::Div, x, un(Op::Log, u)));
    r = b.where(b.binary(Op::Eq, u_1, constant(-1), DType::Bool), constant(-1), r, out);
    r = b.where(b.binary(Op::Eq, u, constant(1), DType::Bool), x, r, out);
    const int not_finite = b.binary(Op::Ne, bin(Op::Sub, u, u), constant(0), DType::Bool);
    return b.where(not_finite, u, r, out);
  }
  /// ATen's: x <= 0 ? expm1(x * input_scale) * (alpha * scale) : x * scale.
  int elu() {
    const int x = arg(0);
    const double scale = scalar_or(node, "scale", 1),
                 input_scale = scalar_or(node, "input_scale", 1);
    const int inner = input_scale == 1 ? x : bin(Op::Mul, x, constant(input_scale));
    const int negative = bin(Op::Mul, expm1(inner), constant(scalar_or(node, "alpha", 1) * scale));
    const int positive = scale == 1 ? x : bin(Op::Mul, x, constant(scale));
    return b.where(b.binary(Op::Le, x, constant(0), DType::Bool), negative, positive, out);
  }
  /// (0 < x) - (x < 0), as ATen computes it: 0 for NaN and for -0.
  int sign() {
    const int x = arg(0);
    const int above = b.cast(b.binary(Op::Lt, constant(0), x, DType::Bool), out);
    return bin(Op::Sub, above, b.cast(b.binary(Op::Lt, x, constant(0), DType::Bool), out));
  }
  int gelu(int x) {
    const std::string approximate = string_attr(node, "approximate").value_or("none");
    const int half_x = bin(Op::Mul, constant(0.5), x);
    if (approximate == "tanh") {
      const double k = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // sqrt(2/pi)
      const int cube = bin(Op::Mul, bin(Op::Mul, x, x), x);
      const int inner =
          bin(Op::Mul, constant(k), bin(Op::Add, x, bin(Op::Mul, constant(0.044715), cube)));
      return bin(Op::Mul, half_x, bin(Op::Add, constant(1), un(Op::Tanh, inner)));
    }
    const int scaled = bin(Op::Mul, x, constant(1 / std::numbers::sqrt2));
    return bin(Op::Mul, half_x, bin(Op::Add, constant(1), un(Op::Erf, scaled)));
  }
  int pow_scalar(int x, double e) {
    if (e == 1) return x;
    if (e == 2) return bin(Op::Mul, x, x);
    if (e == 3) return bin(Op::Mul, bin(Op::Mul, x, x), x);
    if (e == 0.5) return un(Op::Sqrt, x);
    if (e == -0.5) return un(Op::Rsqrt, x);
    if (e == -1) return un(Op::Reciprocal, x);
    return bin(Op::Div, constant(1), bin(Op::Mul, x, x));  // e == -2
  }
  /// Comparisons compute in ATen's result type of their operands.
  int compare(Op op) {
    ResultType rt;
    for (const ir::Value* v : node.inputs())
      rt.add_tensor(v->type());
    if (auto s = scalar_attr(node, "other")) rt.add_scalar(s->kind);
    // ATen converts both operands to the common dtype first: a float16 comparison rounds a
    // float scalar (or a 0-dim float32 tensor) to float16 before comparing.
    const DType common = rt.result();
    const DType compute = compute_dtype(common);
    auto operand = [&](int expr) { return b.cast(b.cast(expr, common), compute); };
    const int x = operand(args.at(0));
    const int y = args.size() > 1 ? operand(args[1])
                                  : operand(b.constant(scalar_or(node, "other", 0), common));
    return b.binary(op, x, y, DType::Bool);
  }
  /// A cast: rounds to the output dtype (float16 too), then holds it in the compute dtype.
  int convert() { return b.cast(b.cast(args.at(0), node.output()->type().dtype), out); }
  int reduce(ReduceKind kind) { return b.reduce(kind, arg(0)); }
  int softmax(bool log) {
    const int x = arg(0);
    const int max = b.reduce(ReduceKind::Max, x);
    const int shifted = bin(Op::Sub, x, max);
    const int exp = un(Op::Exp, shifted);
    const int sum = b.reduce(ReduceKind::Sum, exp);
    if (log) return bin(Op::Sub, shifted, un(Op::Log, sum));
    // One division per row, then a multiply per element (as ATen's vectorized softmax does).
    return bin(Op::Mul, exp, un(Op::Reciprocal, sum));
  }
  /// var and std: the mean of squared deviations (as layer_norm's, so the LLVM code generator
  /// takes both reductions in one pass), times n / (n - correction).
  int variance(bool root) {
    const int x = arg(0);
    const int centered = bin(Op::Sub, x, b.reduce(ReduceKind::Mean, x));
    int var = b.reduce(ReduceKind::Mean, bin(Op::Mul, centered, centered));
    const double n = static_cast<double>(reduced_count(node));
    if (const double c = correction(node); c != 0) var = bin(Op::Mul, var, constant(n / (n - c)));
    return root ? un(Op::Sqrt, var) : var;
  }
  int linear() {
    // The iteration space is [..., N, K]: a dot product per output element, then the bias.
    int y = b.reduce(ReduceKind::Sum, bin(Op::Mul, arg(0), arg(1)));
    if (args.size() > 2) y = bin(Op::Add, y, arg(2));
    return y;
  }
  int layer_norm() {
    // The mean, then the mean of squared deviations: as accurate as Welford's update, with no
    // division per element. The interpreter and the CUDA code take two passes over the row; the
    // LLVM code generator computes both in one (backend/codegen/llvm/moments.h).
    const int x = arg(0);
    const int mean = b.reduce(ReduceKind::Mean, x);
    const int centered = bin(Op::Sub, x, mean);
    const int var = b.reduce(ReduceKind::Mean, bin(Op::Mul, centered, centered));
    const int rstd = un(Op::Rsqrt, bin(Op::Add, var, scalar("eps", 1e-5)));
    int y = bin(Op::Mul, centered, rstd);
    size_t next = 1;
    // A present optional tensor is an input with no attribute; an absent one is `name=None`.
    if (!node.find_attr("weight") && next < args.size()) y = bin(Op::Mul, y, arg(next++));
    if (!node.find_attr("bias") && next < args.size()) y = bin(Op::Add, y, arg(next++));
    return y;
  }
};

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
      {"aten::elu", [](Lowering& l) { return l.elu(); }},
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
      op == "aten::elu")
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
