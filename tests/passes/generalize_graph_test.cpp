// One optimized graph for every binding of the size inputs (passes/generalize_graph.h): the
// pipeline's graphs at a base binding and one per input moved, generalized, then instantiated at
// bindings the fit never saw and compared with the pipeline's graph there.
#include "passes/generalize_graph.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "passes/ir/parser.h"
#include "passes/ir/printer.h"
#include "passes/pipeline.h"

namespace kiln {
namespace {

using Binding = std::vector<int64_t>;

std::string str(int64_t v) {
  return std::to_string(v);
}

// A transformer block's tail over [batch, tokens, 64]: an add, a layer norm, a view to heads and
// a permute, as an encoder's ops come to the pipeline.
std::string block(const Binding& b) {
  const std::string bt = str(b[0]) + "," + str(b[1]);
  const std::string x = "f32[" + bt + ",64]";
  return "graph(%x : " + x + ", %r : " + x +
         ", %w : f32[64], %c : f32[64]):\n"
         "  %a : " +
         x +
         " = aten::add.Tensor(%x, %r) {alpha=1}\n"
         "  %y : " +
         x +
         " = aten::layer_norm(%a, %w, %c) {normalized_shape=[64], eps=1e-05, "
         "cudnn_enable=true}\n"
         "  %v : f32[" +
         bt + ",4,16] = aten::view(%y) {size=[" + bt +
         ",4,16]}\n"
         "  %p : f32[" +
         str(b[0]) + ",4," + str(b[1]) + ",16]{" + str(b[1] * 64) + ",16," +
         "64,1} = aten::permute(%v) {dims=[0,2,1,3]}\n"
         "  return (%p)\n";
}

std::unique_ptr<ir::Graph> optimized(const std::string& text) {
  std::unique_ptr<ir::Graph> graph = ir::parse_graph(text);
  run_pipeline(*graph, PipelineOptions{});
  return graph;
}

TEST(GeneralizeGraph, ThePipelinesGraphsAtThreeBindingsMakeOneTemplate) {
  const kernel::Bindings bindings = {{2, 8}, {3, 8}, {2, 9}};
  std::vector<std::unique_ptr<ir::Graph>> graphs;
  std::vector<const ir::Graph*> views;
  for (const Binding& b : bindings) {
    graphs.push_back(optimized(block(b)));
    views.push_back(graphs.back().get());
  }
  std::string why_not;
  const std::optional<GraphTemplate> t = generalize_graph(views, bindings, why_not);
  ASSERT_TRUE(t) << why_not;
  // The add and the layer norm are one fusion group: its body's integers are fitted too.
  EXPECT_NE(ir::print_graph(*t->graph).find(ir::kFusedOp), std::string::npos)
      << ir::print_graph(*t->graph);
  EXPECT_EQ(integers(*t->graph).size(), t->terms.size());
  int varying = 0;
  for (const auto& term : t->terms)
    varying += term.has_value();
  EXPECT_GT(varying, 0);
  for (const Binding& b : {Binding{5, 13}, Binding{2, 2}, Binding{7, 100}}) {
    const std::unique_ptr<ir::Graph> want = optimized(block(b));
    EXPECT_EQ(ir::print_graph(*instantiate(*t, b)), ir::print_graph(*want));
  }
}

TEST(GeneralizeGraph, GraphsThatDifferInStructureOrInASumHaveNoTemplate) {
  auto one = [](const std::string& op, int64_t n, int64_t m) {
    return ir::parse_graph("graph(%x : f32[" + str(n) + "]):\n  %y : f32[" + str(m) + "] = " + op +
                           "(%x)\n  return (%y)\n");
  };
  const kernel::Bindings bindings = {{8}, {9}};
  std::string why_not;
  auto relu8 = one("aten::relu", 8, 8), neg9 = one("aten::neg", 9, 9);
  EXPECT_FALSE(generalize_graph({relu8.get(), neg9.get()}, bindings, why_not));
  EXPECT_NE(why_not.find("node 0 (aten::relu) is aten::neg in the other"), std::string::npos)
      << why_not;
  // An output one longer than its input: s + 1, at any binding.
  auto a = one("aten::relu", 8, 9), b = one("aten::relu", 9, 10);
  const std::optional<GraphTemplate> longer =
      generalize_graph({a.get(), b.get()}, bindings, why_not);
  ASSERT_TRUE(longer) << why_not;
  EXPECT_EQ(ir::print_graph(*instantiate(*longer, Binding{20})),
            ir::print_graph(*one("aten::relu", 20, 21)));
  // An output as long as two inputs together: no term.
  auto two = [](int64_t m, int64_t n) {
    return ir::parse_graph("graph(%x : f32[" + str(m) + "], %y : f32[" + str(n) +
                           "]):\n  %z : f32[" + str(m + n) + "] = aten::relu(%x)\n  return (%z)\n");
  };
  auto p = two(8, 5), q = two(9, 5), r = two(8, 6);
  EXPECT_FALSE(generalize_graph({p.get(), q.get(), r.get()}, {{8, 5}, {9, 5}, {8, 6}}, why_not));
  EXPECT_NE(why_not.find("takes 13, 14, 14"), std::string::npos) << why_not;
  // The same graph at both: every integer constant.
  auto c = one("aten::relu", 8, 8), d = one("aten::relu", 8, 8);
  const std::optional<GraphTemplate> t = generalize_graph({c.get(), d.get()}, bindings, why_not);
  ASSERT_TRUE(t) << why_not;
  for (const auto& term : t->terms)
    EXPECT_FALSE(term.has_value());
}

TEST(GeneralizeGraph, AFlooredSizeTheFitTookForAConstantIsCaughtWhereItMoves) {
  // max_pool2d(x, 4) over a height h: its output is h // 4 high, 14 at heights 57, 58 and 59.
  auto pooled = [](int64_t h) {
    return ir::parse_graph("graph(%x : f32[2,8," + str(h) + ",8]):\n  %y : f32[2,8," + str(h / 4) +
                           ",2] = aten::max_pool2d(%x) {kernel_size=[4,4], stride=[4,4], "
                           "padding=[0,0], dilation=[1,1], ceil_mode=false}\n  return (%y)\n");
  };
  auto a = pooled(57), b = pooled(58), check = pooled(59);
  std::string why_not;
  const std::optional<GraphTemplate> t =
      generalize_graph({a.get(), b.get()}, {{57}, {58}}, why_not);
  ASSERT_TRUE(t) << why_not;
  EXPECT_EQ(template_difference(*t, *check, Binding{59}), "");
  // At 60 the pooled height is 15: the graph there is not the template's.
  const std::string differs = template_difference(*t, *pooled(60), Binding{60});
  EXPECT_NE(differs.find("is 15, not 14"), std::string::npos) << differs;
  // Another op is a difference of structure.
  auto relu = ir::parse_graph(
      "graph(%x : f32[2,8,60,8]):\n  %y : f32[2,8,15,2] = aten::relu(%x)\n"
      "  return (%y)\n");
  EXPECT_NE(template_difference(*t, *relu, Binding{60}).find("is aten::relu in the other"),
            std::string::npos);
}

TEST(GeneralizeGraph, TheNodesWithTermsAreThoseWhoseIntegersMove) {
  // A slice to the token count (its end moves) and a view of a weight (nothing of it moves).
  auto graph = [](int64_t tokens) {
    return ir::parse_graph("graph(%p : f32[1,64], %w : f32[32]):\n  %s : f32[1," + str(tokens) +
                           "] = aten::slice.Tensor(%p) {dim=1, start=0, end=" + str(tokens) +
                           ", step=1}\n  %v : f32[4,8] = aten::view(%w) {size=[4,8]}\n"
                           "  return (%s, %v)\n");
  };
  auto a = graph(7), b = graph(8);
  std::string why_not;
  const std::optional<GraphTemplate> t = generalize_graph({a.get(), b.get()}, {{7}, {8}}, why_not);
  ASSERT_TRUE(t) << why_not;
  const std::vector<const ir::Node*> moving = nodes_with_terms(*t, *b);
  ASSERT_EQ(moving.size(), 1u);
  EXPECT_EQ(moving[0]->op(), "aten::slice.Tensor");
}

}  // namespace
}  // namespace kiln
