// fold_cpu_devices: where every tensor is on the CPU and nothing can make one elsewhere, device
// reads of computed values fold (scripted MultiheadAttention's check of its operands); a graph
// that can move a tensor, or an input elsewhere, keeps them.
#include "backend/capture/fold_devices.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "support/torchscript_ir.h"

namespace kiln {
namespace {

int count(const torch::jit::Block* block, const char* op) {
  int n = 0;
  for (const torch::jit::Node* node : block->nodes()) {
    n += node->kind().toQualString() == std::string(op);
    for (const torch::jit::Block* inner : node->blocks())
      n += count(inner, op);
  }
  return n;
}

TEST(FoldCpuDevices, DeviceReadsOfComputedValuesFoldWhereEverythingStaysOnTheCpu) {
  auto graph = testing::parse_torchscript(R"IR(
graph(%self : Tensor, %x : Tensor, %flag : bool):
  %y : Tensor = aten::relu(%x)
  %r : Device = prim::If(%flag)
    block0():
      %d : Device = prim::device(%y)
      -> (%d)
    block1():
      %e : Device = prim::device(%x)
      -> (%e)
  return (%r))IR");
  EXPECT_TRUE(fold_cpu_devices(*graph, {at::zeros({2}), true})) << *graph;
  EXPECT_EQ(count(graph->block(), "prim::device"), 2) << "the reads stay, their uses do not";
  for (const torch::jit::Node* node : graph->nodes()) {
    if (node->kind() != c10::prim::If) continue;
    for (const torch::jit::Block* block : node->blocks()) {
      EXPECT_EQ(block->outputs()[0]->node()->kind(), c10::prim::Constant) << *graph;
    }
  }
}

TEST(FoldCpuDevices, AGraphThatCanMoveATensorKeepsItsDeviceReads) {
  const char* moves = R"IR(
graph(%self : Tensor, %x : Tensor):
  %cuda : Device = prim::Constant[value="cuda"]()
  %none : NoneType = prim::Constant()
  %false : bool = prim::Constant[value=0]()
  %y : Tensor = aten::to(%x, %cuda, %none, %false, %false)
  %d : Device = prim::device(%y)
  return (%d))IR";
  auto graph = testing::parse_torchscript(moves);
  EXPECT_FALSE(fold_cpu_devices(*graph, {at::zeros({2})})) << *graph;

  const char* reads = R"IR(
graph(%self : Tensor, %x : Tensor):
  %y : Tensor = aten::relu(%x)
  %d : Device = prim::device(%y)
  return (%d))IR";
  graph = testing::parse_torchscript(reads);
  EXPECT_FALSE(fold_cpu_devices(*graph, {at::zeros({2}, at::device(at::kMeta))})) << *graph;
}

}  // namespace
}  // namespace kiln
