// Extern steps that write over an input that dies there (runtime/in_place_extern.h): which
// steps may, and that results match ATen's and no live tensor is written over.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include "passes/ir/parser.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"
#include "runtime/in_place_extern.h"
#include "runtime/plan_builder.h"

namespace kiln {
namespace {

c10::OperatorHandle op(const char* name, const char* overload) {
  auto handle = c10::Dispatcher::singleton().findSchema({name, overload});
  if (!handle) throw std::runtime_error(std::string("no operator ") + name);
  return *handle;
}

TEST(InPlaceOverload, FoundWithItsArgumentOrder) {
  // relu_(self): the one argument, written.
  auto relu = find_in_place_overload(op("aten::relu", ""));
  ASSERT_TRUE(relu);
  EXPECT_EQ(relu->order, std::vector<int>{0});
  EXPECT_EQ(relu->written_position, 0);
  // The oneDNN convolution's in-place form takes `other` (functional position 1) first.
  auto conv = find_in_place_overload(op("mkldnn::_convolution_pointwise", "binary"));
  ASSERT_TRUE(conv);
  EXPECT_EQ(conv->written_position, 1);
  ASSERT_GE(conv->order.size(), 3u);
  EXPECT_EQ(conv->order[0], 1);
  EXPECT_EQ(conv->order[1], 0);
  EXPECT_EQ(conv->order[2], 2);
  // mm has no in-place overload; the unary convolution's has other arguments.
  EXPECT_FALSE(find_in_place_overload(op("aten::mm", "")));
  EXPECT_FALSE(find_in_place_overload(op("mkldnn::_convolution_pointwise", "")));
}

Plan compile_text(const std::string& text) {
  auto graph = ir::parse_graph(text);
  PipelineOptions options;
  options.fusion = false;
  options.can_write_into_buffer = can_write_into_buffer;
  auto result = run_pipeline(*graph, options);
  return build_plan(*graph, {}, result.memory, c10::Device(c10::kCPU));
}

const ExternStep* find_step(const Plan& plan, const std::string& name) {
  for (const Step& step : plan.steps) {
    const auto* e = std::get_if<ExternStep>(&step);
    if (e && e->name == name) return e;
  }
  return nullptr;
}

// A residual block's tail: %i (a convolution's fresh output) is added inside the second
// convolution. %i dies there unless the graph returns it too.
std::string residual_block(const std::string& other, const std::string& returns) {
  const std::string cl = "f32[2,8,6,6]{288,1,48,8}";
  const std::string conv_attrs = "padding=[1,1], stride=[1,1], dilation=[1,1], groups=1";
  return "graph(%x : " + cl + ", %w : f32[8,8,3,3], %b : f32[8]):\n  %i : " + cl +
         " = mkldnn::_convolution_pointwise(%x, %w, %b) {" + conv_attrs +
         ", attr=\"none\", scalars=[], algorithm=None}\n  %r : " + cl +
         " = mkldnn::_convolution_pointwise.binary(%x, " + other + ", %w, %b) {" + conv_attrs +
         ", binary_attr=\"add\", alpha=None, unary_attr=\"relu\", unary_scalars=[], "
         "unary_algorithm=None}\n  return (" +
         returns + ")\n";
}

struct Inputs {
  at::Tensor x = at::randn({2, 8, 6, 6}).contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor w = at::randn({8, 8, 3, 3});
  at::Tensor b = at::randn({8});
  at::Tensor conv(const at::Tensor& in) const { return at::conv2d(in, w, b, 1, 1); }
};

TEST(InPlaceExtern, ResidualAddWritesOverTheDyingConvolutionOutput) {
  Plan plan = compile_text(residual_block("%i", "%r"));
  const ExternStep* step = find_step(plan, "mkldnn::_convolution_pointwise.binary");
  ASSERT_NE(step, nullptr);
  ASSERT_TRUE(step->in_place.has_value());
  Inputs in;
  const auto expected = at::relu(in.conv(in.x) + in.conv(in.x));
  for (int call = 0; call < 2; ++call) {
    auto out = run_plan(plan, {in.x, in.w, in.b});
    EXPECT_TRUE(at::allclose(out.at(0), expected, 1e-4, 1e-4));
  }
}

TEST(InPlaceExtern, AnOutputOfTheGraphIsNotWrittenOver) {
  Plan plan = compile_text(residual_block("%i", "%r, %i"));
  EXPECT_FALSE(find_step(plan, "mkldnn::_convolution_pointwise.binary")->in_place.has_value());
  Inputs in;
  auto out = run_plan(plan, {in.x, in.w, in.b});
  EXPECT_TRUE(at::allclose(out.at(1), in.conv(in.x), 1e-4, 1e-4));
  EXPECT_TRUE(at::allclose(out.at(0), at::relu(in.conv(in.x) + out.at(1)), 1e-4, 1e-4));
}

TEST(InPlaceExtern, AnInputOfTheGraphIsNotWrittenOver) {
  Plan plan = compile_text(residual_block("%x", "%r"));
  EXPECT_FALSE(find_step(plan, "mkldnn::_convolution_pointwise.binary")->in_place.has_value());
  Inputs in;
  const auto before = in.x.clone();
  auto out = run_plan(plan, {in.x, in.w, in.b});
  EXPECT_TRUE(in.x.equal(before));
  EXPECT_TRUE(at::allclose(out.at(0), at::relu(in.conv(in.x) + in.x), 1e-4, 1e-4));
}

TEST(InPlaceExtern, SharedTensorsAreNotWrittenOver) {
  at::Tensor t = at::randn({4});
  EXPECT_TRUE(is_sole_owner(t));
  at::Tensor alias = t;
  EXPECT_FALSE(is_sole_owner(t));  // a second owner of the tensor
  alias.reset();
  at::Tensor view = t.view({2, 2});
  EXPECT_FALSE(is_sole_owner(t));  // a view shares the storage
  view.reset();
  EXPECT_TRUE(is_sole_owner(t));
  EXPECT_FALSE(is_sole_owner(at::randn({4}).set_requires_grad(true)));
  EXPECT_FALSE(is_sole_owner(at::Tensor()));
}

}  // namespace
}  // namespace kiln
