#include "fuzz/fuzz_case.h"

#include "fuzz/error_bounds.h"
#include "fuzz/fuzz_support.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>

#include "backend/api/compile_graph.h"
#include "kiln/options.h"
#include "passes/ir/parser.h"
#include "passes/ir/printer.h"
#include "runtime/bridge/tensor_bridge.h"
#include "runtime/executor.h"

#include "fuzz/fuzz_generator.h"

namespace kiln::fuzz {
namespace generator {

int Generator::pick(const Pred& pred) {
  std::vector<int> found, unused;
  for (int i = 0; i < static_cast<int>(pool_.size()); ++i) {
    if (!pred(pool_[i])) continue;
    found.push_back(i);
    if (!pool_[i].leaf && pool_[i].uses == 0) unused.push_back(i);
  }
  if (found.empty()) return -1;
  const double r = rng_.uniform();
  if (r < 0.45) return found.back();
  if (r < 0.7 && !unused.empty()) return rng_.pick(unused);
  return rng_.pick(found);
}

Operand Generator::operand(const Pred& pred, double p_existing, const std::vector<int64_t>& shape,
                           at::ScalarType dtype) {
  if (rng_.chance(p_existing)) {
    if (int i = pick(pred); i >= 0) return {i, {}};
  }
  return {-1, fresh(shape, dtype)};
}

// A second operand that broadcasts with `first`.
Operand Generator::partner(const Operand& first, const Pred& pred, double p_existing) {
  const at::Tensor& t = tensor(first);
  auto compatible = [&](const Val& v) {
    return pred(v) && broadcastable(t.sizes(), v.eager.sizes());
  };
  Operand o =
      operand(compatible, p_existing, partner_shape(t.sizes()), fresh_dtype(t.scalar_type()));
  if (o.val < 0 && rng_.chance(0.1)) {  // a frozen weight instead of an input
    o.fresh = fresh(o.fresh.tensor.sizes().vec(), o.fresh.tensor.scalar_type(), false);
    o.fresh.constant = true;
  }
  return o;
}

ir::Attr Generator::scalar(bool integral) {
  if (integral) return rng_.pick<int64_t>({0, 1, 2, 3, -1, -2, 7});
  return rng_.pick<double>({0.5, -1.5, 2.5, 0.1, 1e-3, 1e3, -7.25, 3.0, 1e10, -0.0});
}

bool Generator::propose(Proposal& p) {
  enum Kind {
    Arith,
    ArithScalar,
    Unary,
    Activation,
    Clamp,
    Pow,
    Compare,
    CompareScalar,
    Where,
    Cast,
    LayoutCopy,
    Reduce,
    Softmax,
    LayerNorm,
    Variance
  };
  const auto kind =
      static_cast<Kind>(rng_.weighted({18, 10, 14, 10, 6, 4, 4, 4, 6, 6, 4, 9, 6, 4, 3}));
  auto any = [](const Val&) { return true; };
  auto floating = [](const Val& v) { return is_float(v.eager.scalar_type()); };
  auto exact_val = [](const Val& v) { return v.exact; };
  auto mostly_float = [&](const Val& v) { return floating(v) || rng_.chance(0.15); };
  const Pred first_pred = kind == Compare || kind == CompareScalar ? Pred(exact_val)
                          : kind >= Reduce                         ? Pred(floating)
                                                                   : Pred(mostly_float);
  Operand a = operand(first_pred, pool_.empty() ? 0.0 : 0.85, shape_, dtype_);
  const bool a_float = is_float(tensor(a).scalar_type());
  auto alpha = [&] {
    switch (rng_.weighted({60, 20, 20})) {
      case 0:
        return ir::Attr(int64_t{1});
      case 1:
        return ir::Attr(rng_.pick<int64_t>({2, -1}));
      default:
        return ir::Attr(rng_.pick<double>({0.5, 1.5, -2.25}));
    }
  };
  switch (kind) {
    case Arith: {
      p.op = rng_.pick<std::string>({"aten::add.Tensor", "aten::sub.Tensor", "aten::rsub.Tensor",
                                     "aten::mul.Tensor", "aten::div.Tensor",
                                     "aten::div.Tensor_mode", "aten::maximum", "aten::minimum"});
      p.args = {a, partner(a, any, 0.5)};
      if (rng_.chance(0.5)) std::swap(p.args[0], p.args[1]);
      if (p.op == "aten::div.Tensor_mode") {
        const size_t m = rng_.weighted({70, 15, 15});
        p.attrs = {{"rounding_mode", m == 0   ? ir::Attr(std::string("trunc"))
                                     : m == 1 ? ir::Attr(std::string("floor"))
                                              : ir::Attr(ir::NoneAttr{})}};
      } else if (p.op.starts_with("aten::add") || p.op.find("sub.") != std::string::npos) {
        p.attrs = {{"alpha", alpha()}};
      }
      return true;
    }
    case ArithScalar: {
      p.op = rng_.pick<std::string>({"aten::add.Scalar", "aten::sub.Scalar", "aten::rsub.Scalar",
                                     "aten::mul.Scalar", "aten::div.Scalar"});
      p.args = {a};
      p.attrs = {{"other", scalar(!a_float && rng_.chance(0.7))}};
      if (!p.op.starts_with("aten::mul") && !p.op.starts_with("aten::div"))
        p.attrs.emplace_back("alpha", alpha());
      return true;
    }
    case Unary:
      p.op =
          rng_.pick<std::string>({"aten::neg", "aten::abs", "aten::exp", "aten::log", "aten::sqrt",
                                  "aten::rsqrt", "aten::reciprocal", "aten::tanh", "aten::sigmoid",
                                  "aten::erf", "aten::sign", "aten::log1p", "aten::expm1"});
      p.args = {a};
      return true;
    case Activation:
      p.op = rng_.pick<std::string>({"aten::relu", "aten::gelu", "aten::silu", "aten::hardswish",
                                     "aten::hardsigmoid", "aten::leaky_relu", "aten::elu",
                                     "aten::softplus", "aten::mish"});
      p.args = {a};
      if (p.op == "aten::gelu")
        p.attrs = {{"approximate", std::string(rng_.chance(0.5) ? "none" : "tanh")}};
      if (p.op == "aten::leaky_relu")
        p.attrs = {{"negative_slope", rng_.pick<ir::Attr>({0.01, 0.2, -0.5, int64_t{0}})}};
      if (p.op == "aten::softplus") {
        p.attrs = {{"beta", rng_.pick<ir::Attr>({int64_t{1}, 2.0, 0.5})},
                   {"threshold", rng_.pick<ir::Attr>({int64_t{20}, 1.0, int64_t{5}})}};
      }
      if (p.op == "aten::elu") {  // elu, selu's constants, celu's input scale (1 / alpha)
        p.attrs = {{"alpha", rng_.pick<ir::Attr>({int64_t{1}, 1.6732632423543772, 0.5})},
                   {"scale", rng_.pick<ir::Attr>({int64_t{1}, 1.0507009873554805})},
                   {"input_scale", rng_.pick<ir::Attr>({int64_t{1}, 2.0})}};
      }
      return true;
    case Clamp: {
      auto bound = [&](bool low) -> ir::Attr {
        if (!a_float || rng_.chance(0.3)) return rng_.pick<int64_t>({-2, -1, 0, 1, 3});
        return low ? rng_.pick<double>({-1.0, -0.5, 0.0, 0.25, 2.0})
                   : rng_.pick<double>({-0.25, 0.0, 0.5, 1.0, 6.0});
      };
      p.op = rng_.pick<std::string>(
          {"aten::clamp", "aten::clamp_min", "aten::clamp_max", "aten::hardtanh"});
      p.args = {a};
      if (p.op == "aten::clamp") {
        const size_t which = rng_.weighted({50, 25, 25});
        p.attrs = {{"min", which == 2 ? ir::Attr(ir::NoneAttr{}) : bound(true)},
                   {"max", which == 1 ? ir::Attr(ir::NoneAttr{}) : bound(false)}};
      } else if (p.op == "aten::clamp_min") {
        p.attrs = {{"min", bound(true)}};
      } else if (p.op == "aten::clamp_max") {
        p.attrs = {{"max", bound(false)}};
      } else {
        p.attrs = {{"min_val", bound(true)}, {"max_val", bound(false)}};
      }
      return true;
    }
    case LayoutCopy: {
      // A copy into another layout (a transposing kernel where the operand is permuted), or
      // into the same one.
      p.op = "aten::clone";
      p.args = {a};
      std::vector<ir::Attr> formats = {ir::Attr(ir::NoneAttr{}), ir::Attr(int64_t{0})};
      if (tensor(a).dim() == 4) formats.push_back(ir::Attr(int64_t{2}));
      p.attrs = {{"memory_format", rng_.pick(formats)}};
      return true;
    }
    case Pow: {
      p.op = "aten::pow.Tensor_Scalar";
      p.args = {a};
      const double e = rng_.pick<double>({2, 3, 0.5, -1, -0.5, -2});
      const bool as_int = e == std::floor(e) && rng_.chance(0.4);
      p.attrs = {{"exponent", as_int ? ir::Attr(static_cast<int64_t>(e)) : ir::Attr(e)}};
      return true;
    }
    case Compare:
    case CompareScalar: {
      const std::string name = rng_.pick<std::string>({"eq", "ne", "lt", "le", "gt", "ge"});
      p.args = {a};
      if (kind == Compare) {
        p.op = "aten::" + name + ".Tensor";
        p.args.push_back(partner(a, exact_val, 0.5));
        return true;
      }
      p.op = "aten::" + name + ".Scalar";
      const at::Tensor& t = tensor(a);
      ir::Attr other = scalar(!a_float);
      if (t.numel() > 0 && rng_.chance(0.6)) {  // an element of the input, maybe nudged
        // A symbolic case reads the first element: the same at every binding for a drawn tensor.
        const int64_t at = rng_.range(0, t.numel() - 1);
        const double x = t.reshape({-1})[symbolic_ ? 0 : at].item<double>();
        const double nudge = rng_.chance(0.4) ? rng_.pick<double>({1e-4, -1e-4, 1e-7}) : 0.0;
        const bool integral = !a_float && nudge == 0 && rng_.chance(0.7) && std::isfinite(x);
        other = integral ? ir::Attr(static_cast<int64_t>(x)) : ir::Attr(x + nudge * std::abs(x));
      }
      p.attrs = {{"other", other}};
      return true;
    }
    case Where: {
      p.op = "aten::where.self";
      auto condition = [&](const Val& v) { return v.exact && v.eager.scalar_type() == at::kBool; };
      Operand c = partner(a, condition, 0.7);
      if (c.val < 0) c.fresh = fresh(c.fresh.tensor.sizes().vec(), at::kBool);
      p.args = {c, a, partner(a, any, 0.5)};
      if (rng_.chance(0.5)) std::swap(p.args[1], p.args[2]);
      return true;
    }
    case Cast: {
      at::ScalarType to = rng_.pick(fuzz_dtypes());
      const at::Tensor& t = tensor(a);
      if (to == t.scalar_type()) return false;
      if (!is_float(to) && a_float) {
        // Float to integer: exact inputs only (a cast is a discontinuity), and only values the
        // integer type holds: out of range kiln gives eager's x86 result (scalar_convert.h), but
        // eager's own result there is not portable, so such elements are never checked.
        const double limit = to == at::kInt ? 2147483647.0 : to == at::kLong ? 9.2e18 : kInf;
        if (!exact(a)) return false;
        if (to != at::kBool &&
            (t.numel() > 0 && (!at::isfinite(t).all().item<bool>() ||
                               t.to(at::kDouble).abs().max().item<double>() >= limit)))
          return false;
      }
      p.op = "aten::_to_copy";
      p.args = {a};
      p.attrs = {{"dtype", static_cast<int64_t>(to)},
                 {"layout", ir::NoneAttr{}},
                 {"device", ir::NoneAttr{}},
                 {"pin_memory", ir::NoneAttr{}},
                 {"non_blocking", false},
                 {"memory_format", ir::NoneAttr{}}};
      return true;
    }
    case Reduce: {
      if (last_reduction_.input >= 0 && rng_.chance(0.6)) {
        p.op = rng_.pick<std::string>(
            {"aten::sum.dim_IntList", "aten::mean.dim", "aten::amax", "aten::amin"});
        p.args = {Operand{last_reduction_.input, {}}};
        p.attrs = {{"dim", last_reduction_.dims}, {"keepdim", last_reduction_.keepdim}};
        if (p.op != "aten::amax" && p.op != "aten::amin")
          p.attrs.emplace_back("dtype", ir::NoneAttr{});
        return true;
      }
      const int64_t rank = tensor(a).dim();
      p.op = rng_.pick<std::string>({"aten::sum.dim_IntList", "aten::sum.dim_IntList",
                                     "aten::mean.dim", "aten::mean.dim", "aten::amax", "aten::amin",
                                     "aten::sum", "aten::mean"});
      p.args = {a};
      if (p.op == "aten::sum" || p.op == "aten::mean") {
        p.attrs = {{"dtype", ir::NoneAttr{}}};
        return true;
      }
      std::vector<int64_t> dims;
      for (int64_t d = 0; d < rank; ++d) {
        if (rng_.chance(0.4)) dims.push_back(rng_.chance(0.3) ? d - rank : d);
      }
      if (dims.empty() && rank > 0 && rng_.chance(0.85))
        dims.push_back(rng_.range(-rank, rank - 1));
      const bool keepdim = rng_.chance(0.5);
      p.attrs = {{"dim", dims}, {"keepdim", keepdim}};
      if (p.op != "aten::amax" && p.op != "aten::amin")
        p.attrs.emplace_back("dtype", ir::NoneAttr{});
      if (a.val >= 0) last_reduction_ = {a.val, dims, keepdim};
      return true;
    }
    case Softmax: {
      const int64_t rank = std::max<int64_t>(tensor(a).dim(), 1);
      p.op = rng_.chance(0.5) ? "aten::softmax.int" : "aten::log_softmax.int";
      p.args = {a};
      p.attrs = {{"dim", rng_.range(-rank, rank - 1)}, {"dtype", ir::NoneAttr{}}};
      return true;
    }
    case LayerNorm: {
      const at::Tensor& t = tensor(a);
      if (t.dim() == 0) return false;
      const int64_t k = std::min<int64_t>(t.dim(), rng_.range(1, 2));
      std::vector<int64_t> normalized(t.sizes().end() - k, t.sizes().end());
      p.op = "aten::layer_norm";
      p.args = {a};
      p.attrs = {{"normalized_shape", normalized}};
      for (const char* name : {"weight", "bias"}) {
        if (rng_.chance(0.7)) {
          Fresh f = fresh(normalized, rng_.chance(0.85) ? t.scalar_type() : at::kFloat, false);
          f.constant = rng_.chance(0.5);
          p.args.push_back({-1, f});
        } else {
          p.attrs.emplace_back(name, ir::NoneAttr{});
        }
      }
      p.attrs.emplace_back("eps", rng_.pick<double>({1e-5, 1e-6, 1e-3, 0.1}));
      p.attrs.emplace_back("cudnn_enable", true);
      return true;
    }
    case Variance: {
      // var and std as FX writes them (dim list, correction); TorchScript's unbiased= overloads
      // lower through the same code (tests/kernel/lower_variance_test.cpp).
      const at::Tensor& t = tensor(a);
      // ATen warns of no degrees of freedom for every empty input, even where its output is empty.
      if (t.numel() == 0) return false;
      const int64_t rank = t.dim();
      p.op = rng_.chance(0.5) ? "aten::var.correction" : "aten::std.correction";
      p.args = {a};
      std::vector<int64_t> dims;
      for (int64_t d = 0; d < rank; ++d) {
        if (rng_.chance(0.4)) dims.push_back(rng_.chance(0.3) ? d - rank : d);
      }
      if (dims.empty() && rank > 0 && rng_.chance(0.85))
        dims.push_back(rng_.range(-rank, rank - 1));
      const ir::Attr correction =
          rng_.pick<ir::Attr>({int64_t{1}, int64_t{1}, int64_t{0}, 0.5, ir::NoneAttr{}});
      // No degrees of freedom left: ATen's inf or NaN, which kiln leaves to ATen (and ATen warns).
      int64_t n = dims.empty() ? t.numel() : 1;  // an empty list reduces every dim
      for (int64_t d : dims)
        n *= t.size(d);
      const double c =
          std::holds_alternative<ir::NoneAttr>(correction) ? 1 : scalar_value(correction);
      if (static_cast<double>(n) - c <= 0) return false;
      p.attrs = {{"dim", dims}, {"correction", correction}, {"keepdim", rng_.chance(0.5)}};
      return true;
    }
  }
  return false;
}

int Generator::commit(Fresh& f) {
  const ir::TensorType type = *tensor_type_of(f.tensor);
  Val v = leaf_val(f.tensor);
  if (symbolic_ && f.constant) {
    // A frozen weight never moves with the sizes: one with a dim of a size input's value is most
    // likely a copy of the main shape, made an input instead.
    for (int64_t s : f.tensor.sizes()) {
      for (int d : case_.size_dims)
        f.constant = f.constant && s != shape_[d];
    }
  }
  if (f.constant) {
    const int64_t index = static_cast<int64_t>(case_.constants.size());
    case_.constants.push_back(f.tensor);
    v.value = case_.graph->append("prim::Constant", {}, {type}, {{"index", index}})->output();
    v.value->set_name("w" + std::to_string(index));
    constant_notes_.push_back("%" + v.value->name() + " = constant " + f.note);
  } else {
    v.value = case_.graph->add_input(type, "x" + std::to_string(case_.inputs.size()));
    case_.inputs.push_back(f.tensor);
    case_.input_notes.push_back("%" + v.value->name() + " : " + f.note);
  }
  pool_.push_back(std::move(v));
  return static_cast<int>(pool_.size()) - 1;
}

bool Generator::apply(Proposal& p) {
  std::vector<Val> fresh_vals;
  fresh_vals.reserve(p.args.size());
  std::vector<const Val*> ins;
  std::vector<at::Tensor> tensors;
  bool all_exact = true;
  for (const Operand& o : p.args) {
    if (o.val >= 0) {
      ins.push_back(&pool_[o.val]);
    } else {
      fresh_vals.push_back(leaf_val(o.fresh.tensor));
      ins.push_back(&fresh_vals.back());
    }
    tensors.push_back(ins.back()->eager);
    all_exact &= ins.back()->exact;
  }
  at::Tensor out;
  try {
    out = call_op(p.op, tensors, p.attrs);
  } catch (const c10::Error&) {
    return false;  // ATen rejects this combination: pick again
  }
  auto type = tensor_type_of(out);
  const auto& dtypes = fuzz_dtypes();
  if (!type || out.numel() > kMaxNumel ||
      std::find(dtypes.begin(), dtypes.end(), out.scalar_type()) == dtypes.end())
    return false;
  // Integers and bools are compared exactly: they must not depend on inexact floats.
  if (!all_exact && !is_float(out.scalar_type())) return false;
  Val v;
  v.eager = out;
  v.v64 = as64(out);
  v.exact = all_exact && exact_op(p.op, out.scalar_type(), p.attrs, ins);
  // kiln's kernels do not contract multiply-add into FMA (kKilnContractsFma): products round
  // as in eager, and adding to one is exact.
  v.product =
      kKilnContractsFma && is_float(out.scalar_type()) && ends_in_product(p.op, p.attrs, ins);
  try {
    v.bound = v.exact ? at::zeros(out.sizes(), at::kDouble)
                      : error_bound(p.op, p.attrs, ins, v.v64, out.scalar_type());
  } catch (const c10::Error&) {
    return false;  // the float64 evaluation of the bound is not possible for these operands
  }
  std::vector<ir::Value*> values;
  for (Operand& o : p.args) {
    if (o.val < 0) o.val = commit(o.fresh);
    ++pool_[o.val].uses;
    values.push_back(pool_[o.val].value);
  }
  v.value = case_.graph->append(p.op, values, {*type}, p.attrs)->output();
  pool_.push_back(std::move(v));
  ++case_.num_ops;
  return true;
}

FuzzCase Generator::run() {
  zero_sizes_ = rng_.chance(0.06);
  shape_ = random_shape(static_cast<int>(rng_.weighted({7, 18, 35, 25, 15})));
  if (large_ && !shape_.empty()) {
    // Doubling the largest dim draws nothing from rng_: the ops are the small case's.
    auto numel = [&] {
      int64_t n = 1;
      for (int64_t s : shape_)
        n *= s;
      return n;
    };
    while (numel() > 0 && numel() < (int64_t{1} << 16))
      *std::max_element(shape_.begin(), shape_.end()) *= 2;
  }
  if (symbolic_) choose_size_dims();
  dtype_ = std::vector<at::ScalarType>{at::kFloat,    at::kDouble, at::kHalf,
                                       at::kBFloat16, at::kInt,    at::kLong}[rng_.weighted(
      {60, 10, 10, 10, 5, 5})];
  const int target = static_cast<int>(rng_.range(2, 12));
  for (int attempt = 0; case_.num_ops < target && attempt < 400; ++attempt) {
    Proposal p;
    if (propose(p)) apply(p);
  }
  // Outputs: every unused result, and some results that are also used.
  std::vector<ir::Value*> outputs;
  for (const Val& v : pool_) {
    const bool chosen = v.uses == 0 || rng_.chance(0.2);  // draws the same with all_outputs_
    if (!v.leaf && (chosen || all_outputs_)) {
      outputs.push_back(v.value);
      case_.expected.push_back(v.eager);
      case_.bounds.push_back(v.bound);
    }
  }
  case_.graph->set_outputs(outputs);
  case_.ir_text = ir::print_graph(*case_.graph);
  for (const auto& note : constant_notes_)
    case_.input_notes.push_back(note);
  return std::move(case_);
}

}  // namespace generator

FuzzCase make_case(uint64_t seed, bool all_outputs, bool large) {
  return generator::Generator(seed, all_outputs, large).run();
}

FuzzCase make_symbolic_case(uint64_t seed, std::span<const int64_t> binding) {
  return generator::Generator(seed, binding).run();
}

}  // namespace kiln::fuzz
