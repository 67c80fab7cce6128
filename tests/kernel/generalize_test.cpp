// One size-generic kernel from a group lowered at several bindings (passes/kernel/generalize.h):
// the fitted terms, the kernels it refuses, and that the generic kernel bound at a binding the
// fit never saw is the kernel the lowering makes there.
#include "passes/kernel/generalize.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "passes/kernel/printer.h"
#include "passes/kernel/size_terms.h"
#include "tests/kernel/lower_support.h"
#include "tests/support/kernel_maker.h"

namespace kiln::kernel {
namespace {

using lower_test::lower;
using Binding = std::vector<int64_t>;

std::optional<SizeTerm> fit(std::vector<int64_t> values, const Bindings& bindings) {
  return fit_term(values, bindings);
}

TEST(Generalize, FitTermFindsTheMonomial) {
  const Bindings two = {{8, 64}, {9, 64}, {8, 65}};
  EXPECT_EQ(fit({512, 576, 520}, two), (SizeTerm{1, {0, 1}}));
  EXPECT_EQ(fit({64, 64, 65}, two), (SizeTerm{1, {1}}));
  EXPECT_EQ(fit({768, 768, 780}, two), (SizeTerm{12, {1}}));
  EXPECT_EQ(fit({-8, -9, -8}, two), (SizeTerm{-1, {0}}));
  EXPECT_EQ(fit({7, 7, 7}, two), (SizeTerm{7, {}}));
  EXPECT_EQ(fit({0, 0, 0}, two), (SizeTerm{0, {}}));
  const Bindings one = {{8}, {9}};
  EXPECT_EQ(fit({4 * 64, 4 * 81}, one), (SizeTerm{4, {0, 0}}));  // an [s, s] score's rows
  // One input plus a constant (a KV cache's length plus one, times 64), not a monomial.
  EXPECT_EQ(fit({9, 10}, one), (SizeTerm{1, {0}, 1}));
  EXPECT_EQ(fit({9 * 64, 10 * 64, 9 * 64}, two), (SizeTerm{64, {0}, 64}));
  EXPECT_EQ(fit_monomial(std::vector<int64_t>{9, 10}, one), std::nullopt);
  // A value that moved with no input is a constant; a sum of two inputs, a fraction: no term.
  EXPECT_EQ(fit({64, 64, 64}, {{8, 64}, {9, 64}, {8, 64 + 1}}), (SizeTerm{64, {}}));
  EXPECT_EQ(fit({8 + 64, 9 + 64, 8 + 65}, two), std::nullopt);
  EXPECT_EQ(fit({3, 4}, {{6}, {8}}), std::nullopt);  // s / 2
}

TEST(Generalize, FitTermFindsProductsOfShiftedInputs) {
  // An image's area past an unpadded stride-2 pool, sides in steps of 2 (s - 1 each), 8
  // channels: 8 * (s0 - 1) * (s1 - 1).
  const Bindings sides = {{12, 12}, {13, 12}, {12, 13}};
  EXPECT_EQ(fit({8 * 11 * 11, 8 * 12 * 11, 8 * 11 * 12}, sides),
            (SizeTerm{8, {0, 1}, 0, {{1, -1}, {1, -1}}}));
  // A ResNet's side of 32 * s + 1 after its stem and pool, both sides one symbol: 64 (8s + 1)^2.
  // Two points along one input fit an affine term as well; the check binding chooses.
  const std::vector<int64_t> area = {64 * 57 * 57, 64 * 65 * 65, 64 * 73 * 73};
  EXPECT_EQ(fit({area[0], area[1]}, {{7}, {8}}), (SizeTerm{62464, {0}, -229312}));
  EXPECT_EQ(fit(area, with_check({{7}, {8}}, std::vector<int64_t>{9})),
            (SizeTerm{64, {0, 0}, 0, {{8, 1}, {8, 1}}}));
  // Scales that are no power of two up to 64 (3s + 1, 128s + 1), and sums, fit nothing.
  const Bindings two = {{5, 8}, {6, 8}, {5, 9}};
  EXPECT_EQ(fit({16 * 8, 19 * 8, 16 * 9}, two), std::nullopt);
  EXPECT_EQ(fit({641 * 8, 769 * 8, 641 * 9}, two), std::nullopt);
  EXPECT_EQ(fit({8 * 64 + 7, 9 * 64 + 7, 8 * 65 + 7}, {{8, 64}, {9, 64}, {8, 65}}), std::nullopt);
  // What fits two points but not the check is no term: s^2 - s + 1 at 4, 5 and 6.
  EXPECT_EQ(fit({13, 21}, {{4}, {5}}), (SizeTerm{8, {0}, -19}));
  EXPECT_EQ(fit({13, 21, 31}, with_check({{4}, {5}}, std::vector<int64_t>{6})), std::nullopt);
}

std::string layer_norm_gelu(int64_t batch, int64_t tokens) {
  const std::string shape = "f32[" + std::to_string(batch) + "," + std::to_string(tokens) + ",32]";
  return "graph(%x : " + shape +
         ", %w : f32[32], %b : f32[32]):\n"
         "  %y : " +
         shape +
         " = aten::layer_norm(%x, %w, %b) {normalized_shape=[32], "
         "eps=1e-05, cudnn_enable=true}\n"
         "  %g : " +
         shape +
         " = aten::gelu(%y) {approximate=\"none\"}\n"
         "  return (%g)\n";
}

/// Lowers `graph(binding)` at the base binding and once per input moved, generalizes, and checks
/// the generic kernel against the lowering at `elsewhere`, printed and run.
Kernel check_generalizes(const std::function<std::string(const Binding&)>& graph,
                         const Bindings& bindings, const std::vector<Binding>& elsewhere) {
  std::vector<Kernel> kernels;
  for (const Binding& b : bindings)
    kernels.push_back(lower(graph(b)));
  const Generalized g = generalize(kernels, bindings);
  EXPECT_TRUE(g.kernel) << g.why_not;
  if (!g.kernel) return {};
  EXPECT_TRUE(is_size_generic(*g.kernel));
  for (const Binding& b : elsewhere) {
    const Kernel want = lower(graph(b));
    const Kernel bound = bind_sizes(*g.kernel, b);
    EXPECT_TRUE(same_computation(without_terms(bound), want)) << print_kernel(bound) << "\nwant\n"
                                                              << print_kernel(want);
  }
  return *g.kernel;
}

TEST(Generalize, ALoweredLayerNormTakesItsBatchAndTokensAsSizeInputs) {
  const Kernel k = check_generalizes([](const Binding& b) { return layer_norm_gelu(b[0], b[1]); },
                                     {{2, 8}, {3, 8}, {2, 9}}, {{5, 13}, {2, 2}, {7, 300}});
  // Rows of 32, s0 * s1 of them; x's and the output's strides s1*32 and 32.
  EXPECT_NE(print_kernel(k).find("kernel g [s0, s1, 32] reduce 1"), std::string::npos)
      << print_kernel(k);
  EXPECT_NE(print_kernel(k).find("load b0[32*s1, 32, 1]"), std::string::npos) << print_kernel(k);
}

TEST(Generalize, AttentionScoresOverTokensByTokens) {
  auto softmax = [](const Binding& b) {
    const std::string s = std::to_string(b[0]);
    const std::string shape = "f32[2,4," + s + "," + s + "]";
    return "graph(%x : " + shape + "):\n  %p : " + shape +
           " = aten::softmax.int(%x) {dim=-1, dtype=None}\n  return (%p)\n";
  };
  const Kernel k = check_generalizes(softmax, {{5}, {7}}, {{2}, {16}, {33}});
  EXPECT_NE(print_kernel(k).find("load b0[4*s0*s0, s0*s0, s0, 1]"), std::string::npos)
      << print_kernel(k);
}

TEST(Generalize, KernelsThatDifferInStructureOrInASumHaveNoGenericForm) {
  using testing::make_kernel;
  auto copy = [](int64_t n, int64_t offset, Op op) {
    Kernel k = make_kernel("copy", {n}, 0, {DType::Float32}, {DType::Float32});
    KernelBuilder b(k);
    b.store(1, {1}, b.unary(op, b.load(0, {1}, offset), DType::Float32));
    return k;
  };
  const Bindings one = {{8}, {9}};
  Generalized g = generalize({copy(8, 0, Op::Neg), copy(9, 0, Op::Abs)}, one);
  EXPECT_FALSE(g.kernel);
  EXPECT_NE(g.why_not.find("differ in more than their sizes"), std::string::npos) << g.why_not;
  // x[1 + s:] of a buffer: an offset of s + 1.
  g = generalize({copy(8, 9, Op::Neg), copy(9, 10, Op::Neg)}, one);
  ASSERT_TRUE(g.kernel) << g.why_not;
  EXPECT_EQ(g.kernel->exprs[0].map.offset_term, (SizeTerm{1, {0}, 1}));
  // Two inputs whose sum an offset is: no term.
  auto copy2 = [&](int64_t a, int64_t b) {
    Kernel k = copy(a * b, a + b, Op::Neg);
    k.sizes = {a, b};
    k.exprs[0].map.strides = {b, 1};
    k.stores[0].map.strides = {b, 1};
    return k;
  };
  g = generalize({copy2(8, 5), copy2(9, 5), copy2(8, 6)}, {{8, 5}, {9, 5}, {8, 6}});
  EXPECT_FALSE(g.kernel);
  EXPECT_NE(g.why_not.find("access 0's offset takes 13, 14, 14"), std::string::npos) << g.why_not;
  // The same kernel at both: nothing moved, a kernel of constant sizes.
  g = generalize({copy(8, 0, Op::Neg), copy(8, 0, Op::Neg)}, one);
  ASSERT_TRUE(g.kernel);
  EXPECT_FALSE(is_size_generic(*g.kernel));
  EXPECT_TRUE(g.kernel->size_inputs.empty());
}

TEST(Generalize, AnUnbiasedVarianceReadsItsCountAtRunTime) {
  // var(x, correction=c) over rows of s multiplies by s / (s - c): the lowering writes it as
  // operations on the count, so the count follows its size term and the kernel is generic.
  for (const char* correction : {"1", "0", "2"}) {
    auto var = [correction](const Binding& b) {
      const std::string s = std::to_string(b[0]);
      return "graph(%x : f32[3," + s +
             "]):\n"
             "  %v : f32[3] = aten::var.correction(%x) {dim=[1], correction=" +
             correction + ", keepdim=false}\n  return (%v)\n";
    };
    check_generalizes(var, {{8}, {9}}, {{2}, {3}, {100}});
  }
}

TEST(Generalize, AnIntegralConstantThatMovesFollowsItsTerm) {
  // out = x + n over [n]: a position or a length used as a value (a KV cache's length).
  auto shifted = [](int64_t n) {
    Kernel k = testing::make_kernel("shift", {n}, 0, {DType::Float32}, {DType::Float32});
    KernelBuilder b(k);
    const int c = b.constant(static_cast<double>(n + 1), DType::Float32);
    b.store(1, {1}, b.binary(Op::Add, b.load(0, {1}), c, DType::Float32));
    return k;
  };
  const Generalized g = generalize({shifted(8), shifted(9)}, {{8}, {9}});
  ASSERT_TRUE(g.kernel) << g.why_not;
  EXPECT_EQ(g.kernel->exprs[0].constant_term, (SizeTerm{1, {0}, 1}));
  EXPECT_NE(print_kernel(*g.kernel).find("const s0+1"), std::string::npos)
      << print_kernel(*g.kernel);
  EXPECT_TRUE(same_computation(without_terms(bind_sizes(*g.kernel, Binding{20})), shifted(20)));
}

TEST(Generalize, BindingsMustMoveEachInputAlone) {
  const Kernel k = lower(layer_norm_gelu(2, 8));
  EXPECT_THROW(generalize({k, k}, {{2, 8}, {3, 9}}), std::invalid_argument);  // 2 inputs
  EXPECT_THROW(generalize({k, k, k}, {{2, 8}, {3, 9}, {2, 9}}), std::invalid_argument);
  EXPECT_THROW(generalize({k, k, k}, {{2, 8}, {1, 8}, {2, 9}}), std::invalid_argument);
  EXPECT_THROW(generalize({k, k}, {{2, 8}, {3, 8}, {2, 9}}), std::invalid_argument);
  // A check binding may follow; its values are sizes too (at least 2).
  EXPECT_THROW(generalize({k, k, k, k}, {{2, 8}, {3, 8}, {2, 9}, {1, 10}}), std::invalid_argument);
  EXPECT_TRUE(generalize({k, k, k, k}, {{2, 8}, {3, 8}, {2, 9}, {4, 10}}).kernel);
}

}  // namespace
}  // namespace kiln::kernel
