// A kernel with its buffers declared, for the tests of the kernel IR, the interpreter and the code
// generators (torch-free).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "passes/kernel/kernel.h"

namespace kiln::testing {

/// A kernel named `name` over `sizes` (the last `reduce_rank` reduced) whose buffers b0, b1, ...
/// have the dtypes `inputs`, then `outputs`; exprs and stores are for the caller to add.
inline kernel::Kernel make_kernel(std::string name, std::vector<int64_t> sizes, int reduce_rank,
                                  const std::vector<kernel::DType>& inputs,
                                  const std::vector<kernel::DType>& outputs) {
  kernel::Kernel k;
  k.name = std::move(name);
  k.sizes = std::move(sizes);
  k.reduce_rank = reduce_rank;
  for (kernel::DType t : inputs)
    k.buffers.push_back({"b" + std::to_string(k.buffers.size()), t, false});
  for (kernel::DType t : outputs)
    k.buffers.push_back({"b" + std::to_string(k.buffers.size()), t, true});
  return k;
}

/// Softmax over rows of n float32 elements: a max, a sum of exps, then the exps divided, per
/// element (b0 in, b1 out, both [rows, n] row-major).
inline kernel::Kernel softmax_kernel(int64_t rows, int64_t n) {
  using kernel::DType;
  using kernel::Op;
  using kernel::ReduceKind;
  kernel::Kernel k = make_kernel("softmax", {rows, n}, 1, {DType::Float32}, {DType::Float32});
  kernel::KernelBuilder b(k);
  const auto f = DType::Float32;
  const int x = b.load(0, {n, 1});
  const int m = b.reduce(ReduceKind::Max, x);
  const int e = b.unary(Op::Exp, b.binary(Op::Sub, x, m, f), f);
  b.store(1, {n, 1}, b.binary(Op::Div, e, b.reduce(ReduceKind::Sum, e), f));
  return k;
}

}  // namespace kiln::testing
