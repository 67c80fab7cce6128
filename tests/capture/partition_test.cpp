// Partitioning TorchScript graphs (written as TorchScript IR text) into kiln regions.
#include <gtest/gtest.h>

#include "backend/capture/partition.h"
#include "support/torchscript_ir.h"

namespace kiln {
namespace {

using testing::parse_torchscript;

int count(const torch::jit::Block* block, c10::Symbol kind) {
  int n = 0;
  for (const auto* node : block->nodes()) {
    n += node->kind() == kind;
    for (const auto* inner : node->blocks())
      n += count(inner, kind);
  }
  return n;
}

TEST(Partition, StraightLineGraphIsOneRegion) {
  auto graph = parse_torchscript(R"IR(
graph(%x : Tensor, %y : Tensor):
  %one : int = prim::Constant[value=1]()
  %a : Tensor = aten::add(%x, %y, %one)
  %b : Tensor = aten::relu(%a)
  return (%b))IR");
  EXPECT_EQ(partition_into_regions(*graph), 1);
  graph->lint();
  EXPECT_EQ(count(graph->block(), c10::Symbol::fromQualString("aten::relu")), 0);
  EXPECT_EQ(count(graph->block(), region_symbol()), 1);
}

TEST(Partition, InterpreterNodeReadingTheRegionSplitsIt) {
  auto graph = parse_torchscript(R"IR(
graph(%x : Tensor):
  %a : Tensor = aten::relu(%x)
  %n : Scalar = aten::item(%a)
  %b : Tensor = aten::exp(%a)
  return (%b, %n))IR");
  EXPECT_EQ(partition_into_regions(*graph), 2);
  graph->lint();
}

// Size arithmetic on a region's value that only its ops read goes into the region; where the
// interpreter reads it too, it moves below the region, which must return the value it reads.
TEST(Partition, SizeArithmeticJoinsTheRegionThatReadsIt) {
  auto graph = parse_torchscript(R"IR(
graph(%x : Tensor):
  %zero : int = prim::Constant[value=0]()
  %minus : int = prim::Constant[value=-1]()
  %a : Tensor = aten::relu(%x)
  %n : int = aten::size(%a, %zero)
  %m : int = aten::mul(%n, %n)
  %shape : int[] = prim::ListConstruct(%m, %minus)
  %b : Tensor = aten::reshape(%a, %shape)
  %c : Tensor = aten::exp(%b)
  return (%c))IR");
  EXPECT_EQ(partition_into_regions(*graph), 1);
  graph->lint();
  EXPECT_EQ(count(graph->block(), c10::aten::size), 0);  // only the region's copy is left
  const torch::jit::Node* region = nullptr;
  for (const torch::jit::Node* node : graph->nodes())
    if (node->kind() == region_symbol()) region = node;
  ASSERT_NE(region, nullptr);
  EXPECT_EQ(region->outputs().size(), 1u);  // %a is no output: only its size is read
  EXPECT_EQ(count(region->g(c10::attr::Subgraph)->block(), c10::aten::size), 1);

  auto read_outside = parse_torchscript(R"IR(
graph(%x : Tensor):
  %zero : int = prim::Constant[value=0]()
  %a : Tensor = aten::relu(%x)
  %n : int = aten::size(%a, %zero)
  %b : Tensor = aten::exp(%a)
  return (%b, %n))IR");
  EXPECT_EQ(partition_into_regions(*read_outside), 1);
  read_outside->lint();
}

// Size arithmetic that reads the region moves below it, and still after what it reads that the
// region did not make (`%n0`, between the region's last member and the node that ends it).
TEST(Partition, SizeArithmeticMovedBelowTheRegionStaysAfterWhatItReads) {
  auto graph = parse_torchscript(R"IR(
graph(%x : Tensor, %y : Tensor):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %a : Tensor = aten::relu(%x)
  %n0 : int = aten::size(%y, %zero)
  %n1 : int = aten::size(%a, %one)
  %m : int = aten::mul(%n0, %n1)
  %s : str = aten::str(%m)
  %b : Tensor = aten::exp(%a)
  return (%b, %s))IR");
  EXPECT_EQ(partition_into_regions(*graph), 2);
  graph->lint();  // every value defined before its use
}

// An op the interpreter runs that changes a value in place ends the region before it: the
// region runs where its last member was, and its first members must not see the change.
TEST(Partition, AnInPlaceOpInTheInterpreterEndsTheRegion) {
  auto graph = parse_torchscript(R"IR(
graph(%x : Tensor, %y : Tensor):
  %zero : int = prim::Constant[value=0]()
  %a : Tensor = aten::relu(%x)
  %u : Tensor = aten::unsqueeze_(%x, %zero)
  %b : Tensor = aten::exp(%a)
  return (%b, %u))IR");
  EXPECT_EQ(partition_into_regions(*graph), 2);
  graph->lint();
}

TEST(Partition, IndependentInterpreterNodeDoesNotSplit) {
  auto graph = parse_torchscript(R"IR(
graph(%x : Tensor, %k : int):
  %a : Tensor = aten::relu(%x)
  %m : int = aten::mul(%k, %k)
  %b : Tensor = aten::exp(%a)
  return (%b, %m))IR");
  EXPECT_EQ(partition_into_regions(*graph), 1);
  graph->lint();
}

TEST(Partition, CatWithListBuiltOutsideJoinsTheRegion) {
  auto graph = parse_torchscript(R"IR(
graph(%x : Tensor, %y : Tensor):
  %zero : int = prim::Constant[value=0]()
  %a : Tensor = aten::relu(%x)
  %l : Tensor[] = prim::ListConstruct(%a, %y)
  %c : Tensor = aten::cat(%l, %zero)
  return (%c))IR");
  EXPECT_EQ(partition_into_regions(*graph), 1);
  graph->lint();
  EXPECT_EQ(count(graph->block(), c10::prim::ListConstruct), 0);
}

TEST(Partition, IndexWithNoneInItsIndicesJoinsTheRegion) {
  // x.relu()[:, i] is aten::index(x, [None, i]): a `Tensor?[]` list with a None constant.
  auto graph = parse_torchscript(R"IR(
graph(%x : Tensor, %i : Tensor):
  %none : NoneType = prim::Constant()
  %a : Tensor = aten::relu(%x)
  %l : Tensor?[] = prim::ListConstruct(%none, %i)
  %b : Tensor = aten::index(%a, %l)
  %c : Tensor = aten::exp(%b)
  return (%c))IR");
  EXPECT_EQ(partition_into_regions(*graph), 1);
  graph->lint();
  EXPECT_EQ(count(graph->block(), c10::prim::ListConstruct), 0);
  EXPECT_EQ(count(graph->block(), c10::Symbol::fromQualString("aten::index")), 0);
}

TEST(Partition, AnIndexListWithAnOptionalValueStaysOut) {
  // %o may be None or a tensor at run time; a region's list must be one or the other.
  auto graph = parse_torchscript(R"IR(
graph(%x : Tensor, %o : Tensor?):
  %l : Tensor?[] = prim::ListConstruct(%o)
  %b : Tensor = aten::index(%x, %l)
  return (%b))IR");
  EXPECT_EQ(partition_into_regions(*graph), 0);
  const torch::jit::Node* index = graph->outputs()[0]->node();
  EXPECT_EQ(interpreter_reason(index).value_or("<none>"),
            "argument 'indices' is a list with an element that may be None");
}

TEST(Partition, AMultiOutputInterpreterNodeAfterARegionSplitsIt) {
  // A split by a size known only at run time: the list check must not ask the two-output
  // ListUnpack for its output (traced ShuffleNetV2's ConstantChunk once hit that assert).
  auto graph = parse_torchscript(R"IR(
graph(%x : Tensor, %k : int):
  %zero : int = prim::Constant[value=0]()
  %a : Tensor = aten::relu(%x)
  %l : Tensor[] = aten::split(%a, %k, %zero)
  %b : Tensor, %c : Tensor = prim::ListUnpack(%l)
  %d : Tensor = aten::exp(%c)
  return (%b, %d))IR");
  EXPECT_EQ(partition_into_regions(*graph), 2);
  graph->lint();
}

TEST(Partition, SplitsUnpackedIntoPiecesJoinTheRegion) {
  auto graph = parse_torchscript(R"IR(
graph(%x : Tensor):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %four : int = prim::Constant[value=4]()
  %a : Tensor = aten::relu(%x)
  %b : Tensor, %c : Tensor = prim::ConstantChunk[chunks=2, dim=0](%a)
  %l : Tensor[] = aten::split(%c, %four, %one)
  %d : Tensor, %e : Tensor = prim::ListUnpack(%l)
  %u : Tensor[] = aten::unbind(%d, %zero)
  %f : Tensor, %g : Tensor = prim::ListUnpack(%u)
  %h : Tensor = aten::mul(%f, %g)
  %i : Tensor = aten::exp(%e)
  return (%b, %h, %i))IR");
  EXPECT_EQ(partition_into_regions(*graph), 1);
  graph->lint();
  EXPECT_EQ(count(graph->block(), c10::prim::ListUnpack), 0);
  EXPECT_EQ(count(graph->block(), c10::prim::ConstantChunk), 0);
}

TEST(Partition, ManyPathsToTheInputsAreWalkedOnce) {
  // 64 diamonds (x = relu(x) * exp(x)): 2^64 paths from the last node to the input. The oneDNN
  // check walked every path (EfficientNet-B0's squeeze-excitation blocks: 43 s to specialize).
  std::string text = "graph(%x0 : Tensor):\n";
  for (int i = 0; i < 64; ++i) {
    const std::string x = "%x" + std::to_string(i), n = std::to_string(i);
    text += "  %a" + n + " : Tensor = aten::relu(" + x + ")\n";
    text += "  %b" + n + " : Tensor = aten::exp(" + x + ")\n";
    text += "  %x" + std::to_string(i + 1) + " : Tensor = aten::mul(%a" + n + ", %b" + n + ")\n";
  }
  text += "  return (%x64)";
  auto graph = parse_torchscript(text);
  EXPECT_EQ(partition_into_regions(*graph), 1);
  graph->lint();
}

TEST(Partition, ControlFlowBodiesGetTheirOwnRegions) {
  auto graph = parse_torchscript(R"IR(
graph(%x : Tensor, %c : bool):
  %y : Tensor = prim::If(%c)
    block0():
      %a : Tensor = aten::relu(%x)
      -> (%a)
    block1():
      %b : Tensor = aten::exp(%x)
      -> (%b)
  return (%y))IR");
  EXPECT_EQ(partition_into_regions(*graph), 2);
  graph->lint();
}

TEST(Partition, ReasonsNameWhatKeepsANodeOut) {
  auto graph = parse_torchscript(R"IR(
graph(%x : Tensor, %y : Tensor, %k : int):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %n : int = aten::size(%x, %zero)
  %m : Tensor = aten::add_(%x, %y, %one)
  %v : Tensor = aten::mul(%x, %k)
  return (%n, %m, %v))IR");
  std::vector<std::string> reasons;
  for (const auto* node : graph->nodes()) {
    if (node->kind() == c10::prim::Constant) continue;
    reasons.push_back(interpreter_reason(node).value_or("<none>"));
  }
  ASSERT_EQ(reasons.size(), 3u);
  EXPECT_EQ(reasons[0], "returns a int, not a tensor");
  EXPECT_EQ(reasons[1], "mutates one of its inputs");
  EXPECT_EQ(reasons[2], "argument 'other' is not a constant");
}

}  // namespace
}  // namespace kiln
