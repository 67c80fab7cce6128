// The fuzzer's shapes, dtypes and tensors: a case's main shape and its partners, element values
// of every kind (special values included), the layouts inputs come in, and a symbolic case's
// size inputs.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <stdexcept>

#include "fuzz/fuzz_generator.h"
#include "fuzz/fuzz_support.h"

namespace kiln::fuzz::generator {

std::vector<int64_t> Generator::random_shape(int rank) {
  std::vector<int64_t> shape;
  for (int i = 0; i < rank; ++i) {
    switch (rng_.weighted({15, 45, 25, 10, zero_sizes_ ? 5.0 : 0.0})) {
      case 0:
        shape.push_back(1);
        break;
      case 1:
        shape.push_back(rng_.range(2, 8));
        break;
      case 2:
        shape.push_back(rng_.range(9, 40));
        break;
      case 3:
        shape.push_back(rng_.pick<int64_t>({64, 100, 128}));
        break;
      default:
        shape.push_back(0);
        break;
    }
  }
  auto numel = [&] {
    int64_t n = 1;
    for (int64_t s : shape)
      n *= s;
    return n;
  };
  while (numel() > 4096) {
    auto largest = std::max_element(shape.begin(), shape.end());
    *largest = (*largest + 1) / 2;
  }
  return shape;
}

std::vector<int64_t> Generator::partner_shape(at::IntArrayRef shape) {
  std::vector<int64_t> s = shape.vec();
  const double r = rng_.uniform();
  if (r < 0.5) return s;
  if (r < 0.8) {  // fewer leading dims, some dims 1: broadcasts up to `shape`
    if (!s.empty() && rng_.chance(0.4)) s.erase(s.begin(), s.begin() + rng_.range(1, s.size()));
    for (int64_t& d : s) {
      if (rng_.chance(0.3)) d = 1;
    }
    return s;
  }
  if (r < 0.92 && s.size() < 4) {  // `shape` broadcasts up to this one
    for (int64_t& d : s) {
      if (d == 1 && rng_.chance(0.5)) d = rng_.range(2, 6);
    }
    const int64_t extra = rng_.range(1, 4 - static_cast<int64_t>(s.size()));
    for (int64_t i = 0; i < extra && rng_.chance(0.7); ++i)
      s.insert(s.begin(), rng_.range(1, 5));
    return s;
  }
  return {};
}

at::ScalarType Generator::fresh_dtype(at::ScalarType like) {
  return rng_.chance(0.85) ? like : rng_.pick(fuzz_dtypes());
}

std::pair<at::Tensor, std::string> Generator::fill(const std::vector<int64_t>& shape,
                                                   at::ScalarType dtype) {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  if (n == 0) return {at::empty(shape, dtype), "empty"};
  // A symbolic case draws one seed from the op stream per tensor, so that how many elements a
  // tensor has changes no later op (and a tensor's first elements are the same at every binding).
  std::optional<Rng> own;
  if (symbolic_) own.emplace(static_cast<uint64_t>(rng_.range(0, int64_t{1} << 62)));
  Rng& draw = own ? *own : rng_;
  std::vector<int64_t> ints(n);
  std::string note;
  if (dtype == at::kBool || !is_float(dtype)) {
    int64_t lo = 0, hi = 1;
    if (dtype == at::kBool) {
      const double p = draw.pick<double>({0.5, 0.1, 0.9});
      for (auto& v : ints)
        v = draw.chance(p);
      note = "bernoulli(" + number(p) + ")";
    } else {
      const int64_t big = dtype == at::kInt ? 2147483647LL : (1LL << 62);
      switch (draw.weighted({55, 20, 15, 10})) {
        case 0:
          lo = -10, hi = 10;
          break;
        case 1:
          lo = -1000, hi = 1000;
          break;
        case 2:
          lo = 0, hi = 3;
          break;
        default:
          lo = -big, hi = big;
          break;
      }
      for (auto& v : ints)
        v = draw.range(lo, hi);
      note = "integers uniform in [" + std::to_string(lo) + "," + std::to_string(hi) + "]";
    }
    auto t = at::from_blob(ints.data(), shape, at::kLong).clone().to(dtype);
    return {t, note};
  }
  std::vector<double> values(n);
  const bool half = dtype == at::kHalf;
  switch (draw.weighted({35, 20, 15, 10, 10, 10})) {
    case 0:
      for (auto& v : values)
        v = draw.normal();
      note = "normal(0,1)";
      break;
    case 1: {
      const double s = draw.pick<double>({1e-3, 10, 100, 1e4});
      for (auto& v : values)
        v = (2 * draw.uniform() - 1) * s;
      note = "uniform(-" + number(s) + "," + number(s) + ")";
      break;
    }
    case 2:
      for (auto& v : values)
        v = std::abs(draw.normal()) + 0.05;
      note = "|normal(0,1)|+0.05";
      break;
    case 3: {
      const double e = dtype == at::kDouble ? 100 : half ? 4.5 : 30;
      for (auto& v : values)
        v = (draw.chance(0.5) ? -1 : 1) * std::pow(10.0, (2 * draw.uniform() - 1) * e);
      note = "+-10^uniform(-" + number(e) + "," + number(e) + ")";
      break;
    }
    case 4:
      for (auto& v : values)
        v = static_cast<double>(draw.range(-4, 4));
      note = "integers in [-4,4]";
      break;
    default:
      for (auto& v : values)
        v = draw.normal();
      note = "normal(0,1) with 10% special values";
      for (auto& v : values) {
        if (draw.chance(0.1)) {
          v = draw.pick<double>(
              {kInf, -kInf, std::nan(""), 0.0, -0.0, max_finite(dtype) / 2, min_normal(dtype) / 4});
        }
      }
      break;
  }
  if (n > 0 && draw.chance(0.05)) {
    const double special = draw.pick<double>({kInf, -kInf, std::nan("")});
    values[draw.range(0, n - 1)] = special;
    note += " and one " + number(special);
  }
  auto t = at::from_blob(values.data(), shape, at::kDouble).clone().to(dtype);
  return {t, note};
}

Fresh Generator::fresh(const std::vector<int64_t>& shape, at::ScalarType dtype, bool strided) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> base = shape;
  std::function<at::Tensor(const at::Tensor&)> view = [](const at::Tensor& t) { return t; };
  std::string layout = "contiguous";
  const size_t kind = strided && rank > 0 ? rng_.weighted({70, 10, 8, 7, 5}) : 0;
  if (kind == 1 && rank >= 2) {  // a permutation of a contiguous tensor
    std::vector<int64_t> perm(rank), inverse(rank);
    for (int64_t i = 0; i < rank; ++i)
      perm[i] = i;
    while (std::is_sorted(perm.begin(), perm.end()))
      std::shuffle(perm.begin(), perm.end(), std::mt19937_64(rng_.range(0, 1 << 30)));
    for (int64_t i = 0; i < rank; ++i) {
      base[i] = shape[perm[i]];
      inverse[perm[i]] = i;
    }
    view = [inverse](const at::Tensor& t) { return t.permute(inverse); };
    layout = "permute(" + shape_string(inverse) + ") of a contiguous " + shape_string(base);
  } else if (kind == 2) {  // every second element along one dim
    const int64_t d = rng_.range(0, rank - 1), start = rng_.range(0, 1);
    base[d] = 2 * shape[d] + start;
    view = [d, start, n = shape[d]](const at::Tensor& t) {
      return t.slice(d, start, start + 2 * n, 2);
    };
    layout = "slice(dim=" + std::to_string(d) + ", start=" + std::to_string(start) +
             ", step=2) of a contiguous " + shape_string(base);
  } else if (kind == 3) {  // size-1 dims expanded (stride 0)
    for (int64_t d = 0; d < rank; ++d) {
      if (shape[d] > 1 && rng_.chance(0.5)) base[d] = 1;
    }
    view = [shape](const at::Tensor& t) { return t.expand(shape); };
    layout = "expand of a contiguous " + shape_string(base);
  } else if (kind == 4) {  // a storage offset
    const int64_t k = rng_.range(1, 3);
    base[0] = shape[0] + k;
    view = [k, n = shape[0]](const at::Tensor& t) { return t.narrow(0, k, n); };
    layout = "narrow(0, " + std::to_string(k) + ") of a contiguous " + shape_string(base);
  }
  auto [t, values] = fill(base, dtype);
  Fresh f;
  f.tensor = view(t);
  f.note = ir::type_string(*tensor_type_of(f.tensor)) + ", " + layout + ", values " + values;
  return f;
}

void Generator::choose_size_dims() {
  // From a stream of its own: the ops are the same whichever dims move.
  Rng choose(case_.seed ^ 0x5151);
  std::vector<int> candidates;
  for (int d = 0; d < static_cast<int>(shape_.size()); ++d) {
    if (shape_[d] >= 2) candidates.push_back(d);
  }
  std::shuffle(candidates.begin(), candidates.end(), std::mt19937_64(choose.range(0, 1 << 30)));
  candidates.resize(std::min<size_t>(candidates.size(), choose.chance(0.7) ? 1 : 2));
  std::sort(candidates.begin(), candidates.end());
  case_.size_dims = candidates;
  if (binding_.empty()) {
    for (int d : candidates)
      case_.binding.push_back(shape_[d]);
    return;
  }
  if (binding_.size() != candidates.size())
    throw std::invalid_argument("kiln_fuzz: seed " + std::to_string(case_.seed) + " has " +
                                std::to_string(candidates.size()) + " size inputs, the binding " +
                                std::to_string(binding_.size()));
  for (size_t i = 0; i < candidates.size(); ++i)
    shape_[candidates[i]] = binding_[i];
  case_.binding = binding_;
}

}  // namespace kiln::fuzz::generator
