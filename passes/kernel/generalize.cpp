#include "passes/kernel/generalize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "passes/kernel/size_terms.h"

namespace kiln::kernel {
namespace {

/// The highest power of one input a term may hold: sizes and strides are products of distinct
/// dims, so a power above 1 is already rare (an attention score's [s, s] holds s*s elements).
constexpr int kMaxDegree = 4;

/// The largest scale of a factor's form (fit_shifted_product): a side in steps of at most 64
/// (choose_steps) floored by strides comes out as (64 / strides) * s + shift. Scales are powers
/// of two for the same reason; both bounds keep a product of forms from fitting values that
/// merely happen to grow.
constexpr int64_t kMaxScale = 64;

__int128 power(int64_t base, int k) {
  __int128 p = 1;
  for (int i = 0; i < k; ++i)
    p *= base;
  return p;
}

void check_bindings(const std::vector<Kernel>& kernels, const Bindings& bindings) {
  if (bindings.empty() || kernels.size() != bindings.size())
    throw std::invalid_argument("generalize: " + std::to_string(kernels.size()) + " kernels for " +
                                std::to_string(bindings.size()) + " bindings");
  const std::vector<int64_t>& base = bindings[0];
  if (bindings.size() != base.size() + 1 && bindings.size() != base.size() + 2)
    throw std::invalid_argument("generalize: " + std::to_string(base.size()) +
                                " size inputs need " + std::to_string(base.size() + 1) +
                                " bindings (the base, then one per input moved alone), and may "
                                "have a check after them, not " +
                                std::to_string(bindings.size()));
  if (bindings.size() == base.size() + 2) {
    const std::vector<int64_t>& check = bindings.back();
    if (check.size() != base.size() ||
        std::any_of(check.begin(), check.end(), [](int64_t v) { return v < 2; }))
      throw std::invalid_argument(
          "generalize: the check binding needs one value of at least 2 "
          "per size input");
  }
  for (size_t i = 0; i < base.size(); ++i) {
    const std::vector<int64_t>& moved = bindings[i + 1];
    bool alone = moved.size() == base.size() && moved[i] != base[i];
    for (size_t k = 0; alone && k < base.size(); ++k)
      alone = k == i || moved[k] == base[k];
    if (!alone)
      throw std::invalid_argument("generalize: binding " + std::to_string(i + 1) +
                                  " must move size input s" + std::to_string(i) + " alone");
    if (base[i] < 2 || moved[i] < 2)
      throw std::invalid_argument("generalize: size input s" + std::to_string(i) +
                                  " is bound below 2");
  }
}

bool integral(double v) {
  return v == static_cast<double>(static_cast<int64_t>(v)) && std::abs(v) < 0x1p53;
}

/// `kernel` with the integers a binding may change (sizes, strides, offsets) taken from
/// `like`, where the two have as many: equal to `like` when nothing else differs.
Kernel with_integers_of(Kernel kernel, const Kernel& like) {
  kernel.name = like.name;
  // Integral constants too: a size used as a value (a KV cache's length as a position).
  for (size_t i = 0; i < kernel.exprs.size() && i < like.exprs.size(); ++i) {
    Expr& e = kernel.exprs[i];
    if (e.op == Op::Constant && like.exprs[i].op == Op::Constant && integral(e.constant) &&
        integral(like.exprs[i].constant))
      e.constant = like.exprs[i].constant;
  }
  if (kernel.sizes.size() == like.sizes.size()) kernel.sizes = like.sizes;
  const std::vector<IndexMap*> maps = accesses(kernel);
  const std::vector<const IndexMap*> like_maps = accesses(like);
  for (size_t a = 0; a < maps.size() && a < like_maps.size(); ++a) {
    if (maps[a]->strides.size() == like_maps[a]->strides.size())
      maps[a]->strides = like_maps[a]->strides;
    maps[a]->offset = like_maps[a]->offset;
  }
  return kernel;
}

/// Fits one integer of the kernels (`value_of(kernel)`): its term, none for a constant, or a
/// reason in `why_not`.
template <typename ValueOf>
std::optional<SizeTerm> fit_field(const std::vector<Kernel>& kernels, const Bindings& bindings,
                                  const std::string& what, const ValueOf& value_of,
                                  std::string& why_not) {
  std::vector<int64_t> values;
  for (const Kernel& k : kernels)
    values.push_back(value_of(k));
  const std::optional<SizeTerm> term = fit_term(values, bindings);
  if (!term) {
    if (why_not.empty()) why_not = no_term_reason(what, values);
    return std::nullopt;
  }
  return as_field(*term);
}

/// Whether `term` gives every value at its binding.
bool reproduces(const SizeTerm& term, std::span<const int64_t> values, const Bindings& bindings) {
  for (size_t j = 0; j < bindings.size(); ++j)
    if (evaluate(term, bindings[j]) != values[j]) return false;
  return true;
}

/// The term c * m + d, with m a monomial fitted to the values less the base's (a size plus a
/// constant, a KV cache's P + 1 times constant sizes), or none.
std::optional<SizeTerm> fit_affine(std::span<const int64_t> values, const Bindings& bindings) {
  std::vector<int64_t> moved(values.begin(), values.end());
  for (int64_t& v : moved)
    v -= values[0];
  // The increments are c * (m(b) - m(base)); try m = the one input that moved the value.
  int input = -1;
  for (size_t i = 0; i < bindings[0].size(); ++i) {
    if (moved[i + 1] == 0) continue;
    if (input >= 0) return std::nullopt;
    input = static_cast<int>(i);
  }
  if (input < 0) return std::nullopt;
  const int64_t step = bindings[input + 1][input] - bindings[0][input];
  if (moved[input + 1] % step != 0) return std::nullopt;
  SizeTerm term{moved[input + 1] / step, {input}};
  term.constant = values[0] - term.coefficient * bindings[0][input];
  if (!reproduces(term, values, bindings)) return std::nullopt;
  return term;
}

/// The `k`-th root of `n` where it is an integer, else 0.
int64_t exact_root(int64_t n, int k) {
  const auto guess = static_cast<int64_t>(std::llround(std::pow(static_cast<double>(n), 1.0 / k)));
  for (int64_t r = std::max<int64_t>(guess - 1, 1); r <= guess + 1; ++r)
    if (power(r, k) == n) return r;
  return 0;
}

/// The form w = scale * s + shift and power p with (w(b) / w(a))^p = ratio (reduced, above 1 or
/// below) for input s moved from a to b, its scale a power of two up to kMaxScale and w(a) >= 1;
/// the highest power first (a side's square under one symbol is (s - 1)^2, not a form of 2s).
std::optional<std::pair<FactorForm, int>> fit_form(int64_t numerator, int64_t denominator,
                                                   int64_t a, int64_t b) {
  for (int p = kMaxDegree; p >= 1; --p) {
    const int64_t n = exact_root(numerator, p), d = exact_root(denominator, p);
    if (n == 0 || d == 0 || n == d) continue;
    // w(b) = w(a) + scale * (b - a) and w(b) / w(a) = n / d: w(a) = scale * (b - a) * d / (n - d).
    const __int128 num = static_cast<__int128>(b - a) * d, den = n - d;
    __int128 g = num < 0 ? -num : num, r = den < 0 ? -den : den;
    while (r != 0)
      g = std::exchange(r, g % r);
    const __int128 scale = (den < 0 ? -den : den) / g;
    if (scale > kMaxScale || (scale & (scale - 1)) != 0) continue;
    const __int128 at_a = scale * num / den;
    if (at_a < 1 || at_a > INT64_MAX / 2) continue;
    const auto s = static_cast<int64_t>(scale);
    return std::pair{FactorForm{s, static_cast<int64_t>(at_a) - s * a}, p};
  }
  return std::nullopt;
}

/// The term c * w0^p0 * w1^p1 * ..., each w a form of one input (an image's sides past
/// strides: 8 * (s0 - 1) * (s1 - 1) elements), fitted input by input from the ratio its move
/// makes of the value, or none. Positive values only (sizes and the strides and offsets they
/// make).
std::optional<SizeTerm> fit_shifted_product(std::span<const int64_t> values,
                                            const Bindings& bindings) {
  const std::vector<int64_t>& base = bindings.at(0);
  const int64_t v0 = values[0];
  if (v0 < 1) return std::nullopt;
  __int128 coefficient = v0;
  SizeTerm term{1, {}};
  for (size_t i = 0; i < base.size(); ++i) {
    const int64_t vi = values[i + 1];
    if (vi == v0) continue;
    if (vi < 1) return std::nullopt;
    const int64_t g = std::gcd(v0, vi);
    const auto fitted = fit_form(vi / g, v0 / g, base[i], bindings[i + 1][i]);
    if (!fitted) return std::nullopt;
    const auto [form, p] = *fitted;
    const int64_t at_base = form.scale * base[i] + form.shift;
    for (int k = 0; k < p; ++k) {
      if (coefficient % at_base != 0) return std::nullopt;
      coefficient /= at_base;
      term.factors.push_back(static_cast<int>(i));
      term.forms.push_back(form);
    }
  }
  term.coefficient = static_cast<int64_t>(coefficient);
  term = normalized(std::move(term));
  if (!reproduces(term, values, bindings)) return std::nullopt;
  return term;
}

/// What differs between two kernels whose integers were made equal (with_integers_of), for the
/// reason generalize gives.
std::string computation_difference(const Kernel& a, const Kernel& b) {
  if (a.rank() != b.rank() || a.reduce_rank != b.reduce_rank) return "their ranks";
  if (a.buffers.size() != b.buffers.size()) return "their buffers";
  if (a.in_place != b.in_place) return "which buffers they write in place";
  if (a.split_pieces != b.split_pieces) return "their split";
  if (a.exprs.size() != b.exprs.size()) return "their number of exprs";
  for (size_t i = 0; i < a.exprs.size(); ++i) {
    const Expr &x = a.exprs[i], &y = b.exprs[i];
    if (x.op != y.op || x.dtype != y.dtype || x.args != y.args || x.reduce != y.reduce)
      return "expr %" + std::to_string(i) + " (" + op_name(x.op) + ")";
    if (x.op == Op::Constant && std::memcmp(&x.constant, &y.constant, sizeof x.constant) != 0)
      return "constant %" + std::to_string(i) + " (" + std::to_string(x.constant) + " and " +
             std::to_string(y.constant) + ")";
  }
  return "their stores or maps";
}

}  // namespace

std::string no_term_reason(const std::string& what, std::span<const int64_t> values) {
  std::string seen;
  for (int64_t v : values)
    seen += (seen.empty() ? "" : ", ") + std::to_string(v);
  return what + " takes " + seen +
         " at the bindings: no term of the size inputs (a constant times a product of them, each "
         "perhaps scaled and shifted, or one of them times a constant plus a constant) gives that";
}

Bindings with_check(Bindings bindings, std::span<const int64_t> check) {
  bindings.emplace_back(check.begin(), check.end());
  return bindings;
}

std::optional<SizeTerm> fit_term(std::span<const int64_t> values, const Bindings& bindings) {
  if (values.size() != bindings.size()) return std::nullopt;
  if (std::optional<SizeTerm> monomial = fit_monomial(values, bindings)) return monomial;
  if (std::optional<SizeTerm> affine = fit_affine(values, bindings)) return affine;
  return fit_shifted_product(values, bindings);
}

std::optional<SizeTerm> fit_monomial(std::span<const int64_t> values, const Bindings& bindings) {
  const std::vector<int64_t>& base = bindings.at(0);
  if (values.size() != bindings.size()) return std::nullopt;
  const int64_t v0 = values[0];
  SizeTerm term{v0, {}};
  if (v0 != 0) {
    __int128 coefficient = v0;
    for (size_t i = 0; i < base.size(); ++i) {
      const int64_t a = base[i], b = bindings[i + 1][i], vi = values[i + 1];
      int degree = -1;
      // v = c * a^k at the base and c * b^k with input i moved: v0 * b^k == vi * a^k.
      for (int k = 0; k <= kMaxDegree && degree < 0; ++k)
        if (static_cast<__int128>(v0) * power(b, k) == static_cast<__int128>(vi) * power(a, k))
          degree = k;
      if (degree < 0) return std::nullopt;
      for (int k = 0; k < degree; ++k) {
        if (coefficient % a != 0) return std::nullopt;
        coefficient /= a;
        term.factors.push_back(static_cast<int>(i));
      }
    }
    term.coefficient = static_cast<int64_t>(coefficient);
  }
  // Every binding, the fitted ones included: a value that moved with no input's degree fits none.
  if (!reproduces(term, values, bindings)) return std::nullopt;
  return term;
}

Generalized generalize(const std::vector<Kernel>& kernels, const Bindings& bindings) {
  check_bindings(kernels, bindings);
  const Kernel& base = kernels[0];
  for (const Kernel& k : kernels) {
    if (!k.size_inputs.empty())
      throw std::invalid_argument("generalize: kernel " + k.name + " is already size-generic");
  }
  for (size_t j = 1; j < kernels.size(); ++j) {
    const Kernel like = with_integers_of(kernels[j], base);
    if (!same_computation(like, base))
      return {std::nullopt, "the kernels at bindings 0 and " + std::to_string(j) +
                                " differ in more than their sizes, strides and offsets: in " +
                                computation_difference(base, like)};
  }
  Generalized result;
  Kernel generic = base;
  generic.size_inputs = bindings[0];
  std::string& why_not = result.why_not;
  bool any = false;
  std::vector<std::optional<SizeTerm>> size_terms;
  for (int d = 0; d < base.rank(); ++d) {
    size_terms.push_back(fit_field(
        kernels, bindings, "size " + std::to_string(d), [d](const Kernel& k) { return k.sizes[d]; },
        why_not));
    any = any || size_terms.back();
  }
  if (any) generic.size_terms = std::move(size_terms);
  const std::vector<IndexMap*> maps = accesses(generic);
  for (size_t a = 0; a < maps.size(); ++a) {
    auto map_of = [a](const Kernel& k) { return accesses(k)[a]; };
    const std::string access = "access " + std::to_string(a);
    std::vector<std::optional<SizeTerm>> strides;
    bool any_stride = false;
    for (size_t d = 0; d < maps[a]->strides.size(); ++d) {
      strides.push_back(fit_field(
          kernels, bindings, access + "'s stride " + std::to_string(d),
          [&](const Kernel& k) { return map_of(k)->strides[d]; }, why_not));
      any_stride = any_stride || strides.back();
    }
    if (any_stride) maps[a]->stride_terms = std::move(strides);
    maps[a]->offset_term = fit_field(
        kernels, bindings, access + "'s offset", [&](const Kernel& k) { return map_of(k)->offset; },
        why_not);
    any = any || any_stride || maps[a]->offset_term;
  }
  for (size_t i = 0; i < generic.exprs.size(); ++i) {
    Expr& e = generic.exprs[i];
    if (e.op != Op::Constant || !integral(e.constant)) continue;
    e.constant_term = fit_field(
        kernels, bindings, "constant %" + std::to_string(i),
        [i](const Kernel& k) { return static_cast<int64_t>(k.exprs[i].constant); }, why_not);
    any = any || e.constant_term;
  }
  if (!why_not.empty()) return result;
  // Nothing moved with the inputs: the kernel is the same at every size.
  if (!any) generic.size_inputs.clear();
  validate(generic);
  result.kernel = std::move(generic);
  return result;
}

}  // namespace kiln::kernel
