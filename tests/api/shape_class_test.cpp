// Which signatures a shape class serves (backend/api/shape_class.h): the dims two signatures
// differ in become size inputs, dims that move together are one, and a member is the class's
// signature but for those inputs, each at least 2, with its moved tensors dense in their order.
#include "backend/api/shape_class.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

namespace kiln {
namespace {

using Tensors = std::vector<at::Tensor>;
using Binding = std::vector<int64_t>;

// An encoder's inputs: ids and a mask of [batch, tokens], and a weight.
Tensors encoder_inputs(int64_t batch, int64_t tokens, const at::Tensor& weight) {
  return {at::zeros({batch, tokens}, at::kLong), at::ones({batch, tokens}), weight};
}

TEST(ShapeClass, DimsThatMoveTogetherAreOneSizeInput) {
  const at::Tensor weight = at::randn({64});
  const std::vector<size_t> weights = {2};
  const std::optional<ShapeClass> c = form_class(describe(encoder_inputs(2, 7, weight), weights),
                                                 encoder_inputs(2, 9, weight), weights);
  ASSERT_TRUE(c);
  ASSERT_EQ(c->size_inputs.size(), 1u);  // the tokens of the ids and of the mask
  EXPECT_EQ(c->size_inputs[0], (std::vector<std::pair<size_t, int>>{{0, 1}, {1, 1}}));
  EXPECT_EQ(base_binding(*c), Binding{9});
  EXPECT_EQ(binding_of(*c, encoder_inputs(2, 100, weight)), Binding{100});
  EXPECT_EQ(binding_of(*c, encoder_inputs(2, 2, weight)), Binding{2});
  // Not members: a token count of 1, another batch, ids and mask of different lengths, another
  // weight, another dtype, a transposed layout.
  EXPECT_FALSE(binding_of(*c, encoder_inputs(2, 1, weight)));
  EXPECT_FALSE(binding_of(*c, encoder_inputs(3, 9, weight)));
  EXPECT_FALSE(binding_of(*c, {at::zeros({2, 9}, at::kLong), at::ones({2, 10}), weight}));
  EXPECT_FALSE(binding_of(*c, encoder_inputs(2, 9, at::randn({64}))));
  EXPECT_FALSE(binding_of(*c, {at::zeros({2, 9}, at::kInt), at::ones({2, 9}), weight}));
  EXPECT_FALSE(binding_of(*c, {at::zeros({9, 2}, at::kLong).t(), at::ones({2, 9}), weight}));
}

TEST(ShapeClass, AGraphsSymbolicSizesDeclareTheClassAtItsFirstSignature) {
  const at::Tensor weight = at::randn({64});
  // The tokens of the ids and of the mask are one symbol; the batch is static; the weight has
  // no symbolic dim.
  const DeclaredSizes symbols = {{{-1, 0}, {-1, 0}, {-1}}, {}};
  std::string why;
  const std::optional<ShapeClass> c =
      declare_class(encoder_inputs(2, 7, weight), {2}, symbols, &why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(c->size_inputs[0], (std::vector<std::pair<size_t, int>>{{0, 1}, {1, 1}}));
  EXPECT_EQ(base_binding(*c), Binding{7});
  EXPECT_EQ(binding_of(*c, encoder_inputs(2, 30, weight)), Binding{30});
  EXPECT_FALSE(binding_of(*c, encoder_inputs(3, 30, weight)));
  // No class: a symbolic dim below 2 now, one symbol at two sizes, a symbolic weight, a
  // symbolic dim of a strided tensor, the symbols of another number of inputs, none at all.
  EXPECT_FALSE(declare_class(encoder_inputs(2, 1, weight), {2}, symbols));
  EXPECT_FALSE(
      declare_class({at::zeros({2, 7}, at::kLong), at::ones({2, 8}), weight}, {2}, symbols, &why));
  EXPECT_NE(why.find("same symbol"), std::string::npos) << why;
  EXPECT_FALSE(
      declare_class(encoder_inputs(2, 7, weight), {2}, DeclaredSizes{{{-1, 0}, {-1, 0}, {1}}, {}}));
  EXPECT_FALSE(
      declare_class({at::ones({2, 14}).slice(1, 0, 14, 2)}, {}, DeclaredSizes{{{-1, 0}}, {}}));
  EXPECT_FALSE(declare_class(encoder_inputs(2, 7, weight), {2}, DeclaredSizes{{{-1, 0}}, {}}));
  EXPECT_FALSE(declare_class(encoder_inputs(2, 7, weight), {2},
                             DeclaredSizes{{{-1, -1}, {-1, -1}, {-1}}, {}}));
}

TEST(ShapeClass, ADerivedDimMovesWithTheSymbolsItIsAnExpressionOf) {
  // A training graph's flattened tokens: ids of [batch, tokens] and logits of [batch * tokens, 8].
  using Op = SizeExpression::Op;
  auto inputs = [](int64_t batch, int64_t tokens, int64_t rows) {
    return Tensors{at::zeros({batch, tokens}, at::kLong), at::ones({rows, 8})};
  };
  const SizeExpression product({{Op::kDim, 0, 0}, {Op::kDim, 1, 0}, {Op::kMul}});
  const DeclaredSizes declared = {{{0, 1}, {-2, -1}}, {{1, 0, product}}};
  std::string why;
  const std::optional<ShapeClass> c = declare_class(inputs(2, 7, 14), {}, declared, &why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(c->size_inputs.size(), 2u);
  EXPECT_EQ(binding_of(*c, inputs(3, 5, 15)), (Binding{3, 5}));
  EXPECT_FALSE(binding_of(*c, inputs(3, 5, 14)));  // not the product
  const Tensors moved = inputs_at(*c, inputs(2, 7, 14), Binding{4, 6});
  EXPECT_EQ(moved[1].sizes(), (std::vector<int64_t>{24, 8}));
  EXPECT_EQ(binding_of(*c, moved), (Binding{4, 6}));
  // No class: the dim is not the expression's value now, the expression reads a symbol no dim
  // is, or it names a dim the symbols do not mark derived.
  EXPECT_FALSE(declare_class(inputs(2, 7, 13), {}, declared, &why));
  EXPECT_NE(why.find("not the value"), std::string::npos) << why;
  const SizeExpression unknown({{Op::kDim, 0, 0}, {Op::kDim, 5, 0}, {Op::kMul}});
  EXPECT_FALSE(declare_class(inputs(2, 7, 14), {}, {declared.symbols, {{1, 0, unknown}}}));
  EXPECT_FALSE(declare_class(inputs(2, 7, 14), {}, {declared.symbols, {{1, 1, product}}}));
}

TEST(ShapeClass, AnInputThatIsNotDenseTakesTheStridesTheGraphDeclares) {
  // The first third of a fused projection: [batch, tokens, 4] with strides [12 tokens, 12, 1].
  using Op = SizeExpression::Op;
  auto third = [](int64_t batch, int64_t tokens) {
    return Tensors{at::ones({batch, tokens, 12}).slice(2, 0, 4)};
  };
  const DeclaredSizes::Strides strides = {
      0,
      {SizeExpression({{Op::kDim, 1, 0}, {Op::kConst, 12}, {Op::kMul}}),
       SizeExpression({{Op::kConst, 12}}), SizeExpression({{Op::kConst, 1}})}};
  const DeclaredSizes declared = {{{0, 1, -1}}, {}, {strides}};
  std::string why;
  const std::optional<ShapeClass> c = declare_class(third(2, 7), {}, declared, &why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(binding_of(*c, third(3, 5)), (Binding{3, 5}));
  EXPECT_FALSE(binding_of(*c, {at::ones({3, 5, 4})}));  // dense: not the declared strides
  const Tensors moved = inputs_at(*c, third(2, 7), Binding{4, 6});
  EXPECT_EQ(moved[0].sizes(), (std::vector<int64_t>{4, 6, 4}));
  EXPECT_EQ(moved[0].strides(), (std::vector<int64_t>{72, 12, 1}));
  EXPECT_EQ(binding_of(*c, moved), (Binding{4, 6}));
  // No class without declared strides, or with strides it does not have.
  EXPECT_FALSE(declare_class(third(2, 7), {}, {declared.symbols, {}, {}}, &why));
  EXPECT_NE(why.find("declares no strides"), std::string::npos) << why;
  DeclaredSizes wrong = declared;
  wrong.strides[0].strides[1] = SizeExpression({{Op::kConst, 4}});
  EXPECT_FALSE(declare_class(third(2, 7), {}, wrong));
}

TEST(ShapeClass, MergedSizeInputsMoveTogether) {
  // Logits of [s0, s1, 8] and labels of [s2, s3] (symbols of their own for one batch and
  // length), the flattened labels [s2 * s3] derived: merging s2 into s0 and s3 into s1 leaves two
  // size inputs, and the derived dim reads them.
  using Op = SizeExpression::Op;
  auto inputs = [](int64_t batch, int64_t tokens) {
    return Tensors{at::ones({batch, tokens, 8}), at::zeros({batch, tokens}, at::kLong),
                   at::zeros({batch * tokens}, at::kLong)};
  };
  const SizeExpression product({{Op::kDim, 2, 0}, {Op::kDim, 3, 0}, {Op::kMul}});
  std::string why;
  std::optional<ShapeClass> c =
      declare_class(inputs(2, 7), {}, {{{0, 1, -1}, {2, 3}, {-2}}, {{2, 0, product}}, {}}, &why);
  ASSERT_TRUE(c) << why;
  ASSERT_EQ(c->size_inputs.size(), 4u);
  EXPECT_EQ(binding_of(*c, {at::ones({3, 5, 8}), at::zeros({4, 6}, at::kLong),
                            at::zeros({24}, at::kLong)}),
            (Binding{3, 5, 4, 6}));
  merge_size_inputs(*c, 0, 2);
  merge_size_inputs(*c, 1, 2);  // the tokens: size input 3 before the first merge
  ASSERT_EQ(c->size_inputs.size(), 2u);
  EXPECT_EQ(c->inputs[1].size_input, (std::vector<int>{0, 1}));
  EXPECT_EQ(binding_of(*c, inputs(3, 5)), (Binding{3, 5}));
  EXPECT_FALSE(binding_of(
      *c, {at::ones({3, 5, 8}), at::zeros({4, 6}, at::kLong), at::zeros({24}, at::kLong)}));
  const Tensors moved = inputs_at(*c, inputs(2, 7), Binding{4, 6});
  EXPECT_EQ(moved[1].sizes(), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(moved[2].sizes(), (std::vector<int64_t>{24}));
}

TEST(ShapeClass, ADimOfOneKeepsItsStrideWhereItIsNotItsLayouts) {
  // A [1, tokens] slice of a [1, 64] position buffer has a stride of 64 at every length; a mask
  // of [2, 1, tokens, tokens] has the dense stride of its dim of one at each.
  const at::Tensor buffer = at::arange(64).unsqueeze(0);
  const std::optional<ShapeClass> c =
      form_class(describe({buffer.slice(1, 0, 7), at::ones({2, 1, 7, 7})}, {}),
                 {buffer.slice(1, 0, 9), at::ones({2, 1, 9, 9})}, {});
  ASSERT_TRUE(c);
  const Tensors moved = inputs_at(*c, {buffer.slice(1, 0, 9), at::ones({2, 1, 9, 9})}, Binding{5});
  EXPECT_EQ(moved[0].strides(), (std::vector<int64_t>{64, 1}));
  EXPECT_EQ(moved[1].strides(), (std::vector<int64_t>{25, 25, 5, 1}));
  EXPECT_EQ(binding_of(*c, moved), Binding{5});
}

TEST(ShapeClass, TwoDimsMovingDifferentlyAreTwoInputs) {
  const std::optional<ShapeClass> c =
      form_class(describe({at::ones({2, 7, 16})}, {}), {at::ones({3, 9, 16})}, {});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->size_inputs.size(), 2u);
  EXPECT_EQ(binding_of(*c, {at::ones({5, 11, 16})}), (Binding{5, 11}));
  EXPECT_FALSE(binding_of(*c, {at::ones({5, 11, 17})}));
}

TEST(ShapeClass, NoClassWhereMoreThanSizesDiffer) {
  auto formed = [](const Tensors& a, const Tensors& b) {
    return form_class(describe(a, {}), b, {}).has_value();
  };
  EXPECT_FALSE(formed({at::ones({2, 7})}, {at::ones({2, 7})}));  // nothing moved
  EXPECT_FALSE(formed({at::ones({2, 7})}, {at::ones({2, 1})}));  // moved to 1
  EXPECT_FALSE(formed({at::ones({2, 7})}, {at::ones({2, 9}, at::kDouble)}));
  EXPECT_FALSE(formed({at::ones({2, 7})}, {at::ones({2, 7, 1})}));
  EXPECT_FALSE(formed({at::ones({2, 7})}, {at::ones({2, 18}).slice(1, 0, 18, 2)}));  // strided
  EXPECT_TRUE(formed({at::ones({2, 7})}, {at::ones({2, 9})}));
}

TEST(ShapeClass, AnExpandedSizeCarrierMovesWithItsSize) {
  // torch.compile's regions read a size no tensor has from a one-element tensor expanded to it.
  const at::Tensor one = at::ones({1});
  const std::optional<ShapeClass> c = form_class(describe({one.expand({7}), at::ones({7, 4})}, {}),
                                                 {one.expand({9}), at::ones({9, 4})}, {});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->size_inputs.size(), 1u);
  EXPECT_EQ(binding_of(*c, {one.expand({12}), at::ones({12, 4})}), Binding{12});
  EXPECT_FALSE(binding_of(*c, {at::ones({12}), at::ones({12, 4})}));  // dense, not expanded
  const Tensors moved = inputs_at(*c, {one.expand({9}), at::ones({9, 4})}, Binding{5});
  EXPECT_EQ(moved[0].stride(0), 0);
  EXPECT_EQ(binding_of(*c, moved), Binding{5});
}

TEST(ShapeClass, InputsAtAnotherBindingKeepTheirLayout) {
  const at::Tensor channels_last =
      at::ones({2, 8, 5, 5}).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor weight = at::ones({8});
  const std::optional<ShapeClass> c = form_class(
      describe({at::ones({3, 8, 5, 5}).contiguous(at::MemoryFormat::ChannelsLast), weight}, {1}),
      {channels_last, weight}, {1});
  ASSERT_TRUE(c);
  const Binding batch = {6};
  const Tensors moved = inputs_at(*c, {channels_last, weight}, batch);
  EXPECT_EQ(moved[0].sizes(), (std::vector<int64_t>{6, 8, 5, 5}));
  EXPECT_TRUE(moved[0].is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(moved[1].is_same(weight));  // weights are never moved
  EXPECT_EQ(binding_of(*c, moved), batch);
}

TEST(ShapeClass, ASizeInputWithAStepCountsSteps) {
  // An image's height and width, one size input in steps of 8 from the base 40 x 40.
  std::optional<ShapeClass> c =
      form_class(describe({at::ones({1, 3, 32, 32})}, {}), {at::ones({1, 3, 40, 40})}, {});
  ASSERT_TRUE(c);
  c->steps = {8};
  c->offsets = {0};
  EXPECT_EQ(base_binding(*c), Binding{5});
  EXPECT_EQ(dim_sizes(*c, Binding{7}), Binding{56});
  EXPECT_EQ(binding_of(*c, {at::ones({1, 3, 120, 120})}), Binding{15});
  EXPECT_EQ(binding_of(*c, {at::ones({1, 3, 16, 16})}), Binding{2});
  // Off the step, and one step (a value of 1, which broadcasts where a stage is 1 high).
  EXPECT_FALSE(binding_of(*c, {at::ones({1, 3, 44, 44})}));
  EXPECT_FALSE(binding_of(*c, {at::ones({1, 3, 8, 8})}));
  const Tensors at_9 = inputs_at(*c, {at::ones({1, 3, 40, 40})}, Binding{9});
  EXPECT_EQ(at_9[0].sizes(), (std::vector<int64_t>{1, 3, 72, 72}));
  // An offset: heights 4 past a multiple of 8.
  c->offsets = {4};
  EXPECT_EQ(binding_of(*c, {at::ones({1, 3, 44, 44})}), Binding{5});
  EXPECT_FALSE(binding_of(*c, {at::ones({1, 3, 40, 40})}));
}

}  // namespace
}  // namespace kiln
