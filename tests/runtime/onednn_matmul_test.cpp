// kiln::onednn_matmul (runtime/onednn_matmul.h) against ATen in float64: the product of operands
// in every layout it reads as they lie (row-major, transposed) and one it copies (a strided
// slice), a linear layer's transposed weight with its bias and activation, 3-D inputs, empty
// products, and the errors.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "support/float64_close.h"

#ifdef KILN_WITH_ONEDNN
#include "runtime/onednn/matmul_primitive.h"
#include "runtime/onednn_matmul.h"
#endif

namespace kiln {
namespace {

#ifdef KILN_WITH_ONEDNN

using testing::expect_close;

at::Tensor matmul(const at::Tensor& a, const at::Tensor& b, bool b_transposed,
                  const std::optional<at::Tensor>& bias = std::nullopt,
                  const char* activation = "none") {
  std::vector<int64_t> sizes = a.sizes().vec();
  sizes.back() = b.size(b_transposed ? 0 : 1);
  at::Tensor out = at::empty(sizes);
  return onednn_matmul_out(a, b, bias, b_transposed, activation, out);
}

at::Tensor f64(const at::Tensor& t) {
  return t.to(at::kDouble);
}

TEST(OneDnnMatmul, ReadsRowMajorAndTransposedOperandsAndCopiesOthers) {
  at::manual_seed(0);
  for (const auto& [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {8, 256, 128}, {1, 33, 65}, {37, 5, 1}, {64, 64, 64}}) {
    SCOPED_TRACE(::testing::Message() << m << "x" << k << "x" << n);
    const at::Tensor a = at::randn({m, k});
    const at::Tensor b = at::randn({k, n}) / std::sqrt(double(k));
    const at::Tensor want = at::mm(f64(a), f64(b));
    expect_close(matmul(a, b, false), want);
    // Transposed: a's transpose and b's transpose row-major, read where they lie.
    expect_close(matmul(a.t().contiguous().t(), b.t().contiguous().t(), false), want);
    // b given as a linear layer's weight, [n, k].
    expect_close(matmul(a, b.t().contiguous(), true), want);
    // Neither layout: every other column of a wider matrix, copied first.
    const at::Tensor wide = at::randn({k, 2 * n}) / std::sqrt(double(k));
    const at::Tensor strided = wide.slice(1, 0, 2 * n, 2);
    expect_close(matmul(a, strided, false), at::mm(f64(a), f64(strided)));
  }
}

TEST(OneDnnMatmul, AsALinearLayerWithBiasActivationAndA3DInput) {
  at::manual_seed(1);
  const at::Tensor x = at::randn({2, 19, 48}) * 2;
  const at::Tensor w = at::randn({70, 48}) / std::sqrt(48.0);
  const at::Tensor b = at::randn({70});
  const at::Tensor product = at::linear(f64(x), f64(w), f64(b));
  expect_close(matmul(x, w, true, b), product);
  expect_close(matmul(x, w, true, b, "relu"), at::relu(product));
  expect_close(matmul(x, w, true, b, "gelu"), at::gelu(product));
  expect_close(matmul(x, w, true, std::nullopt, "sigmoid"),
               at::sigmoid(at::linear(f64(x), f64(w))));
}

TEST(OneDnnMatmul, EmptyProductsGiveTheBiasOrNothing) {
  const at::Tensor b = at::randn({6});
  // k = 0: no terms, the bias (through the activation).
  expect_close(matmul(at::randn({3, 0}), at::randn({6, 0}), true, b, "relu"),
               at::relu(f64(b)).expand({3, 6}));
  expect_close(matmul(at::randn({3, 0}), at::randn({0, 6}), false), at::zeros({3, 6}, at::kDouble));
  EXPECT_EQ(matmul(at::randn({0, 4}), at::randn({4, 6}), false).sizes(), at::IntArrayRef({0, 6}));
}

// A frozen weight is packed in oneDNN's blocked layout where this CPU has one for the product, and
// never k-major ([k, n] row-major), the unblocked layout oneDNN's jit gemm picks by itself and
// reads up to 2.7x slower than a linear layer's own [n, k] (AVX2, 128 x 768 x 3072).
TEST(OneDnnMatmul, AFrozenWeightIsNeverPackedKMajor) {
  for (const auto& [rows, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {128, 768, 3072}, {128, 3072, 768}, {8, 256, 256}, {196, 384, 1536}}) {
    onednn::MatmulSpec spec;
    spec.rows = rows;
    spec.k = k;
    spec.n = n;
    spec.bias = true;
    spec.threads = 2;
    const auto packed = onednn::MatmulPrimitive::get(spec);
    spec.weights = onednn::OperandLayout::RowMajor;
    const auto k_major = onednn::MatmulPrimitive::get(spec);
    EXPECT_NE(packed->packed_weight_layout(), k_major->packed_weight_layout())
        << rows << "x" << k << "x" << n << ": " << packed->implementation();
  }
}

TEST(OneDnnMatmul, BadArgumentsAreClearErrors) {
  at::Tensor out = at::empty({2, 3});
  EXPECT_THROW(
      onednn_matmul_out(at::randn({2, 4}), at::randn({5, 3}), std::nullopt, false, "none", out),
      c10::Error);  // k does not match
  EXPECT_THROW(onednn_matmul_out(at::randn({2, 4}).to(at::kDouble), at::randn({4, 3}), std::nullopt,
                                 false, "none", out),
               c10::Error);  // float64
  EXPECT_THROW(
      onednn_matmul_out(at::randn({2, 4}), at::randn({4, 3}), at::randn({4}), false, "none", out),
      c10::Error);  // bias of the wrong length
  EXPECT_THROW(
      onednn_matmul_out(at::randn({2, 4}), at::randn({4, 3}), std::nullopt, false, "tanh", out),
      c10::Error);  // no such activation
}

#endif  // KILN_WITH_ONEDNN

}  // namespace
}  // namespace kiln
