// Kernels the CUDA code generator tests share: elementwise chains with broadcasts, softmax,
// row reductions (split ones too), casts between every pair of dtypes, every op on every dtype.
#pragma once

#include <vector>

#include "passes/kernel/kernel.h"
#include "tests/support/kernel_maker.h"

namespace kiln::cuda_test::kernels {

using kernel::DType;
using kernel::Kernel;
using kernel::KernelBuilder;
using kernel::Op;
using kernel::ReduceKind;
using testing::make_kernel;

// out = exp(x) * y over [64, 256], y read through `y_strides`.
inline Kernel exp_mul(std::vector<int64_t> y_strides, DType t = DType::Float32) {
  Kernel k = make_kernel("k", {64, 256}, 0, {t, t}, {t});
  KernelBuilder b(k);
  const int x = b.load(0, {256, 1});
  const int y = b.load(1, std::move(y_strides));
  b.store(2, {256, 1}, b.binary(Op::Mul, b.unary(Op::Exp, x, t), y, t));
  return k;
}

// softmax over rows of `n`.
inline Kernel softmax(int64_t rows, int64_t n) {
  Kernel k = make_kernel("k", {rows, n}, 1, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  const auto f = DType::Float32;
  const int x = b.load(0, {n, 1});
  const int max = b.reduce(ReduceKind::Max, x);
  const int e = b.unary(Op::Exp, b.binary(Op::Sub, x, max, f), f);
  const int sum = b.reduce(ReduceKind::Sum, e);
  b.store(1, {n, 1}, b.binary(Op::Div, e, sum, f));
  return k;
}

// layer_norm over rows of `n` (no affine), with the row's mean also stored into [rows]: three
// walks of the row (mean, variance, stores) and a row-level store.
inline Kernel layer_norm(int64_t rows, int64_t n) {
  Kernel k = make_kernel("k", {rows, n}, 1, {DType::Float32}, {DType::Float32, DType::Float32});
  KernelBuilder b(k);
  const auto f = DType::Float32;
  const int x = b.load(0, {n, 1});
  const int mean = b.reduce(ReduceKind::Mean, x);
  const int d = b.binary(Op::Sub, x, mean, f);
  const int var = b.reduce(ReduceKind::Mean, b.binary(Op::Mul, d, d, f));
  const int rstd = b.unary(Op::Rsqrt, b.binary(Op::Add, var, b.constant(1e-5, f), f), f);
  b.store(1, {n, 1}, b.binary(Op::Mul, d, rstd, f));
  b.store(2, {1, 0}, mean);
  return k;
}

// Sums over dim 0 of a row-major [n, columns] input: each of the kernel's rows is a column,
// neighbouring rows are neighbours in memory (the across-rows schedule at 4096 and more).
inline Kernel column_sum(int64_t columns, int64_t n, ReduceKind kind = ReduceKind::Sum) {
  Kernel k = make_kernel("k", {columns, n}, 1, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(1, {1, 0}, b.reduce(kind, b.load(0, {1, columns})));
  return k;
}

// softmax over dim 0 of a row-major [n, columns] input: three walks of each column.
inline Kernel column_softmax(int64_t columns, int64_t n) {
  Kernel k = make_kernel("k", {columns, n}, 1, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  const auto f = DType::Float32;
  const int x = b.load(0, {1, columns});
  const int max = b.reduce(ReduceKind::Max, x);
  const int e = b.unary(Op::Exp, b.binary(Op::Sub, x, max, f), f);
  const int sum = b.reduce(ReduceKind::Sum, e);
  b.store(1, {1, columns}, b.binary(Op::Div, e, sum, f));
  return k;
}

// Row sums of a [rows, n] input into [rows].
inline Kernel row_sum(int64_t rows, int64_t n, ReduceKind kind = ReduceKind::Sum,
                      DType t = DType::Float32) {
  Kernel k = make_kernel("k", {rows, n}, 1, {t}, {t});
  KernelBuilder b(k);
  b.store(1, {1, 0}, b.reduce(kind, b.load(0, {n, 1})));
  return k;
}

// Each row's max written to every element of the row (a row-level value stored per element),
// beside x - max; `columns` walks dim 0 of a row-major [n, rows] input instead.
inline Kernel max_per_element(int64_t rows, int64_t n, bool columns = false) {
  Kernel k = make_kernel("k", {rows, n}, 1, {DType::Float32}, {DType::Float32, DType::Float32});
  KernelBuilder b(k);
  const std::vector<int64_t> strides =
      columns ? std::vector<int64_t>{1, rows} : std::vector<int64_t>{n, 1};
  const int x = b.load(0, strides);
  const int max = b.reduce(ReduceKind::Max, x);
  b.store(1, strides, max);
  b.store(2, strides, b.binary(Op::Sub, x, max, DType::Float32));
  return k;
}

/// The kernels above, and one per op and dtype (with a broadcast operand, a constant and a
/// where).
inline std::vector<Kernel> test_kernels() {
  std::vector<Kernel> kernels = {exp_mul({256, 1}),
                                 exp_mul({0, 1}),
                                 exp_mul({1, 0}),
                                 exp_mul({256, 1}, DType::Float16),
                                 exp_mul({256, 1}, DType::BFloat16),
                                 exp_mul({256, 1}, DType::Float64),
                                 softmax(128, 1000),
                                 softmax(2, 1 << 20),
                                 row_sum(4096, 40),
                                 row_sum(2, 1 << 20, ReduceKind::Max),
                                 row_sum(3, 1 << 20, ReduceKind::Mean, DType::Float64),
                                 row_sum(8, 100, ReduceKind::Min, DType::Int64),
                                 row_sum(2, 1 << 20, ReduceKind::Sum, DType::Int32),
                                 column_sum(4096, 64),
                                 column_sum(4100, 33, ReduceKind::Max),
                                 column_softmax(4100, 16),
                                 max_per_element(5, 300),
                                 max_per_element(2, 1 << 20),
                                 max_per_element(4100, 16, /*columns=*/true)};
  const DType types[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                         DType::Int64,   DType::Int32,   DType::Int16,   DType::Int8,
                         DType::UInt8,   DType::Bool};
  for (DType from : types) {
    for (DType to : types) {
      Kernel k = make_kernel("k", {300}, 0, {from}, {to});
      KernelBuilder b(k);
      b.store(1, {1}, b.cast(b.load(0, {1}), to));
      kernels.push_back(k);
    }
  }
  for (DType t : types) {
    const bool floating = ir::is_floating(t);
    // Every unary and binary op the kernel IR defines on `t` (kernel::op_traits).
    std::vector<Op> ops;
    for (const kernel::OpTraits& traits : kernel::all_op_traits()) {
      const bool elementwise = traits.arity == 1 || traits.arity == 2;
      if (elementwise && traits.op != Op::Cast && traits.op != Op::Reduce &&
          kernel::defined_on(traits.op, t))
        ops.push_back(traits.op);
    }
    for (Op op : ops) {
      Kernel k =
          make_kernel("k", {7, 33}, 0, {t, t}, {kernel::is_comparison(op) ? DType::Bool : t});
      KernelBuilder b(k);
      const int x = b.load(0, {33, 1}), y = b.load(1, {0, 1});
      int r;
      if (kernel::op_arity(op) == 1) {
        r = b.unary(op, x, t);
      } else {
        r = b.binary(op, x, y, kernel::is_comparison(op) ? DType::Bool : t);
      }
      const int c = b.constant(floating ? 0.5 : 1, t);
      if (!kernel::is_comparison(op)) r = b.where(b.binary(Op::Gt, x, c, DType::Bool), r, c, t);
      b.store(2, {33, 1}, r);
      kernels.push_back(k);
    }
  }
  return kernels;
}

}  // namespace kiln::cuda_test::kernels
