#include <string>

#include <gtest/gtest.h>

#include "passes/canonicalize.h"
#include "passes/eliminate_dead_code.h"
#include "passes/ir/parser.h"
#include "passes/ir/printer.h"

namespace kiln {
namespace {

// Canonicalizes, then removes what the rewrites left unused, and prints.
std::string canonical(const std::string& text, int expected_rewrites) {
  auto g = ir::parse_graph(text);
  EXPECT_EQ(canonicalize(*g), expected_rewrites);
  eliminate_dead_code(*g);
  return ir::print_graph(*g);
}

// PyTorch's attention with a float mask, decomposed: the rows the mask takes out entirely are
// those whose maximum is -inf.
TEST(CanonicalizeTest, RowsOfMinusInfinityAreFoundByTheirMaximum) {
  EXPECT_EQ(canonical("graph(%s : f32[2,4,4]):\n"
                      "  %e : b8[2,4,4] = aten::eq.Scalar(%s) {other=-inf}\n"
                      "  %n : b8[2,4,4] = aten::logical_not(%e)\n"
                      "  %a : b8[2,4,1] = aten::any.dim(%n) {dim=-1, keepdim=true}\n"
                      "  %m : b8[2,4,1] = aten::logical_not(%a)\n"
                      "  return (%m)\n",
                      3),
            "graph(%s : f32[2,4,4]):\n"
            "  %6 : f32[2,4,1] = aten::amax(%s) {dim=[2], keepdim=true}\n"
            "  %m : b8[2,4,1] = aten::eq.Scalar(%6) {other=-inf}\n"
            "  return (%m)\n");
}

TEST(CanonicalizeTest, AnyOfOtherComparisonsStays) {
  const std::string text =
      "graph(%s : f32[2,4,4], %i : i64[2,4,4], %z : f32[2,0]):\n"
      "  %e : b8[2,4,4] = aten::ne.Scalar(%s) {other=0}\n"
      "  %a : b8[2,4] = aten::any.dim(%e) {dim=-1, keepdim=false}\n"
      "  %f : b8[2,4,4] = aten::ne.Scalar(%i) {other=-inf}\n"
      "  %b : b8[2,4] = aten::any.dim(%f) {dim=-1, keepdim=false}\n"
      "  %g : b8[2,0] = aten::ne.Scalar(%z) {other=-inf}\n"
      "  %c : b8[2] = aten::any.dim(%g) {dim=1, keepdim=false}\n"
      "  return (%a, %b, %c)\n";
  EXPECT_EQ(canonical(text, 0), text);
}

TEST(CanonicalizeTest, AddmmOfATransposedWeightIsLinear) {
  EXPECT_EQ(canonical("graph(%x : f32[2,8], %w : f32[4,8], %b : f32[4]):\n"
                      "  %t : f32[8,4]{1,8} = aten::t(%w)\n"
                      "  %y : f32[2,4] = aten::addmm(%b, %x, %t) {beta=1, alpha=1}\n"
                      "  return (%y)\n",
                      1),
            "graph(%x : f32[2,8], %w : f32[4,8], %b : f32[4]):\n"
            "  %y : f32[2,4] = aten::linear(%x, %w, %b)\n"
            "  return (%y)\n");
}

TEST(CanonicalizeTest, MmOfAPermutedWeightIsLinearWithoutBias) {
  EXPECT_EQ(canonical("graph(%x : f32[2,8], %w : f32[4,8]):\n"
                      "  %t : f32[8,4]{1,8} = aten::permute(%w) {dims=[1,0]}\n"
                      "  %y : f32[2,4] = aten::mm(%x, %t)\n"
                      "  return (%y)\n",
                      1),
            "graph(%x : f32[2,8], %w : f32[4,8]):\n"
            "  %y : f32[2,4] = aten::linear(%x, %w) {bias=None}\n"
            "  return (%y)\n");
}

TEST(CanonicalizeTest, MatmulOfATransposedWeightIsLinearAndItsBiasAddStays) {
  EXPECT_EQ(canonical("graph(%x : f32[3,2,8], %w : f32[4,8], %b : f32[4]):\n"
                      "  %t : f32[8,4]{1,8} = aten::t(%w)\n"
                      "  %y : f32[3,2,4] = aten::matmul(%x, %t)\n"
                      "  %z : f32[3,2,4] = aten::add.Tensor(%y, %b) {alpha=1}\n"
                      "  return (%z)\n",
                      1),
            "graph(%x : f32[3,2,8], %w : f32[4,8], %b : f32[4]):\n"
            "  %y : f32[3,2,4] = aten::linear(%x, %w) {bias=None}\n"
            "  %z : f32[3,2,4] = aten::add.Tensor(%y, %b) {alpha=1}\n"
            "  return (%z)\n");
}

TEST(CanonicalizeTest, MatmulOfAFrozenTransposedWeightIsLinear) {
  // Freezing folded w.t() into a constant; its transpose is the contiguous weight.
  EXPECT_EQ(canonical("graph(%x : f32[2,8]):\n"
                      "  %c : f32[8,4]{1,8} = prim::Constant() {index=0}\n"
                      "  %y : f32[2,4] = aten::matmul(%x, %c)\n"
                      "  return (%y)\n",
                      1),
            "graph(%x : f32[2,8]):\n"
            "  %c : f32[8,4]{1,8} = prim::Constant() {index=0}\n"
            "  %c_t : f32[4,8] = aten::t(%c)\n"
            "  %y : f32[2,4] = aten::linear(%x, %c_t) {bias=None}\n"
            "  return (%y)\n");
}

TEST(CanonicalizeTest, AddmmOfAFrozenInOutWeightIsLinearOfItsTranspose) {
  // GPT-2's Conv1D: addmm(b, x, w) with w stored [in, out]; linear takes its transpose.
  EXPECT_EQ(canonical("graph(%x : f32[2,8], %b : f32[4]):\n"
                      "  %c : f32[8,4] = prim::Constant() {index=0}\n"
                      "  %y : f32[2,4] = aten::addmm(%b, %x, %c) {beta=1, alpha=1}\n"
                      "  return (%y)\n",
                      1),
            "graph(%x : f32[2,8], %b : f32[4]):\n"
            "  %c : f32[8,4] = prim::Constant() {index=0}\n"
            "  %c_t : f32[4,8]{1,4} = aten::t(%c)\n"
            "  %y : f32[2,4] = aten::linear(%x, %c_t, %b)\n"
            "  return (%y)\n");
}

TEST(CanonicalizeTest, ALinearOnFlattenedRowsTakesTheRowsShape) {
  // A traced Conv1D: the rows flattened, addmm, the result viewed back. One linear over the
  // unflattened input computes the same addmm, and its GELU now follows it directly.
  EXPECT_EQ(canonical("graph(%x : f32[1,3,8], %b : f32[4]):\n"
                      "  %c : f32[8,4] = prim::Constant() {index=0}\n"
                      "  %r : f32[3,8] = aten::view(%x) {size=[-1,8]}\n"
                      "  %m : f32[3,4] = aten::addmm(%b, %r, %c) {beta=1, alpha=1}\n"
                      "  %y : f32[1,3,4] = aten::view(%m) {size=[1,3,4]}\n"
                      "  %g : f32[1,3,4] = aten::gelu(%y) {approximate=\"tanh\"}\n"
                      "  return (%g)\n",
                      2),
            "graph(%x : f32[1,3,8], %b : f32[4]):\n"
            "  %c : f32[8,4] = prim::Constant() {index=0}\n"
            "  %c_t : f32[4,8]{1,4} = aten::t(%c)\n"
            "  %y : f32[1,3,4] = aten::linear(%x, %c_t, %b)\n"
            "  %g : f32[1,3,4] = aten::gelu(%y) {approximate=\"tanh\"}\n"
            "  return (%g)\n");
}

TEST(CanonicalizeTest, ALinearOnRowsReadElsewhereOrOtherwiseShapedStays) {
  // The 2-D product is read beside the view; the rows come from a transposed input; the view
  // does not restore the input's leading sizes.
  for (const std::string& text : {
           std::string("graph(%x : f32[2,3,8], %w : f32[4,8]):\n"
                       "  %r : f32[6,8] = aten::view(%x) {size=[-1,8]}\n"
                       "  %m : f32[6,4] = aten::linear(%r, %w) {bias=None}\n"
                       "  %y : f32[2,3,4] = aten::view(%m) {size=[2,3,4]}\n"
                       "  return (%y, %m)\n"),
           std::string("graph(%x : f32[3,2,8]{8,24,1}, %w : f32[4,8]):\n"
                       "  %r : f32[6,8] = aten::reshape(%x) {shape=[-1,8]}\n"
                       "  %m : f32[6,4] = aten::linear(%r, %w) {bias=None}\n"
                       "  %y : f32[3,2,4] = aten::view(%m) {size=[3,2,4]}\n"
                       "  return (%y)\n"),
           std::string("graph(%x : f32[2,3,8], %w : f32[4,8]):\n"
                       "  %r : f32[6,8] = aten::view(%x) {size=[-1,8]}\n"
                       "  %m : f32[6,4] = aten::linear(%r, %w) {bias=None}\n"
                       "  %y : f32[3,2,4] = aten::view(%m) {size=[3,2,4]}\n"
                       "  return (%y)\n"),
       }) {
    EXPECT_EQ(canonical(text, 0), text);
  }
}

TEST(CanonicalizeTest, MatmulOfAPlainWeightInputStaysMatmul) {
  const std::string text =
      "graph(%x : f32[2,8], %w : f32[8,4]):\n"
      "  %y : f32[2,4] = aten::matmul(%x, %w)\n"
      "  return (%y)\n";
  EXPECT_EQ(canonical(text, 0), text);
}

TEST(CanonicalizeTest, ScaledAddmmStaysAddmm) {
  const std::string text =
      "graph(%x : f32[2,8], %w : f32[4,8], %b : f32[4]):\n"
      "  %t : f32[8,4]{1,8} = aten::t(%w)\n"
      "  %y : f32[2,4] = aten::addmm(%b, %x, %t) {beta=1, alpha=2}\n"
      "  return (%y)\n";
  EXPECT_EQ(canonical(text, 0), text);
}

TEST(CanonicalizeTest, SubWithAlphaIsAddWithNegatedAlpha) {
  EXPECT_EQ(canonical("graph(%a : i64[4], %b : i64[4]):\n"
                      "  %y : i64[4] = aten::sub.Tensor(%a, %b) {alpha=3}\n"
                      "  return (%y)\n",
                      1),
            "graph(%a : i64[4], %b : i64[4]):\n"
            "  %y : i64[4] = aten::add.Tensor(%a, %b) {alpha=-3}\n"
            "  return (%y)\n");
}

TEST(CanonicalizeTest, DivisionByAPowerOfTwoIsAMultiplication) {
  EXPECT_EQ(canonical("graph(%a : f32[4]):\n"
                      "  %y : f32[4] = aten::div.Scalar(%a) {other=4}\n"
                      "  return (%y)\n",
                      1),
            "graph(%a : f32[4]):\n"
            "  %y : f32[4] = aten::mul.Scalar(%a) {other=0.25}\n"
            "  return (%y)\n");
}

TEST(CanonicalizeTest, DivisionByThreeStays) {
  const std::string text =
      "graph(%a : f32[4]):\n"
      "  %y : f32[4] = aten::div.Scalar(%a) {other=3}\n"
      "  return (%y)\n";
  EXPECT_EQ(canonical(text, 0), text);
}

TEST(CanonicalizeTest, AdaptiveAveragePoolingToOneValueIsAMean) {
  EXPECT_EQ(canonical("graph(%x : f32[2,8,7,7]):\n"
                      "  %y : f32[2,8,1,1] = aten::adaptive_avg_pool2d(%x) {output_size=[1,1]}\n"
                      "  return (%y)\n",
                      1),
            "graph(%x : f32[2,8,7,7]):\n"
            "  %y : f32[2,8,1,1] = aten::mean.dim(%x) {dim=[-1,-2], keepdim=true, dtype=None}\n"
            "  return (%y)\n");
}

TEST(CanonicalizeTest, AdaptiveAveragePooling3dToOneValueIsAMean) {
  EXPECT_EQ(canonical("graph(%x : f32[2,8,4,7,7]):\n"
                      "  %y : f32[2,8,1,1,1] = aten::adaptive_avg_pool3d(%x) "
                      "{output_size=[1,1,1]}\n"
                      "  return (%y)\n",
                      1),
            "graph(%x : f32[2,8,4,7,7]):\n"
            "  %y : f32[2,8,1,1,1] = aten::mean.dim(%x) {dim=[-1,-2,-3], keepdim=true, "
            "dtype=None}\n"
            "  return (%y)\n");
  const std::string to_more =
      "graph(%x : f32[2,8,4,7,7]):\n"
      "  %y : f32[2,8,2,1,1] = aten::adaptive_avg_pool3d(%x) {output_size=[2,1,1]}\n"
      "  return (%y)\n";
  EXPECT_EQ(canonical(to_more, 0), to_more);
}

TEST(CanonicalizeTest, AdaptiveAveragePoolingToMoreValuesStays) {
  const std::string text =
      "graph(%x : f32[2,8,7,7]):\n"
      "  %y : f32[2,8,7,1] = aten::adaptive_avg_pool2d(%x) {output_size=[7,1]}\n"
      "  return (%y)\n";
  EXPECT_EQ(canonical(text, 0), text);
}

TEST(CanonicalizeTest, DoubleTransposeIsTheInput) {
  EXPECT_EQ(canonical("graph(%x : f32[2,3]):\n"
                      "  %a : f32[3,2]{1,3} = aten::transpose.int(%x) {dim0=0, dim1=1}\n"
                      "  %b : f32[2,3] = aten::transpose.int(%a) {dim0=1, dim1=0}\n"
                      "  %y : f32[2,3] = aten::exp(%b)\n"
                      "  return (%y)\n",
                      1),
            "graph(%x : f32[2,3]):\n"
            "  %y : f32[2,3] = aten::exp(%x)\n"
            "  return (%y)\n");
}

TEST(CanonicalizeTest, PermuteOfPermuteIsOnePermute) {
  EXPECT_EQ(canonical("graph(%x : f32[2,3,4]):\n"
                      "  %a : f32[3,4,2]{4,1,12} = aten::permute(%x) {dims=[1,2,0]}\n"
                      "  %b : f32[4,3,2]{1,4,12} = aten::permute(%a) {dims=[1,0,2]}\n"
                      "  %y : f32[4,3,2] = aten::exp(%b)\n"
                      "  return (%y)\n",
                      1),
            "graph(%x : f32[2,3,4]):\n"
            "  %b : f32[4,3,2]{1,4,12} = aten::permute(%x) {dims=[2,1,0]}\n"
            "  %y : f32[4,3,2] = aten::exp(%b)\n"
            "  return (%y)\n");
}

TEST(CanonicalizeTest, ViewOfAViewIsOneView) {
  EXPECT_EQ(canonical("graph(%x : f32[2,6]):\n"
                      "  %a : f32[12] = aten::view(%x) {size=[12]}\n"
                      "  %b : f32[3,4] = aten::view(%a) {size=[3,4]}\n"
                      "  %y : f32[3,4] = aten::exp(%b)\n"
                      "  return (%y)\n",
                      1),
            "graph(%x : f32[2,6]):\n"
            "  %b : f32[3,4] = aten::view(%x) {size=[3,4]}\n"
            "  %y : f32[3,4] = aten::exp(%b)\n"
            "  return (%y)\n");
}

TEST(CanonicalizeTest, CastToTheSameDtypeIsTheInput) {
  EXPECT_EQ(canonical("graph(%x : f32[4]):\n"
                      "  %a : f32[4] = aten::to.dtype(%x) {dtype=6, non_blocking=false, "
                      "copy=false, memory_format=None}\n"
                      "  %b : f32[4] = aten::contiguous(%a) {memory_format=0}\n"
                      "  %y : f32[4] = aten::exp(%b)\n"
                      "  return (%y)\n",
                      2),
            "graph(%x : f32[4]):\n"
            "  %y : f32[4] = aten::exp(%x)\n"
            "  return (%y)\n");
}

TEST(CanonicalizeTest, AContiguousThatCopiesIsACloneIntoThatLayout) {
  EXPECT_EQ(canonical("graph(%x : f32[2,3,4]):\n"
                      "  %t : f32[2,4,3]{12,1,4} = aten::transpose.int(%x) {dim0=1, dim1=2}\n"
                      "  %c : f32[2,4,3] = aten::contiguous(%t) {memory_format=0}\n"
                      "  %y : f32[2,4,3] = aten::exp(%c)\n"
                      "  return (%y)\n",
                      1),
            "graph(%x : f32[2,3,4]):\n"
            "  %t : f32[2,4,3]{12,1,4} = aten::transpose.int(%x) {dim0=1, dim1=2}\n"
            "  %c : f32[2,4,3] = aten::clone(%t) {memory_format=0}\n"
            "  %y : f32[2,4,3] = aten::exp(%c)\n"
            "  return (%y)\n");
}

TEST(CanonicalizeTest, AGraphOutputNeverBecomesAGraphInput) {
  const std::string text =
      "graph(%x : f32[4]):\n"
      "  %a : f32[4] = aten::contiguous(%x) {memory_format=0}\n"
      "  return (%a)\n";
  EXPECT_EQ(canonical(text, 0), text);
}

TEST(CanonicalizeTest, MaxPoolWithUnreadIndicesIsMaxPool) {
  EXPECT_EQ(canonical("graph(%x : f32[1,2,4,4]):\n"
                      "  %p : f32[1,2,2,2], %i : i64[1,2,2,2] = aten::max_pool2d_with_indices(%x) "
                      "{kernel_size=[2,2], stride=[2,2]}\n"
                      "  return (%p)\n",
                      1),
            "graph(%x : f32[1,2,4,4]):\n"
            "  %p : f32[1,2,2,2] = aten::max_pool2d(%x) {kernel_size=[2,2], stride=[2,2]}\n"
            "  return (%p)\n");
}

TEST(CanonicalizeTest, MaxPool3dWithUnreadIndicesIsMaxPool3d) {
  EXPECT_EQ(canonical("graph(%x : f32[1,2,4,4,4]):\n"
                      "  %p : f32[1,2,2,2,2], %i : i64[1,2,2,2,2] = "
                      "aten::max_pool3d_with_indices(%x) {kernel_size=[2,2,2], stride=[2,2,2]}\n"
                      "  return (%p)\n",
                      1),
            "graph(%x : f32[1,2,4,4,4]):\n"
            "  %p : f32[1,2,2,2,2] = aten::max_pool3d(%x) {kernel_size=[2,2,2], "
            "stride=[2,2,2]}\n"
            "  return (%p)\n");
}

TEST(CanonicalizeTest, MaxPoolWhoseIndicesAreReturnedStays) {
  const std::string text =
      "graph(%x : f32[1,2,4,4]):\n"
      "  %p : f32[1,2,2,2], %i : i64[1,2,2,2] = aten::max_pool2d_with_indices(%x) "
      "{kernel_size=[2,2], stride=[2,2]}\n"
      "  return (%p, %i)\n";
  EXPECT_EQ(canonical(text, 0), text);
}

TEST(CanonicalizeTest, InferenceBatchNormOfAotAutogradIsBatchNorm) {
  EXPECT_EQ(
      canonical("graph(%x : f32[1,2,3], %w : f32[2], %b : f32[2], %m : f32[2], %v : f32[2]):\n"
                "  %y : f32[1,2,3], %sm : f32[2], %si : f32[2] = "
                "aten::_native_batch_norm_legit_no_training(%x, %w, %b, %m, %v) "
                "{momentum=0.5, eps=0.25}\n"
                "  return (%y)\n",
                1),
      "graph(%x : f32[1,2,3], %w : f32[2], %b : f32[2], %m : f32[2], %v : f32[2]):\n"
      "  %y : f32[1,2,3] = aten::batch_norm(%x, %w, %b, %m, %v) {momentum=0.5, eps=0.25, "
      "training=false, cudnn_enabled=false}\n"
      "  return (%y)\n");
}

TEST(CanonicalizeTest, BatchNormWhoseStatisticsAreReadStays) {
  const std::string text =
      "graph(%x : f32[1,2,3], %m : f32[2], %v : f32[2]):\n"
      "  %y : f32[1,2,3], %sm : f32[2], %si : f32[2] = "
      "aten::_native_batch_norm_legit_no_training(%x, %m, %v) "
      "{weight=None, bias=None, momentum=0.5, eps=0.25}\n"
      "  %z : f32[2] = aten::mul.Tensor(%sm, %si)\n"
      "  return (%y, %z)\n";
  EXPECT_EQ(canonical(text, 0), text);
}

TEST(CanonicalizeTest, ACloneKeepingTheLayoutIsItsInput) {
  // Eval-mode dropout: the readers read the linear's output itself; a returned clone of a
  // softmax is the softmax.
  EXPECT_EQ(canonical("graph(%x : f32[2,8], %w : f32[4,8]):\n"
                      "  %y : f32[2,4] = aten::linear(%x, %w) {bias=None}\n"
                      "  %d : f32[2,4] = aten::clone(%y) {memory_format=None}\n"
                      "  %r : f32[2,4] = aten::relu(%d)\n"
                      "  %s : f32[2,4] = aten::_softmax(%r) {dim=-1, half_to_float=false}\n"
                      "  %c : f32[2,4] = aten::clone(%s) {memory_format=None}\n"
                      "  return (%c, %r)\n",
                      2),
            "graph(%x : f32[2,8], %w : f32[4,8]):\n"
            "  %y : f32[2,4] = aten::linear(%x, %w) {bias=None}\n"
            "  %r : f32[2,4] = aten::relu(%y)\n"
            "  %s : f32[2,4] = aten::_softmax(%r) {dim=-1, half_to_float=false}\n"
            "  return (%s, %r)\n");
}

TEST(CanonicalizeTest, AReturnedCloneOfAnInputAViewOrAnOutputStays) {
  // The caller must get a tensor of its own: not the input, a view of it, or another output.
  for (const char* source : {"%x", "%v", "%r"}) {
    const std::string text = std::string("graph(%x : f32[2,4]):\n") +
                             "  %v : f32[8] = aten::view(%x) {size=[8]}\n"
                             "  %r : f32[8] = aten::relu(%v)\n"
                             "  %c : f32[" +
                             (source == std::string("%x") ? "2,4" : "8") + "] = aten::clone(" +
                             source +
                             ") {memory_format=None}\n"
                             "  return (%c, %r)\n";
    EXPECT_EQ(canonical(text, 0), text) << source;
  }
  // A clone that changes the layout is a real copy.
  const std::string permuted =
      "graph(%x : f32[2,4]):\n"
      "  %p : f32[4,2]{1,4} = aten::permute(%x) {dims=[1,0]}\n"
      "  %c : f32[4,2] = aten::clone(%p) {memory_format=0}\n"
      "  %r : f32[4,2] = aten::relu(%c)\n"
      "  return (%r)\n";
  EXPECT_EQ(canonical(permuted, 0), permuted);
}

}  // namespace
}  // namespace kiln
