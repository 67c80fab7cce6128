// The fuzzer's case generator, shared by the files that define it: fuzz_tensors.cpp draws
// shapes, dtypes and tensors (and a symbolic case's size inputs); fuzz_case.cpp draws the ops and
// builds the graph. Not part of the fuzzer's interface (fuzz_case.h).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/error_bounds.h"
#include "fuzz/fuzz_case.h"
#include "passes/ir/graph.h"

namespace kiln::fuzz::generator {

inline constexpr int64_t kMaxNumel = 16384;  // no op output larger than this

// --- Random choices ----------------------------------------------------------------------------

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed * 0x9E3779B97F4A7C15ull + 0x1234567ull) {}
  double uniform() { return std::uniform_real_distribution<double>(0, 1)(engine_); }
  bool chance(double p) { return uniform() < p; }
  int64_t range(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(engine_);
  }
  double normal() { return std::normal_distribution<double>(0, 1)(engine_); }
  template <typename T>
  T pick(const std::vector<T>& items) {
    return items.at(range(0, static_cast<int64_t>(items.size()) - 1));
  }
  size_t weighted(const std::vector<double>& weights) {
    double total = 0;
    for (double w : weights)
      total += w;
    double x = uniform() * total;
    for (size_t i = 0; i < weights.size(); ++i) {
      if ((x -= weights[i]) < 0) return i;
    }
    return weights.size() - 1;
  }

 private:
  std::mt19937_64 engine_;
};

// --- The generator -----------------------------------------------------------------------------

struct Fresh {
  at::Tensor tensor;
  std::string note;
  bool constant = false;
};

// An operand of a proposed op: a value of the pool, or a tensor made for it, which becomes a
// graph input (or a constant) if the op is kept.
struct Operand {
  int val = -1;
  Fresh fresh;
};

struct Proposal {
  std::string op;
  std::vector<Operand> args;
  ir::AttrList attrs;
};

inline bool broadcastable(at::IntArrayRef a, at::IntArrayRef b) {
  for (size_t i = 1; i <= std::min(a.size(), b.size()); ++i) {
    const int64_t x = a[a.size() - i], y = b[b.size() - i];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

class Generator {
 public:
  Generator(uint64_t seed, bool all_outputs, bool large)
      : rng_(seed), all_outputs_(all_outputs), large_(large) {
    case_.seed = seed;
    case_.large = large;
    case_.graph = std::make_unique<ir::Graph>();
  }
  /// A symbolic case (make_symbolic_case): `binding` empty for the seed's own sizes.
  Generator(uint64_t seed, std::span<const int64_t> binding) : Generator(seed, false, false) {
    symbolic_ = true;
    binding_.assign(binding.begin(), binding.end());
  }

  FuzzCase run();

 private:
  using Pred = std::function<bool(const Val&)>;

  // Shapes, dtypes and tensors.
  std::vector<int64_t> random_shape(int rank);
  std::vector<int64_t> partner_shape(at::IntArrayRef shape);
  at::ScalarType fresh_dtype(at::ScalarType like);
  std::pair<at::Tensor, std::string> fill(const std::vector<int64_t>& shape, at::ScalarType dtype);
  Fresh fresh(const std::vector<int64_t>& shape, at::ScalarType dtype, bool strided = true);

  // Operands.
  int pick(const Pred& pred);
  Operand operand(const Pred& pred, double p_existing, const std::vector<int64_t>& shape,
                  at::ScalarType dtype);
  Operand partner(const Operand& first, const Pred& pred, double p_existing);
  const at::Tensor& tensor(const Operand& o) const {
    return o.val >= 0 ? pool_[o.val].eager : o.fresh.tensor;
  }
  bool exact(const Operand& o) const { return o.val < 0 || pool_[o.val].exact; }
  ir::Attr scalar(bool integral);

  // One op.
  bool propose(Proposal& p);
  bool apply(Proposal& p);
  int commit(Fresh& f);

  Rng rng_;
  FuzzCase case_;
  std::vector<Val> pool_;
  // The last reduction of a value already in the pool: a later one may reduce the same value
  // over the same dims (a sibling, which kiln computes in the same kernel).
  struct LastReduction {
    int input = -1;
    std::vector<int64_t> dims;
    bool keepdim = false;
  } last_reduction_;
  std::vector<std::string> constant_notes_;
  std::vector<int64_t> shape_;  // the case's main shape
  at::ScalarType dtype_ = at::kFloat;
  bool zero_sizes_ = false;
  bool all_outputs_ = false;
  bool large_ = false;
  // Symbolic: element values from a stream per tensor, and the size dims of shape_ at binding_.
  bool symbolic_ = false;
  std::vector<int64_t> binding_;
  void choose_size_dims();
};

}  // namespace kiln::fuzz::generator
