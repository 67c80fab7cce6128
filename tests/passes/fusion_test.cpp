#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "passes/fuse_elementwise.h"
#include "passes/fuse_epilogue.h"
#include "passes/fuse_reductions.h"
#include "passes/fusion_clusters.h"
#include "passes/ir/parser.h"
#include "passes/ir/printer.h"
#include "passes/ir/verifier.h"
#include "passes/kernel/lower_group.h"
#include "passes/pipeline.h"
#include "tests/support/check_pattern.h"

namespace kiln {
namespace {

std::vector<ir::Node*> fused_nodes(const ir::Graph& graph) {
  std::vector<ir::Node*> found;
  for (ir::Node* n : graph.nodes())
    if (n->op() == kFusedOp) found.push_back(n);
  return found;
}

std::vector<std::string> body_ops(const ir::Node& fused) {
  std::vector<std::string> ops;
  for (const ir::Node* n : fused.subgraph()->nodes())
    ops.push_back(n->op());
  return ops;
}

std::vector<std::string> graph_ops(const ir::Graph& graph) {
  std::vector<std::string> ops;
  for (const ir::Node* n : graph.nodes())
    ops.push_back(n->op());
  return ops;
}

// The fused node whose body holds `op`, or null.
ir::Node* group_with(const ir::Graph& graph, const std::string& op) {
  for (ir::Node* n : fused_nodes(graph)) {
    const auto ops = body_ops(*n);
    if (std::find(ops.begin(), ops.end(), op) != ops.end()) return n;
  }
  return nullptr;
}

std::string string_attr(const ir::Node& node, const std::string& name) {
  const ir::Attr* attr = node.find_attr(name);
  if (!attr || !std::holds_alternative<std::string>(*attr)) return "<none>";
  return std::get<std::string>(*attr);
}

// After a fuser: the graph is still valid and every group lowers to a valid kernel.
::testing::AssertionResult well_formed(const ir::Graph& graph) {
  const auto problems = ir::verify_graph(graph);
  if (!problems.empty())
    return ::testing::AssertionFailure() << problems.front() << "\n" << ir::print_graph(graph);
  for (const ir::Node* n : fused_nodes(graph)) {
    if (!n->subgraph()) return ::testing::AssertionFailure() << "a fused node without a body";
    if (n->subgraph()->inputs().size() != n->inputs().size() ||
        n->subgraph()->outputs().size() != n->outputs().size())
      return ::testing::AssertionFailure() << "body and node disagree on inputs or outputs";
    try {
      kernel::lower_group(*n->subgraph(), "check");
    } catch (const std::exception& e) {
      return ::testing::AssertionFailure() << e.what() << "\n" << ir::print_graph(graph);
    }
  }
  return ::testing::AssertionSuccess();
}

// ---- Elementwise fusion ------------------------------------------------------------------------

constexpr const char* kChain =
    "graph(%x : f32[4,8], %y : f32[4,8], %b : f32[8]):\n"
    "  %t : f32[4,8] = aten::mul.Tensor(%x, %y)\n"
    "  %u : f32[4,8] = aten::add.Tensor(%t, %b) {alpha=1}\n"
    "  %r : f32[4,8] = aten::relu(%u)\n"
    "  return (%r)\n";

TEST(FuseElementwiseTest, ChainBecomesOneFusedNode) {
  auto g = ir::parse_graph(kChain);
  EXPECT_EQ(fuse_elementwise(*g), 1);
  ASSERT_EQ(g->num_nodes(), 1u);
  const ir::Node* fused = g->nodes()[0];
  EXPECT_EQ(fused->op(), kFusedOp);
  EXPECT_EQ(body_ops(*fused),
            (std::vector<std::string>{"aten::mul.Tensor", "aten::add.Tensor", "aten::relu"}));
  EXPECT_EQ(fused->inputs(), g->inputs());
  EXPECT_EQ(g->outputs().at(0), fused->output());
  EXPECT_TRUE(well_formed(*g));
}

TEST(FuseElementwiseTest, PrintedGroupShowsItsBody) {
  auto g = ir::parse_graph(kChain);
  fuse_elementwise(*g);
  EXPECT_TRUE(matches_checks(ir::print_graph(*g), R"(
    CHECK: graph(%x : f32[4,8], %y : f32[4,8], %b : f32[8]):
    CHECK: %r : f32[4,8] = kiln::fused(%x, %y, %b)
    CHECK: aten::mul.Tensor
    CHECK: aten::add.Tensor
    CHECK: aten::relu
    CHECK: return (%r)
    CHECK-NOT: aten::
    CHECK: return (%r)
  )"));
}

TEST(FuseElementwiseTest, SingleOpStillFormsAGroup) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4]):\n"
      "  %r : f32[4] = aten::relu(%x)\n"
      "  return (%r)\n");
  EXPECT_EQ(fuse_elementwise(*g), 1);
  EXPECT_EQ(graph_ops(*g), (std::vector<std::string>{kFusedOp}));
}

TEST(FuseElementwiseTest, BroadcastProducerReadOnlyInsideIsAbsorbed) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4,1], %y : f32[4,8]):\n"
      "  %a : f32[4,1] = aten::exp(%x)\n"
      "  %b : f32[4,8] = aten::add.Tensor(%y, %a) {alpha=1}\n"
      "  %r : f32[4,8] = aten::relu(%b)\n"
      "  return (%r)\n");
  EXPECT_EQ(fuse_elementwise(*g), 1);
  ASSERT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(body_ops(*g->nodes()[0]),
            (std::vector<std::string>{"aten::exp", "aten::add.Tensor", "aten::relu"}));
  EXPECT_TRUE(well_formed(*g));
}

// A squeeze-excitation gate: fused into the multiply, the sigmoid would run once per element of
// the feature map (64 * 64 * 32 times) instead of 32 times. A cheap op broadcast as far is
// recomputed, and so is a transcendental one broadcast over few elements.
TEST(FuseElementwiseTest, TranscendentalProducerBroadcastOverManyElementsKeepsItsOwnGroup) {
  auto g = ir::parse_graph(
      "graph(%g : f32[1,32,1,1], %x : f32[1,32,64,64]):\n"
      "  %s : f32[1,32,1,1] = aten::sigmoid(%g)\n"
      "  %h : f32[1,32,1,1] = aten::mul.Scalar(%s) {other=2.0}\n"
      "  %r : f32[1,32,64,64] = aten::mul.Tensor(%x, %h)\n"
      "  return (%r)\n");
  EXPECT_EQ(fuse_elementwise(*g), 2);
  ir::Node* big = group_with(*g, "aten::mul.Tensor");
  ir::Node* gate = group_with(*g, "aten::sigmoid");
  ASSERT_NE(big, nullptr);
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(body_ops(*big), (std::vector<std::string>{"aten::mul.Scalar", "aten::mul.Tensor"}));
  EXPECT_EQ(body_ops(*gate), (std::vector<std::string>{"aten::sigmoid"}));
  EXPECT_TRUE(well_formed(*g));

  auto small = ir::parse_graph(
      "graph(%g : f32[1,32,1,1], %x : f32[1,32,8,8]):\n"
      "  %s : f32[1,32,1,1] = aten::sigmoid(%g)\n"
      "  %r : f32[1,32,8,8] = aten::mul.Tensor(%x, %s)\n"
      "  return (%r)\n");
  EXPECT_EQ(fuse_elementwise(*small), 1);
}

TEST(FuseElementwiseTest, BroadcastProducerReturnedByTheGraphIsNotAbsorbed) {
  // %a [4,1] is a graph output: a [4,8] kernel cannot write it.
  auto g = ir::parse_graph(
      "graph(%x : f32[4,1], %y : f32[4,8]):\n"
      "  %a : f32[4,1] = aten::exp(%x)\n"
      "  %b : f32[4,8] = aten::add.Tensor(%y, %a) {alpha=1}\n"
      "  %r : f32[4,8] = aten::relu(%b)\n"
      "  return (%r, %a)\n");
  fuse_elementwise(*g);
  ir::Node* big = group_with(*g, "aten::relu");
  ir::Node* small = group_with(*g, "aten::exp");
  ASSERT_NE(big, nullptr);
  ASSERT_NE(small, nullptr);
  EXPECT_NE(big, small);
  EXPECT_EQ(body_ops(*big), (std::vector<std::string>{"aten::add.Tensor", "aten::relu"}));
  EXPECT_EQ(big->input(1), small->output());
  EXPECT_TRUE(well_formed(*g));
}

TEST(FuseElementwiseTest, BroadcastProducerWithAnExternReaderIsNotAbsorbed) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4,1], %y : f32[4,8], %w : f32[1,4]):\n"
      "  %a : f32[4,1] = aten::exp(%x)\n"
      "  %b : f32[4,8] = aten::add.Tensor(%y, %a) {alpha=1}\n"
      "  %r : f32[4,8] = aten::relu(%b)\n"
      "  %m : f32[4,4] = aten::mm(%a, %w)\n"
      "  return (%r, %m)\n");
  fuse_elementwise(*g);
  ir::Node* big = group_with(*g, "aten::relu");
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(body_ops(*big), (std::vector<std::string>{"aten::add.Tensor", "aten::relu"}));
  EXPECT_TRUE(well_formed(*g));
}

TEST(FuseElementwiseTest, FullSizeProducerWithAnOutsideReaderBecomesAGroupOutput) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4,8], %w : f32[8,2]):\n"
      "  %a : f32[4,8] = aten::exp(%x)\n"
      "  %r : f32[4,8] = aten::relu(%a)\n"
      "  %m : f32[4,2] = aten::mm(%a, %w)\n"
      "  return (%r, %m)\n");
  EXPECT_EQ(fuse_elementwise(*g), 1);
  ir::Node* fused = group_with(*g, "aten::exp");
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(body_ops(*fused), (std::vector<std::string>{"aten::exp", "aten::relu"}));
  EXPECT_EQ(fused->outputs().size(), 2u);
  EXPECT_TRUE(well_formed(*g));
}

TEST(FuseElementwiseTest, FusingAcrossAnExternPathWouldMakeACycle) {
  // relu -> mm -> add, and relu -> add: one group {relu, add} would feed mm and read it.
  auto g = ir::parse_graph(
      "graph(%x : f32[4,4], %w : f32[4,4]):\n"
      "  %a : f32[4,4] = aten::relu(%x)\n"
      "  %m : f32[4,4] = aten::mm(%a, %w)\n"
      "  %b : f32[4,4] = aten::add.Tensor(%m, %a) {alpha=1}\n"
      "  return (%b)\n");
  EXPECT_EQ(fuse_elementwise(*g), 2);
  ir::Node* first = group_with(*g, "aten::relu");
  ir::Node* second = group_with(*g, "aten::add.Tensor");
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(first, second);
  EXPECT_EQ(graph_ops(*g), (std::vector<std::string>{kFusedOp, "aten::mm", kFusedOp}));
  EXPECT_TRUE(well_formed(*g));
}

TEST(FuseElementwiseTest, UnknownInPlaceOpIsABarrier) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4], %z : f32[4]):\n"
      "  %a : f32[4] = aten::exp(%x)\n"
      "  %z2 : f32[4] = aten::add_.Tensor(%z, %x) {alpha=1}\n"
      "  %b : f32[4] = aten::relu(%a)\n"
      "  return (%b, %z2)\n");
  EXPECT_EQ(fuse_elementwise(*g), 2);
  EXPECT_EQ(graph_ops(*g), (std::vector<std::string>{kFusedOp, "aten::add_.Tensor", kFusedOp}));
  EXPECT_TRUE(matches_checks(ir::print_graph(*g), R"(
    CHECK: kiln::fused(%x)
    CHECK: aten::exp
    CHECK-NOT: aten::relu
    CHECK: aten::add_.Tensor(%z, %x)
    CHECK: kiln::fused
    CHECK: aten::relu
  )"));
  EXPECT_TRUE(well_formed(*g));
}

TEST(FuseElementwiseTest, UnknownOpWithoutOutputsIsABarrier) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4]):\n"
      "  %a : f32[4] = aten::exp(%x)\n"
      "  prim::Print(%x)\n"
      "  %b : f32[4] = aten::relu(%a)\n"
      "  return (%b)\n");
  EXPECT_EQ(fuse_elementwise(*g), 2);
  EXPECT_EQ(graph_ops(*g), (std::vector<std::string>{kFusedOp, "prim::Print", kFusedOp}));
  EXPECT_TRUE(well_formed(*g));
}

TEST(FuseElementwiseTest, KnownExternOpIsNotABarrier) {
  // mm is in the op table (no side effects): independent elementwise ops around it still fuse.
  auto g = ir::parse_graph(
      "graph(%x : f32[4,4], %w : f32[4,4]):\n"
      "  %a : f32[4,4] = aten::exp(%x)\n"
      "  %m : f32[4,4] = aten::mm(%x, %w)\n"
      "  %b : f32[4,4] = aten::relu(%a)\n"
      "  return (%b, %m)\n");
  EXPECT_EQ(fuse_elementwise(*g), 1);
  ir::Node* fused = group_with(*g, "aten::relu");
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(body_ops(*fused), (std::vector<std::string>{"aten::exp", "aten::relu"}));
  EXPECT_TRUE(well_formed(*g));
}

TEST(FuseElementwiseTest, UnsupportedAttributeKeepsANodeOut) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4], %y : f32[4]):\n"
      "  %a : f32[4] = aten::exp(%x)\n"
      "  %q : f32[4] = aten::div.Tensor_mode(%a, %y) {rounding_mode=\"floor\"}\n"
      "  %b : f32[4] = aten::relu(%q)\n"
      "  return (%b)\n");
  fuse_elementwise(*g);
  EXPECT_EQ(graph_ops(*g), (std::vector<std::string>{kFusedOp, "aten::div.Tensor_mode", kFusedOp}));
  EXPECT_TRUE(well_formed(*g));
}

// ---- Devices: a kernel runs on one CPU or CUDA device ------------------------------------------

TEST(FuseElementwiseTest, ChainOnACudaDeviceBecomesOneFusedNode) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4,8]@cuda, %y : f32[4,8]@cuda, %b : f32[8]@cuda):\n"
      "  %t : f32[4,8]@cuda = aten::mul.Tensor(%x, %y)\n"
      "  %u : f32[4,8]@cuda = aten::add.Tensor(%t, %b) {alpha=1}\n"
      "  %r : f32[4,8]@cuda = aten::relu(%u)\n"
      "  return (%r)\n");
  EXPECT_EQ(fuse_elementwise(*g), 1);
  ASSERT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(g->nodes()[0]->op(), kFusedOp);
}

TEST(FuseElementwiseTest, AnOpMixingDevicesStaysWithATen) {
  // ATen lets a CPU 0-dim tensor be an operand of a CUDA op; a CUDA kernel cannot read it.
  auto g = ir::parse_graph(
      "graph(%x : f32[4,8]@cuda, %s : f32[]):\n"
      "  %t : f32[4,8]@cuda = aten::mul.Tensor(%x, %s)\n"
      "  %r : f32[4,8]@cuda = aten::relu(%t)\n"
      "  return (%r)\n");
  EXPECT_EQ(fuse_elementwise(*g), 1);
  EXPECT_EQ(graph_ops(*g), (std::vector<std::string>{"aten::mul.Tensor", kFusedOp}));
  EXPECT_EQ(body_ops(*g->nodes()[1]), (std::vector<std::string>{"aten::relu"}));
}

TEST(FuseElementwiseTest, MetaTensorsAreNotFused) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4,8]@meta):\n"
      "  %r : f32[4,8]@meta = aten::relu(%x)\n"
      "  return (%r)\n");
  EXPECT_EQ(fuse_elementwise(*g), 0);
}

TEST(FuseReductionsTest, SoftmaxOnACudaDeviceTakesItsProducerAndConsumer) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4,16]@cuda:1):\n"
      "  %s : f32[4,16]@cuda:1 = aten::mul.Scalar(%x) {other=2.0}\n"
      "  %p : f32[4,16]@cuda:1 = aten::softmax.int(%s) {dim=-1, dtype=None}\n"
      "  return (%p)\n");
  EXPECT_EQ(fuse_reductions(*g), 1);
  ASSERT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(body_ops(*g->nodes()[0]),
            (std::vector<std::string>{"aten::mul.Scalar", "aten::softmax.int"}));
}

// ---- Reduction fusion --------------------------------------------------------------------------

constexpr const char* kScaledSoftmaxGelu =
    "graph(%x : f32[4,16]):\n"
    "  %s : f32[4,16] = aten::mul.Scalar(%x) {other=2.0}\n"
    "  %p : f32[4,16] = aten::softmax.int(%s) {dim=-1, dtype=None}\n"
    "  %r : f32[4,16] = aten::gelu(%p) {approximate=\"none\"}\n"
    "  return (%r)\n";

TEST(FuseReductionsTest, SoftmaxTakesItsProducerAndConsumer) {
  auto g = ir::parse_graph(kScaledSoftmaxGelu);
  EXPECT_EQ(fuse_reductions(*g), 1);
  ASSERT_EQ(g->num_nodes(), 1u);
  const ir::Node* fused = g->nodes()[0];
  EXPECT_EQ(body_ops(*fused),
            (std::vector<std::string>{"aten::mul.Scalar", "aten::softmax.int", "aten::gelu"}));
  EXPECT_EQ(string_attr(*fused, "reduction"), "aten::softmax.int");
  EXPECT_TRUE(well_formed(*g));
}

TEST(FuseReductionsTest, PrintedGroupIsTaggedWithItsReduction) {
  auto g = ir::parse_graph(kScaledSoftmaxGelu);
  fuse_reductions(*g);
  EXPECT_TRUE(matches_checks(ir::print_graph(*g), R"(
    CHECK: %r : f32[4,16] = kiln::fused(%x) {reduction="aten::softmax.int"}
    CHECK: aten::mul.Scalar
    CHECK: aten::softmax.int
    CHECK: aten::gelu
  )"));
}

TEST(FuseReductionsTest, LayerNormTakesItsAffineParamsAndActivation) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4,8], %w : f32[8], %b : f32[8], %res : f32[4,8]):\n"
      "  %h : f32[4,8] = aten::add.Tensor(%x, %res) {alpha=1}\n"
      "  %y : f32[4,8] = aten::layer_norm(%h, %w, %b) {normalized_shape=[8], eps=1e-05, "
      "cudnn_enable=true}\n"
      "  %r : f32[4,8] = aten::relu(%y)\n"
      "  return (%r)\n");
  EXPECT_EQ(fuse_reductions(*g), 1);
  ASSERT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(string_attr(*g->nodes()[0], "reduction"), "aten::layer_norm");
  EXPECT_EQ(g->nodes()[0]->inputs().size(), 4u);
  EXPECT_TRUE(well_formed(*g));
}

TEST(FuseReductionsTest, RowConsumerOfASumJoinsTheGroup) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4,8]):\n"
      "  %s : f32[4] = aten::sum.dim_IntList(%x) {dim=[1], keepdim=false, dtype=None}\n"
      "  %t : f32[4] = aten::mul.Scalar(%s) {other=2}\n"
      "  return (%t)\n");
  EXPECT_EQ(fuse_reductions(*g), 1);
  ASSERT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(body_ops(*g->nodes()[0]),
            (std::vector<std::string>{"aten::sum.dim_IntList", "aten::mul.Scalar"}));
  EXPECT_TRUE(well_formed(*g));
}

TEST(FuseReductionsTest, DroppedDimsDoNotMeetWholeRows) {
  // x - x.sum(1) on [5,5] broadcasts the sums along the wrong axis: the sub stays out.
  auto g = ir::parse_graph(
      "graph(%x : f32[5,5]):\n"
      "  %s : f32[5] = aten::sum.dim_IntList(%x) {dim=[1], keepdim=false, dtype=None}\n"
      "  %d : f32[5,5] = aten::sub.Tensor(%x, %s) {alpha=1}\n"
      "  return (%d)\n");
  EXPECT_EQ(fuse_reductions(*g), 1);
  ir::Node* reduction = group_with(*g, "aten::sum.dim_IntList");
  ASSERT_NE(reduction, nullptr);
  EXPECT_EQ(body_ops(*reduction), (std::vector<std::string>{"aten::sum.dim_IntList"}));
  EXPECT_EQ(graph_ops(*g), (std::vector<std::string>{kFusedOp, "aten::sub.Tensor"}));
  EXPECT_TRUE(well_formed(*g));
}

TEST(FuseReductionsTest, KeptDimsMeetWholeRows) {
  auto g = ir::parse_graph(
      "graph(%x : f32[5,5]):\n"
      "  %s : f32[5,1] = aten::sum.dim_IntList(%x) {dim=[1], keepdim=true, dtype=None}\n"
      "  %d : f32[5,5] = aten::sub.Tensor(%x, %s) {alpha=1}\n"
      "  return (%d)\n");
  EXPECT_EQ(fuse_reductions(*g), 1);
  ASSERT_EQ(g->num_nodes(), 1u);
  EXPECT_TRUE(well_formed(*g));
}

TEST(FuseReductionsTest, TwoSoftmaxesFormTwoGroups) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4,8]):\n"
      "  %p : f32[4,8] = aten::softmax.int(%x) {dim=-1, dtype=None}\n"
      "  %q : f32[4,8] = aten::softmax.int(%p) {dim=-1, dtype=None}\n"
      "  return (%q)\n");
  EXPECT_EQ(fuse_reductions(*g), 2);
  EXPECT_EQ(graph_ops(*g), (std::vector<std::string>{kFusedOp, kFusedOp}));
  EXPECT_TRUE(well_formed(*g));
}

// Batch norm's backward as AOTAutograd writes it: the relu's gradient, its sum per channel, the
// sum of it times x - mean, and (kBatchNormBackward) the input gradient, which the sums reach
// through unsqueezes to [1, C, 1, 1].
constexpr const char* kGradientSums =
    "  %z : f32[] = aten::scalar_tensor() {s=0}\n"
    "  %mask : b8[2,3,4,4] = aten::le.Scalar(%y) {other=0}\n"
    "  %dg : f32[2,3,4,4] = aten::where.self(%mask, %z, %g)\n"
    "  %a : f32[3] = aten::sum.dim_IntList(%dg) {dim=[0,2,3], keepdim=false, dtype=None}\n"
    "  %c : f32[2,3,4,4] = aten::sub.Tensor(%x, %m) {alpha=1}\n"
    "  %p : f32[2,3,4,4] = aten::mul.Tensor(%dg, %c)\n"
    "  %b : f32[3] = aten::sum.dim_IntList(%p) {dim=[0,2,3], keepdim=false, dtype=None}\n";

const std::string kBatchNormBackward =
    std::string(
        "graph(%y : f32[2,3,4,4], %g : f32[2,3,4,4], %x : f32[2,3,4,4], "
        "%m : f32[1,3,1,1], %w : f32[1,3,1,1]):\n") +
    kGradientSums +
    "  %bs : f32[3] = aten::mul.Scalar(%b) {other=0.03125}\n"
    "  %b1 : f32[1,3] = aten::unsqueeze(%bs) {dim=0}\n"
    "  %b2 : f32[1,3,1] = aten::unsqueeze(%b1) {dim=2}\n"
    "  %b3 : f32[1,3,1,1] = aten::unsqueeze(%b2) {dim=3}\n"
    "  %a4 : f32[1,3,1,1] = aten::view(%a) {size=[1,3,1,1]}\n"
    "  %t : f32[2,3,4,4] = aten::mul.Tensor(%c, %b3)\n"
    "  %u : f32[2,3,4,4] = aten::sub.Tensor(%dg, %t) {alpha=1}\n"
    "  %v : f32[2,3,4,4] = aten::sub.Tensor(%u, %a4) {alpha=1}\n"
    "  %dx : f32[2,3,4,4] = aten::mul.Tensor(%v, %w)\n"
    "  return (%a, %b, %dx)\n";

TEST(FuseReductionsTest, SiblingSumsOfBatchNormsBackwardShareOneGroup) {
  // One kernel reads g, the mask's input and x once for both sums.
  auto g =
      ir::parse_graph(std::string("graph(%y : f32[2,3,4,4], %g : f32[2,3,4,4], %x : f32[2,3,4,4], "
                                  "%m : f32[1,3,1,1]):\n") +
                      kGradientSums +
                      "  %r : f32[3] = aten::mul.Tensor(%a, %b)\n"
                      "  return (%a, %r)\n");
  EXPECT_EQ(fuse_reductions(*g), 1);
  ir::Node* group = group_with(*g, "aten::sum.dim_IntList");
  ASSERT_NE(group, nullptr);
  const auto ops = body_ops(*group);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "aten::sum.dim_IntList"), 2) << ir::print_graph(*g);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "aten::mul.Tensor"), 2) << ir::print_graph(*g);
  EXPECT_TRUE(well_formed(*g));
}

TEST(FuseReductionsTest, UnsqueezedSumsScaleWholeRowsInTheSameGroup) {
  auto g = ir::parse_graph(kBatchNormBackward);
  EXPECT_EQ(fuse_reductions(*g), 1);
  EXPECT_EQ(graph_ops(*g), (std::vector<std::string>{"aten::scalar_tensor", kFusedOp}))
      << ir::print_graph(*g);
  EXPECT_TRUE(well_formed(*g));
}

TEST(FuseReductionsTest, AViewTheGraphReturnsOrThatMissesTheKeptDimsStaysOut) {
  // Returned: the view (and what reads it) stays outside.
  std::string returned = kBatchNormBackward;
  const std::string ret = "return (%a, %b, %dx)";
  returned.replace(returned.find(ret), ret.size(), "return (%a, %b, %dx, %b3)");
  auto g = ir::parse_graph(returned);
  EXPECT_EQ(fuse_reductions(*g), 1);
  ir::Node* group = group_with(*g, "aten::sum.dim_IntList");
  ASSERT_NE(group, nullptr);
  auto ops = body_ops(*group);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "aten::unsqueeze"), 2) << ir::print_graph(*g);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "aten::mul.Tensor"), 1) << ir::print_graph(*g);
  EXPECT_TRUE(well_formed(*g));
  // Per channel of [2, 3, 3, 4], viewed as [1, 1, 3, 1]: it broadcasts, but along H. The view
  // joins (as a reduced value, written out for the sub), the sub does not.
  g = ir::parse_graph(
      "graph(%x : f32[2,3,3,4]):\n"
      "  %s : f32[3] = aten::sum.dim_IntList(%x) {dim=[0,2,3], keepdim=false, dtype=None}\n"
      "  %v : f32[1,1,3,1] = aten::view(%s) {size=[1,1,3,1]}\n"
      "  %d : f32[2,3,3,4] = aten::sub.Tensor(%x, %v) {alpha=1}\n"
      "  return (%d)\n");
  EXPECT_EQ(fuse_reductions(*g), 1);
  EXPECT_EQ(graph_ops(*g), (std::vector<std::string>{kFusedOp, "aten::sub.Tensor"}))
      << ir::print_graph(*g);
  EXPECT_TRUE(well_formed(*g));
}

TEST(FuseReductionsTest, VarAndMeanOfOneTensorShareOneGroup) {
  // Neither reads the other: they meet through the tensor they both reduce.
  auto g = ir::parse_graph(
      "graph(%x : f32[4,8]):\n"
      "  %v : f32[4] = aten::var.correction(%x) {dim=[1], correction=1, keepdim=false}\n"
      "  %m : f32[4] = aten::mean.dim(%x) {dim=[1], keepdim=false, dtype=None}\n"
      "  %lo : f32[4] = aten::amin(%x) {dim=[1], keepdim=false}\n"
      "  return (%v, %m, %lo)\n");
  EXPECT_EQ(fuse_reductions(*g), 1);
  EXPECT_EQ(graph_ops(*g), (std::vector<std::string>{kFusedOp}));
  EXPECT_TRUE(well_formed(*g));
}

TEST(FuseReductionsTest, ReductionsThatDifferInDimsShapeOrKeepdimFormSeparateGroups) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4,8], %y : f32[8,4]):\n"
      "  %a : f32[4] = aten::sum.dim_IntList(%x) {dim=[1], keepdim=false, dtype=None}\n"
      "  %b : f32[8] = aten::sum.dim_IntList(%x) {dim=[0], keepdim=false, dtype=None}\n"
      "  %c : f32[4,1] = aten::sum.dim_IntList(%x) {dim=[1], keepdim=true, dtype=None}\n"
      "  %t : f32[4,8] = aten::permute(%y) {dims=[1,0]}\n"
      "  %d : f32[8] = aten::amax(%y) {dim=[1], keepdim=false}\n"
      "  %p : f32[4,8] = aten::softmax.int(%x) {dim=1, dtype=None}\n"
      "  return (%a, %b, %c, %d, %p, %t)\n");
  EXPECT_EQ(fuse_reductions(*g), 5);
  EXPECT_TRUE(well_formed(*g));
}

// ---- Epilogue fusion ---------------------------------------------------------------------------

constexpr const char* kLinearAddGelu =
    "graph(%x : f32[32,16], %w : f32[8,16], %bias : f32[8], %res : f32[32,8]):\n"
    "  %y : f32[32,8] = aten::linear(%x, %w, %bias)\n"
    "  %z : f32[32,8] = aten::add.Tensor(%y, %res) {alpha=1}\n"
    "  %r : f32[32,8] = aten::gelu(%z) {approximate=\"none\"}\n"
    "  return (%r)\n";

TEST(FuseEpilogueTest, LinearAddGeluGroupIsTaggedWithTheLinear) {
  auto g = ir::parse_graph(kLinearAddGelu);
  EXPECT_EQ(fuse_epilogue(*g), 1);
  EXPECT_EQ(graph_ops(*g), (std::vector<std::string>{"aten::linear", kFusedOp}));
  const ir::Node* fused = g->nodes()[1];
  EXPECT_EQ(string_attr(*fused, "epilogue"), "aten::linear");
  EXPECT_EQ(body_ops(*fused), (std::vector<std::string>{"aten::add.Tensor", "aten::gelu"}));
  EXPECT_EQ(fused->input(0), g->nodes()[0]->output());
  EXPECT_TRUE(well_formed(*g));
}

TEST(FuseEpilogueTest, PrintedGroupFollowsTheLinear) {
  auto g = ir::parse_graph(kLinearAddGelu);
  fuse_epilogue(*g);
  EXPECT_TRUE(matches_checks(ir::print_graph(*g), R"(
    CHECK: %y : f32[32,8] = aten::linear(%x, %w, %bias)
    CHECK: %r : f32[32,8] = kiln::fused(%y, %res) {epilogue="aten::linear"}
    CHECK: aten::add.Tensor
    CHECK: aten::gelu
  )"));
}

TEST(FuseReductionsTest, BatchOneLinearIsAContractionWithItsActivation) {
  auto g = ir::parse_graph(
      "graph(%x : f32[1,16], %w : f32[8,16], %bias : f32[8]):\n"
      "  %y : f32[1,8] = aten::linear(%x, %w, %bias)\n"
      "  %r : f32[1,8] = aten::relu(%y)\n"
      "  return (%r)\n");
  EXPECT_EQ(fuse_reductions(*g), 1);
  ASSERT_EQ(graph_ops(*g), (std::vector<std::string>{kFusedOp}));
  EXPECT_EQ(string_attr(*g->nodes()[0], "reduction"), "aten::linear");
  const kernel::Kernel k = kernel::lower_group(*g->nodes()[0]->subgraph(), "gemv");
  EXPECT_EQ(k.sizes, (std::vector<int64_t>{1, 8, 16}));
  EXPECT_EQ(k.reduce_rank, 1);
}

TEST(FuseEpilogueTest, NoGemmMeansNoEpilogue) {
  auto g = ir::parse_graph(kChain);
  EXPECT_EQ(fuse_epilogue(*g), 0);
  EXPECT_TRUE(fused_nodes(*g).empty());
}

// ---- The pipeline ------------------------------------------------------------------------------

TEST(PipelineTest, FusesByDefault) {
  auto g = ir::parse_graph(kLinearAddGelu);
  const PipelineResult result = run_pipeline(*g, PipelineOptions{});
  EXPECT_EQ(graph_ops(*g), (std::vector<std::string>{"aten::linear", kFusedOp}));
  EXPECT_EQ(string_attr(*g->nodes()[1], "epilogue"), "aten::linear");
  const auto& run = result.passes_run;
  EXPECT_NE(std::find(run.begin(), run.end(), "fuse_epilogue"), run.end());
}

constexpr const char* kCudaChain =
    "graph(%x : f32[4,8]@cuda:0, %y : f32[4,8]@cuda:0):\n"
    "  %t : f32[4,8]@cuda:0 = aten::mul.Tensor(%x, %y)\n"
    "  %r : f32[4,8]@cuda:0 = aten::relu(%t)\n"
    "  return (%r)\n";

TEST(PipelineTest, GroupsOnThePlansDeviceBecomeKernels) {
  auto g = ir::parse_graph(kCudaChain);
  PipelineOptions options;
  options.device = {ir::DeviceKind::CUDA, -1};  // the current CUDA device matches cuda:0
  const PipelineResult result = run_pipeline(*g, options);
  EXPECT_EQ(result.kernels.size(), 1u);
  EXPECT_EQ(graph_ops(*g), (std::vector<std::string>{kFusedOp}));
}

TEST(PipelineTest, GroupsOnAnotherDeviceRunOpByOp) {
  // A CPU plan whose region moved values to a GPU: its LLVM kernels cannot read them.
  auto g = ir::parse_graph(kCudaChain);
  const PipelineResult result = run_pipeline(*g, PipelineOptions{});
  EXPECT_TRUE(result.kernels.empty());
  EXPECT_EQ(graph_ops(*g), (std::vector<std::string>{"aten::mul.Tensor", "aten::relu"}));
  ASSERT_EQ(result.unfused.size(), 1u);
  EXPECT_EQ(result.unfused[0], "its tensors are on cuda:0, and this plan's kernels run on cpu");
}

TEST(PipelineTest, DisablingFusionLeavesTheGraphUnfused) {
  auto g = ir::parse_graph(kScaledSoftmaxGelu);
  PipelineOptions options;
  options.disabled = {"fusion"};
  const PipelineResult result = run_pipeline(*g, options);
  EXPECT_TRUE(fused_nodes(*g).empty());
  EXPECT_EQ(g->num_nodes(), 3u);
  for (const std::string& name : result.passes_run)
    EXPECT_FALSE(name.starts_with("fuse_")) << name;
}

TEST(PipelineTest, FusionOptionOffLeavesTheGraphUnfused) {
  auto g = ir::parse_graph(kScaledSoftmaxGelu);
  PipelineOptions options;
  options.fusion = false;
  const PipelineResult result = run_pipeline(*g, options);
  EXPECT_TRUE(fused_nodes(*g).empty());
  EXPECT_EQ(g->num_nodes(), 3u);
  for (const std::string& name : result.passes_run)
    EXPECT_FALSE(name.starts_with("fuse_")) << name;
}

TEST(PipelineTest, DisablingOneFuserLeavesTheOthers) {
  // Without fuse_epilogue, fuse_elementwise still takes add + gelu, untagged.
  auto g = ir::parse_graph(kLinearAddGelu);
  PipelineOptions options;
  options.disabled = {"fuse_epilogue"};
  run_pipeline(*g, options);
  EXPECT_EQ(graph_ops(*g), (std::vector<std::string>{"aten::linear", kFusedOp}));
  EXPECT_EQ(string_attr(*g->nodes()[1], "epilogue"), "<none>");
}

TEST(PipelineTest, PassNamesListTheFusersInOrder) {
  const auto& names = pipeline_pass_names();
  auto at = [&](const std::string& name) {
    return std::find(names.begin(), names.end(), name) - names.begin();
  };
  const auto n = static_cast<std::ptrdiff_t>(names.size());
  ASSERT_LT(at("fuse_reductions"), n);
  ASSERT_LT(at("fuse_epilogue"), n);
  ASSERT_LT(at("fuse_elementwise"), n);
  EXPECT_LT(at("fuse_reductions"), at("fuse_epilogue"));
  EXPECT_LT(at("fuse_epilogue"), at("fuse_elementwise"));
}

TEST(PipelineTest, PassesRunFollowPassNamesOrder) {
  auto g = ir::parse_graph(kScaledSoftmaxGelu);
  const PipelineResult result = run_pipeline(*g, PipelineOptions{});
  const auto& names = pipeline_pass_names();
  std::ptrdiff_t previous = -1;
  for (const std::string& name : result.passes_run) {
    const auto at = std::find(names.begin(), names.end(), name) - names.begin();
    ASSERT_LT(at, static_cast<std::ptrdiff_t>(names.size())) << name << " is not listed";
    EXPECT_GT(at, previous) << name;
    previous = at;
  }
}

}  // namespace
}  // namespace kiln
