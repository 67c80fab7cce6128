#include "passes/kernel/size_terms.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace kiln::kernel {
namespace {

/// What is wrong with one field's term: a factor naming no input, factors out of order, or a
/// value other than the example binding's.
std::string field_problem(const std::optional<SizeTerm>& term, int64_t value,
                          const std::vector<int64_t>& inputs, const std::string& what) {
  if (!term) return "";
  for (int f : term->factors) {
    if (f < 0 || static_cast<size_t>(f) >= inputs.size())
      return what + "'s term names size input " + std::to_string(f) + " of " +
             std::to_string(inputs.size());
  }
  if (!term->forms.empty() && term->forms.size() != term->factors.size())
    return what + "'s term has " + std::to_string(term->forms.size()) + " forms for " +
           std::to_string(term->factors.size()) + " factors";
  for (const FactorForm& form : term->forms) {
    if (form.scale < 1 || std::gcd(form.scale, form.shift) != 1)
      return what + "'s term " + print_term(*term) + " has a factor not in canonical form";
  }
  if (normalized(*term) != *term) return what + "'s term has its factors out of order";
  if (evaluate(*term, inputs) != value)
    return what + " is " + std::to_string(value) + " but its term " + print_term(*term) +
           " gives " + std::to_string(evaluate(*term, inputs));
  return "";
}

}  // namespace

int64_t evaluate(const SizeTerm& term, std::span<const int64_t> inputs) {
  int64_t value = term.coefficient;
  for (size_t k = 0; k < term.factors.size(); ++k) {
    const FactorForm form = form_of(term, k);
    value *= form.scale * inputs[term.factors[k]] + form.shift;
  }
  return value + term.constant;
}

FactorForm form_of(const SizeTerm& term, size_t k) {
  return term.forms.empty() ? FactorForm{} : term.forms[k];
}

SizeTerm normalized(SizeTerm term) {
  std::vector<std::pair<int, FactorForm>> factors;
  for (size_t k = 0; k < term.factors.size(); ++k)
    factors.emplace_back(term.factors[k], form_of(term, k));
  std::sort(factors.begin(), factors.end());
  term.factors.clear();
  term.forms.clear();
  const bool plain = std::all_of(factors.begin(), factors.end(),
                                 [](const auto& f) { return f.second == FactorForm{}; });
  for (const auto& [input, form] : factors) {
    term.factors.push_back(input);
    if (!plain) term.forms.push_back(form);
  }
  return term;
}

SizeTerm term_or_constant(const std::optional<SizeTerm>& term, int64_t value) {
  return term ? *term : SizeTerm{value, {}};
}

namespace {

/// `term` as a product: c * s + d as g * ((c/g) * s + d/g), g = gcd(c, d) (its sign c's, so that
/// the form's scale is positive); a term without a constant as it is. None for a term with a
/// constant and more than one factor, or one whose factor has a form already.
std::optional<SizeTerm> as_product(const SizeTerm& term) {
  if (term.constant == 0 || term.factors.empty()) return term;
  if (term.factors.size() != 1 || !term.forms.empty() || term.coefficient == 0) return std::nullopt;
  const int64_t g = std::gcd(term.coefficient, term.constant) * (term.coefficient < 0 ? -1 : 1);
  return SizeTerm{g, term.factors, 0, {{term.coefficient / g, term.constant / g}}};
}

}  // namespace

std::optional<SizeTerm> product(const SizeTerm& a, const SizeTerm& b) {
  if (a.factors.empty() && a.constant != 0) return product({a.coefficient + a.constant, {}}, b);
  if (b.factors.empty() && b.constant != 0) return product(a, {b.coefficient + b.constant, {}});
  if (a.factors.empty()) {  // a constant c: c * (k * m + d)
    if (a.coefficient == 0) return SizeTerm{0, {}};
    SizeTerm p = b;
    p.coefficient *= a.coefficient;
    p.constant *= a.coefficient;
    return p;
  }
  if (b.factors.empty()) return product(b, a);
  const std::optional<SizeTerm> x = as_product(a), y = as_product(b);
  if (!x || !y) return std::nullopt;
  SizeTerm p{x->coefficient * y->coefficient, x->factors};
  if (p.coefficient == 0) return SizeTerm{0, {}};
  p.factors.insert(p.factors.end(), y->factors.begin(), y->factors.end());
  if (!x->forms.empty() || !y->forms.empty()) {
    for (size_t k = 0; k < x->factors.size(); ++k)
      p.forms.push_back(form_of(*x, k));
    for (size_t k = 0; k < y->factors.size(); ++k)
      p.forms.push_back(form_of(*y, k));
  }
  return normalized(std::move(p));
}

std::optional<SizeTerm> as_field(const SizeTerm& term) {
  if (term.factors.empty()) return std::nullopt;
  return term;
}

SizeTerm size_term(const Kernel& kernel, int d) {
  return term_or_constant(kernel.size_terms.empty() ? std::nullopt : kernel.size_terms[d],
                          kernel.sizes[d]);
}

SizeTerm stride_term(const IndexMap& map, int d) {
  return term_or_constant(map.stride_terms.empty() ? std::nullopt : map.stride_terms[d],
                          map.strides[d]);
}

bool is_size_generic(const Kernel& kernel) {
  auto any = [](const std::vector<std::optional<SizeTerm>>& terms) {
    return std::any_of(terms.begin(), terms.end(), [](const auto& t) { return t.has_value(); });
  };
  if (any(kernel.size_terms)) return true;
  for (const IndexMap* m : accesses(kernel))
    if (any(m->stride_terms) || m->offset_term) return true;
  for (const Expr& e : kernel.exprs)
    if (e.constant_term) return true;
  return false;
}

Kernel bind_sizes(const Kernel& kernel, std::span<const int64_t> inputs) {
  if (inputs.size() != kernel.size_inputs.size()) {
    throw std::invalid_argument("kernel " + kernel.name + ": " + std::to_string(inputs.size()) +
                                " size inputs given for " +
                                std::to_string(kernel.size_inputs.size()));
  }
  Kernel bound = kernel;
  bound.size_inputs.assign(inputs.begin(), inputs.end());
  for (size_t d = 0; d < bound.size_terms.size(); ++d)
    if (bound.size_terms[d]) bound.sizes[d] = evaluate(*bound.size_terms[d], inputs);
  for (IndexMap* m : accesses(bound)) {
    for (size_t d = 0; d < m->stride_terms.size(); ++d)
      if (m->stride_terms[d]) m->strides[d] = evaluate(*m->stride_terms[d], inputs);
    if (m->offset_term) m->offset = evaluate(*m->offset_term, inputs);
  }
  for (Expr& e : bound.exprs)
    if (e.constant_term) e.constant = static_cast<double>(evaluate(*e.constant_term, inputs));
  return bound;
}

Kernel without_terms(Kernel kernel) {
  kernel.size_inputs.clear();
  kernel.size_terms.clear();
  for (IndexMap* map : accesses(kernel)) {
    map->stride_terms.clear();
    map->offset_term.reset();
  }
  for (Expr& e : kernel.exprs)
    e.constant_term.reset();
  return kernel;
}

std::string size_term_problem(const Kernel& kernel) {
  const auto rank = static_cast<size_t>(kernel.rank());
  if (!kernel.size_terms.empty() && kernel.size_terms.size() != rank)
    return "size terms for " + std::to_string(kernel.size_terms.size()) + " of " +
           std::to_string(rank) + " dims";
  for (size_t d = 0; d < kernel.size_terms.size(); ++d) {
    const std::string problem = field_problem(kernel.size_terms[d], kernel.sizes[d],
                                              kernel.size_inputs, "size " + std::to_string(d));
    if (!problem.empty()) return problem;
  }
  const std::vector<const IndexMap*> maps = accesses(kernel);
  for (size_t a = 0; a < maps.size(); ++a) {
    const IndexMap& m = *maps[a];
    const std::string access = "access " + std::to_string(a);
    if (!m.stride_terms.empty() && m.stride_terms.size() != m.strides.size())
      return access + " has stride terms for " + std::to_string(m.stride_terms.size()) + " of " +
             std::to_string(m.strides.size()) + " strides";
    for (size_t d = 0; d < m.stride_terms.size(); ++d) {
      const std::string problem = field_problem(m.stride_terms[d], m.strides[d], kernel.size_inputs,
                                                access + "'s stride " + std::to_string(d));
      if (!problem.empty()) return problem;
    }
    const std::string problem =
        field_problem(m.offset_term, m.offset, kernel.size_inputs, access + "'s offset");
    if (!problem.empty()) return problem;
  }
  for (size_t i = 0; i < kernel.exprs.size(); ++i) {
    const Expr& e = kernel.exprs[i];
    if (!e.constant_term) continue;
    const std::string what = "constant %" + std::to_string(i);
    if (e.op != Op::Constant) return what + " has a term but is no constant";
    const std::string problem =
        field_problem(e.constant_term, static_cast<int64_t>(e.constant), kernel.size_inputs, what);
    if (!problem.empty()) return problem;
    if (static_cast<double>(static_cast<int64_t>(e.constant)) != e.constant)
      return what + " follows a term but is not an integer";
  }
  return "";
}

std::string generic_problem(const Kernel& kernel) {
  if (!is_size_generic(kernel)) return "";
  if (kernel.split_pieces > 0) return "a split reduction has no size-generic code yet";
  for (size_t i = 0; i < kernel.size_inputs.size(); ++i) {
    if (kernel.size_inputs[i] < 2)
      return "its example binding has size input s" + std::to_string(i) + " = " +
             std::to_string(kernel.size_inputs[i]) + " (size-generic code is built at 2 or more)";
  }
  // A term with a constant (s - 1) can still be 0 or 1 there.
  for (const IndexMap* map : accesses(kernel)) {
    for (size_t d = 0; d < map->stride_terms.size(); ++d) {
      if (map->stride_terms[d] && (map->strides[d] == 0 || map->strides[d] == 1))
        return "a stride that follows the sizes is " + std::to_string(map->strides[d]) +
               " at its example binding";
    }
  }
  return "";
}

std::string print_term(const SizeTerm& term) {
  if (term.factors.empty()) return std::to_string(term.coefficient + term.constant);
  std::string text;
  if (term.coefficient != 1) text = term.coefficient == -1 ? "-" : std::to_string(term.coefficient);
  for (size_t k = 0; k < term.factors.size(); ++k) {
    if (!text.empty() && text != "-") text += "*";
    const std::string input = "s" + std::to_string(term.factors[k]);
    const FactorForm form = form_of(term, k);
    if (form == FactorForm{}) {
      text += input;
      continue;
    }
    text += "(" + (form.scale == 1 ? "" : std::to_string(form.scale) + "*") + input +
            (form.shift > 0 ? "+" : "") + (form.shift == 0 ? "" : std::to_string(form.shift)) + ")";
  }
  if (term.constant > 0) text += "+" + std::to_string(term.constant);
  if (term.constant < 0) text += std::to_string(term.constant);
  return text;
}

}  // namespace kiln::kernel
