// Memory planning on graphs written as IR text.
#include <gtest/gtest.h>

#include "passes/ir/parser.h"
#include "passes/plan_memory.h"

namespace kiln {
namespace {

const auto kAnyNode = [](const ir::Node&) { return true; };

const ir::Value* output_named(const ir::Graph& graph, const std::string& name) {
  for (const ir::Node* node : graph.nodes())
    for (const ir::Value* v : node->outputs())
      if (v->name() == name) return v;
  return nullptr;
}

int64_t offset_of(const MemoryPlan& plan, const ir::Graph& graph, const std::string& name) {
  return plan.offsets.at(output_named(graph, name)->id()).value();
}

TEST(PlanMemory, ChainReusesBuffersOfDeadValues) {
  auto graph = ir::parse_graph(R"IR(
graph(%x : f32[256]):
  %a : f32[256] = aten::exp(%x)
  %b : f32[256] = aten::exp(%a)
  %c : f32[256] = aten::exp(%b)
  %d : f32[256] = aten::exp(%c)
  return (%d)
)IR");
  MemoryPlan plan = plan_memory(*graph, kAnyNode);
  EXPECT_EQ(plan.num_planned, 3);  // d escapes
  EXPECT_EQ(plan.unshared_bytes, 3 * 1024);
  EXPECT_EQ(plan.arena_bytes, 2 * 1024);  // a's last use (b) comes before c is born
  EXPECT_EQ(offset_of(plan, *graph, "a"), offset_of(plan, *graph, "c"));
  EXPECT_NE(offset_of(plan, *graph, "a"), offset_of(plan, *graph, "b"));
}

TEST(PlanMemory, GraphOutputsAreNeverPlanned) {
  auto graph = ir::parse_graph(R"IR(
graph(%x : f32[8]):
  %a : f32[8] = aten::exp(%x)
  %b : f32[8] = aten::exp(%a)
  return (%a, %b)
)IR");
  MemoryPlan plan = plan_memory(*graph, kAnyNode);
  EXPECT_EQ(plan.num_planned, 0);
  EXPECT_EQ(plan.arena_bytes, 0);
}

TEST(PlanMemory, AViewKeepsItsBaseAlive) {
  auto graph = ir::parse_graph(R"IR(
graph(%x : f32[4,4]):
  %a : f32[4,4] = aten::exp(%x)
  %v : f32[4,4]{1,4} = aten::t(%a)
  %b : f32[4,4] = aten::exp(%x)
  %c : f32[4,4] = aten::mul.Tensor(%v, %b)
  return (%c)
)IR");
  MemoryPlan plan = plan_memory(*graph, kAnyNode);
  // a is read through v at the last node, so a and b are alive together.
  EXPECT_NE(offset_of(plan, *graph, "a"), offset_of(plan, *graph, "b"));
  EXPECT_FALSE(plan.is_planned(output_named(*graph, "v")));
}

TEST(PlanMemory, AViewOfAnOutputEscapes) {
  auto graph = ir::parse_graph(R"IR(
graph(%x : f32[4,4]):
  %a : f32[4,4] = aten::exp(%x)
  %v : f32[16] = aten::view(%a) {size=[16]}
  return (%v)
)IR");
  MemoryPlan plan = plan_memory(*graph, kAnyNode);
  EXPECT_FALSE(plan.is_planned(output_named(*graph, "a")));
}

TEST(PlanMemory, OnlyNodesTheRuntimeCanRedirect) {
  auto graph = ir::parse_graph(R"IR(
graph(%x : f32[8]):
  %a : f32[8] = aten::exp(%x)
  %b : f32[8] = aten::relu(%a)
  %c : f32[8] = aten::exp(%b)
  return (%c)
)IR");
  MemoryPlan plan = plan_memory(*graph, [](const ir::Node& n) { return n.op() == "aten::exp"; });
  EXPECT_TRUE(plan.is_planned(output_named(*graph, "a")));
  EXPECT_FALSE(plan.is_planned(output_named(*graph, "b")));
}

TEST(PlanMemory, OffsetsAreAligned) {
  auto graph = ir::parse_graph(R"IR(
graph(%x : f32[3]):
  %a : f32[3] = aten::exp(%x)
  %b : f32[3] = aten::exp(%x)
  %c : f32[3] = aten::add.Tensor(%a, %b) {alpha=1}
  %d : f32[3] = aten::exp(%c)
  return (%d)
)IR");
  MemoryPlan plan = plan_memory(*graph, kAnyNode);
  for (const auto& offset : plan.offsets) {
    if (offset) {
      EXPECT_EQ(*offset % kPlanAlignment, 0);
    }
  }
  EXPECT_EQ(plan.arena_bytes, 3 * kPlanAlignment);  // a, b and c are all alive at c's node
}

// Every node may write output 0 over input 0 (what kernel/in_place.h says of an elementwise
// kernel); plan_memory decides whether it does.
const InPlaceCandidates kFirstInputInPlace = [](const ir::Node&) {
  return std::vector<std::pair<int, int>>{{0, 0}};
};

TEST(PlanMemory, InPlaceChainUsesOneBuffer) {
  auto graph = ir::parse_graph(R"IR(
graph(%x : f32[256]):
  %a : f32[256] = aten::exp(%x)
  %b : f32[256] = aten::exp(%a)
  %c : f32[256] = aten::exp(%b)
  %d : f32[256] = aten::exp(%c)
  return (%d)
)IR");
  MemoryPlan plan = plan_memory(*graph, kAnyNode, kFirstInputInPlace);
  // x is the caller's and d escapes: a is fresh, b is written over a and c over b.
  ASSERT_EQ(plan.in_place.size(), 2u);
  EXPECT_EQ(plan.in_place[0].node->output()->name(), "b");
  EXPECT_EQ(plan.in_place[1].node->output()->name(), "c");
  EXPECT_EQ(plan.num_planned, 3);
  EXPECT_EQ(plan.arena_bytes, 1024);
  EXPECT_EQ(plan.unshared_bytes, 3 * 1024);
  EXPECT_EQ(offset_of(plan, *graph, "a"), offset_of(plan, *graph, "b"));
  EXPECT_EQ(offset_of(plan, *graph, "b"), offset_of(plan, *graph, "c"));
}

TEST(PlanMemory, InputStillReadLaterIsNotOverwritten) {
  auto graph = ir::parse_graph(R"IR(
graph(%x : f32[256]):
  %a : f32[256] = aten::exp(%x)
  %b : f32[256] = aten::exp(%a)
  %c : f32[256] = aten::mul.Tensor(%a, %b)
  %d : f32[256] = aten::exp(%c)
  return (%d)
)IR");
  MemoryPlan plan = plan_memory(*graph, kAnyNode, kFirstInputInPlace);
  // b: a is read again by c. c: written over a, which dies there.
  ASSERT_EQ(plan.in_place.size(), 1u);
  EXPECT_EQ(plan.in_place[0].node->output()->name(), "c");
  EXPECT_NE(offset_of(plan, *graph, "a"), offset_of(plan, *graph, "b"));
  EXPECT_EQ(offset_of(plan, *graph, "a"), offset_of(plan, *graph, "c"));
}

TEST(PlanMemory, InputPassedTwiceIsNotOverwritten) {
  auto graph = ir::parse_graph(R"IR(
graph(%x : f32[256]):
  %a : f32[256] = aten::exp(%x)
  %b : f32[256] = aten::mul.Tensor(%a, %a)
  %c : f32[256] = aten::exp(%b)
  return (%c)
)IR");
  MemoryPlan plan = plan_memory(*graph, kAnyNode, kFirstInputInPlace);
  EXPECT_TRUE(plan.in_place.empty());
}

TEST(PlanMemory, ViewedInputIsNotOverwritten) {
  auto graph = ir::parse_graph(R"IR(
graph(%x : f32[4,4]):
  %a : f32[4,4] = aten::exp(%x)
  %v : f32[4,4]{1,4} = aten::t(%a)
  %b : f32[4,4] = aten::exp(%a)
  %c : f32[4,4] = aten::mul.Tensor(%v, %b)
  return (%c)
)IR");
  MemoryPlan plan = plan_memory(*graph, kAnyNode, kFirstInputInPlace);
  // a is still read through its view v after b's node.
  EXPECT_TRUE(plan.in_place.empty());
}

}  // namespace
}  // namespace kiln
