// kiln::onednn_linear (runtime/onednn_linear.h) against ATen's linear in float64: 2-D and 3-D
// inputs, one row and odd sizes, with and without bias, each activation it applies, the out= form
// into any layout, empty inputs, and the errors.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "support/float64_close.h"

#ifdef KILN_WITH_ONEDNN
#include "runtime/onednn/matmul_primitive.h"
#include "runtime/onednn_linear.h"
#include "runtime/onednn_support.h"
#endif

namespace kiln {
namespace {

#ifdef KILN_WITH_ONEDNN

using testing::expect_close;

at::Tensor run(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b) {
  const int64_t rows = x.numel() / x.size(-1);
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = w.size(0);
  at::Tensor out = at::empty(sizes);
  return onednn_linear_out(x, w, onednn_linear_weight(w, rows, b.has_value()), b, "none", "fp32",
                           "fp32", out);
}

TEST(OneDnnLinear, MatchesAtenLinear) {
  at::manual_seed(0);
  for (const auto& [x_sizes, n] : std::vector<std::pair<std::vector<int64_t>, int64_t>>{
           {{1, 256}, 512}, {{7, 33}, 65}, {{2, 64, 192}, 576}, {{3, 5, 16}, 1}}) {
    const at::Tensor x = at::randn(x_sizes);
    const at::Tensor w = at::randn({n, x_sizes.back()}) / std::sqrt(double(x_sizes.back()));
    const at::Tensor b = at::randn({n});
    SCOPED_TRACE(::testing::Message() << x.sizes() << " x " << w.sizes());
    expect_close(run(x, w, b), at::linear(x.to(at::kDouble), w.to(at::kDouble), b.to(at::kDouble)));
    expect_close(run(x, w, std::nullopt), at::linear(x.to(at::kDouble), w.to(at::kDouble)));
  }
}

TEST(OneDnnLinear, AppliesItsActivationAsATenDoes) {
  at::manual_seed(2);
  using Reference = at::Tensor (*)(const at::Tensor&);
  const std::vector<std::pair<const char*, Reference>> activations = {
      {"relu", [](const at::Tensor& y) { return at::relu(y); }},
      {"gelu", [](const at::Tensor& y) { return at::gelu(y); }},
      {"gelu_tanh", [](const at::Tensor& y) { return at::gelu(y, "tanh"); }},
      {"silu", [](const at::Tensor& y) { return at::silu(y); }},
      {"sigmoid", [](const at::Tensor& y) { return at::sigmoid(y); }}};
  const at::Tensor x = at::randn({2, 37, 48}) * 2;  // outputs well on both sides of zero
  const at::Tensor w = at::randn({70, 48}) / std::sqrt(48.0);
  const at::Tensor b = at::randn({70});
  const at::Tensor product = at::linear(x.to(at::kDouble), w.to(at::kDouble), b.to(at::kDouble));
  for (const auto& [name, reference] : activations) {
    SCOPED_TRACE(name);
    at::Tensor out = at::empty({2, 37, 70});
    onednn_linear_out(x, w, onednn_linear_weight(w, 74, true, name), b, name, "fp32", "fp32", out);
    expect_close(out, reference(product));
    // An empty product (k = 0) runs no primitive: the output is the activation of the bias.
    at::Tensor of_bias = at::empty({0});
    onednn_linear_out(at::randn({3, 0}), at::randn({70, 0}), at::empty({0}), b, name, "fp32",
                      "fp32", of_bias);
    expect_close(of_bias, reference(b.to(at::kDouble).expand({3, 70})));
  }
  at::Tensor out = at::empty({0});
  EXPECT_THROW(
      onednn_linear_out(x, w, onednn_linear_weight(w, 74, true), b, "tanh", "fp32", "fp32", out),
      c10::Error);
}

// Unit-scale outputs, products of 48-256 terms: rounding x and w to bf16 (8 significant bits)
// moves each product by up to ~2^-8 of it, ~1e-3 of the output's norm over the sum; no more than
// 1e-2, and not below 1e-5, or the products were not taken in bf16.
TEST(OneDnnLinear, MultipliesInBf16WhenAsked) {
  if (!onednn_native_bf16())
    GTEST_SKIP() << "this CPU has no native bf16 (avx512_bf16 or AMX): oneDNN has no bf16 "
                    "primitives here, and precision=bf16 runs f32";
  at::manual_seed(3);
  for (const auto& [x_sizes, n] :
       std::vector<std::pair<std::vector<int64_t>, int64_t>>{{{1, 256}, 512}, {{2, 37, 48}, 70}}) {
    const at::Tensor x = at::randn(x_sizes);
    const at::Tensor w = at::randn({n, x_sizes.back()}) / std::sqrt(double(x_sizes.back()));
    const at::Tensor b = at::randn({n});
    const int64_t rows = x.numel() / x.size(-1);
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes.back() = n;
    at::Tensor out = at::empty(sizes);
    onednn_linear_out(x, w, onednn_linear_weight(w, rows, true, "gelu", "bf16"), b, "gelu", "bf16",
                      "fp32", out);
    const at::Tensor want =
        at::gelu(at::linear(x.to(at::kDouble), w.to(at::kDouble), b.to(at::kDouble)));
    const double error = ((out.to(at::kDouble) - want).norm() / want.norm()).item<double>();
    EXPECT_LT(error, 1e-2) << "at sizes " << x.sizes();
    EXPECT_GT(error, 1e-5) << "at sizes " << x.sizes();
    // The same products from bf16 copies of x and w, summed in float64: what bf16 alone changes.
    const at::Tensor rounded =
        at::gelu(at::linear(x.to(at::kBFloat16).to(at::kDouble),
                            w.to(at::kBFloat16).to(at::kDouble), b.to(at::kDouble)));
    expect_close(out, rounded);
  }
  at::Tensor out = at::empty({0});
  const at::Tensor w = at::randn({8, 4});
  EXPECT_THROW(onednn_linear_out(at::randn({2, 4}), w, onednn_linear_weight(w, 2, false),
                                 std::nullopt, "none", "fp16", "fp32", out),
               c10::Error);
}

// A bf16 input is read as it is and out_precision "bf16" rounds the float32 result once: the
// same values as rounding the float32 path's input and output.
TEST(OneDnnLinear, ReadsAndWritesBf16ActivationsWhenAsked) {
  if (!onednn_native_bf16())
    GTEST_SKIP() << "this CPU has no native bf16 (avx512_bf16 or AMX): oneDNN has no bf16 "
                    "primitives here, and precision=bf16 runs f32";
  at::manual_seed(4);
  const at::Tensor x = at::randn({3, 41, 64});
  const at::Tensor w = at::randn({96, 64}) / 8.0;
  const at::Tensor b = at::randn({96});
  const at::Tensor packed = onednn_linear_weight(w, 123, true, "gelu", "bf16");
  at::Tensor reference = at::empty({3, 41, 96});
  onednn_linear_out(x, w, packed, b, "gelu", "bf16", "fp32", reference);
  at::Tensor from_bf16 = at::empty({3, 41, 96});
  onednn_linear_out(x.to(at::kBFloat16), w, packed, b, "gelu", "bf16", "fp32", from_bf16);
  EXPECT_TRUE(at::equal(from_bf16, reference));
  at::Tensor to_bf16 = at::empty({0}, at::kBFloat16);
  onednn_linear_out(x.to(at::kBFloat16), w, packed, b, "gelu", "bf16", "bf16", to_bf16);
  EXPECT_EQ(to_bf16.sizes(), reference.sizes());
  EXPECT_TRUE(at::equal(to_bf16, reference.to(at::kBFloat16)));
  // The weight packed for a float32 output is the one a bf16 output reads: no packing per call.
  onednn::MatmulSpec spec;
  spec.rows = 123, spec.k = 64, spec.n = 96, spec.bias = true, spec.bf16 = true;
  spec.activation = onednn::Activation::Gelu;
  spec.threads = at::get_num_threads();
  const uint64_t layout = onednn::MatmulPrimitive::get(spec)->packed_weight_layout();
  spec.bf16_output = true;
  EXPECT_EQ(onednn::MatmulPrimitive::get(spec)->packed_weight_layout(), layout);
  // bf16 tensors are a bf16 linear's only.
  const at::Tensor f32_packed = onednn_linear_weight(w, 123, true);
  EXPECT_THROW(
      onednn_linear_out(x.to(at::kBFloat16), w, f32_packed, b, "none", "fp32", "fp32", reference),
      c10::Error);
  EXPECT_THROW(onednn_linear_out(x, w, f32_packed, b, "none", "fp32", "bf16", to_bf16), c10::Error);
  EXPECT_THROW(onednn_linear_out(x, w, packed, b, "gelu", "bf16", "bf16", reference), c10::Error);
}

TEST(OneDnnLinear, TakesAnyInputLayoutAndWritesAnyOutLayout) {
  at::manual_seed(1);
  const at::Tensor x = at::randn({24, 40}).t();  // [40, 24], not contiguous
  const at::Tensor w = at::randn({16, 24}) / 5.0;
  at::Tensor out = at::full({16, 40}, std::nan("")).t();  // [40, 16], not contiguous, poisoned
  onednn_linear_out(x, w, onednn_linear_weight(w, 40, false), std::nullopt, "none", "fp32", "fp32",
                    out);
  expect_close(out, at::linear(x.to(at::kDouble), w.to(at::kDouble)));
}

TEST(OneDnnLinear, NoRowsGiveAnEmptyOutput) {
  const at::Tensor w = at::randn({8, 4});
  at::Tensor out = at::empty({0});
  onednn_linear_out(at::randn({0, 4}), w, onednn_linear_weight(w, 1, true), at::ones({8}), "none",
                    "fp32", "fp32", out);
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{0, 8}));
}

TEST(OneDnnLinear, BadArgumentsAreClearErrors) {
  const at::Tensor w = at::randn({8, 4});
  const at::Tensor packed = onednn_linear_weight(w, 2, false);
  at::Tensor out = at::empty({0});
  EXPECT_THROW(
      onednn_linear_out(at::randn({2, 5}), w, packed, std::nullopt, "none", "fp32", "fp32", out),
      c10::Error);
  EXPECT_THROW(onednn_linear_out(at::randn({2, 4}).to(at::kDouble), w, packed, std::nullopt, "none",
                                 "fp32", "fp32", out),
               c10::Error);
  EXPECT_THROW(onednn_linear_out(at::randn({2, 4}), w, at::zeros({3}), std::nullopt, "none", "fp32",
                                 "fp32", out),
               c10::Error);
  EXPECT_THROW(
      onednn_linear_out(at::randn({2, 4}), w, packed, at::ones({7}), "none", "fp32", "fp32", out),
      c10::Error);
}

#else

TEST(OneDnnLinear, NotBuilt) {
  GTEST_SKIP() << "built without kiln's oneDNN (KILN_WITH_ONEDNN)";
}

#endif

}  // namespace
}  // namespace kiln
