// snapshot_lists: a list appended to in straight-line code and read between the appends
// (scripted DenseNet's features) gives each read a list of what it holds then; lists that a
// loop, a call or the return could see keep their appends.
#include "backend/capture/snapshot_lists.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/torchscript_ir.h"

namespace kiln {
namespace {

using testing::count_ops;
using testing::parse_torchscript;
using testing::run_graph;

TEST(SnapshotLists, EachReadBetweenAppendsTakesWhatTheListHoldsThen) {
  auto graph = parse_torchscript(R"IR(
graph(%x : Tensor):
  %one : int = prim::Constant[value=1]()
  %features : Tensor[] = prim::ListConstruct(%x)
  %c1 : Tensor = aten::cat(%features, %one)
  %f1 : Tensor = aten::relu(%c1)
  %a1 : Tensor[] = aten::append(%features, %f1)
  %c2 : Tensor = aten::cat(%features, %one)
  %f2 : Tensor = aten::neg(%c2)
  %a2 : Tensor[] = aten::append(%features, %f2)
  %c3 : Tensor = aten::cat(%features, %one)
  %n : int = aten::len(%features)
  %out : Tensor = aten::mul(%c3, %n)
  return (%out))IR");
  const std::vector<at::Tensor> inputs = {at::randn({2, 3})};
  const at::Tensor expected = run_graph(graph->copy(), inputs).at(0);
  EXPECT_EQ(snapshot_lists(*graph), 1) << *graph;
  EXPECT_EQ(count_ops(*graph, "aten::append"), 0) << *graph;
  EXPECT_EQ(count_ops(*graph, "prim::ListConstruct"), 4) << *graph;  // one per read
  EXPECT_TRUE(at::equal(run_graph(graph, inputs).at(0), expected));
}

TEST(SnapshotLists, ListsSomethingElseCouldSeeKeepTheirAppends) {
  for (const char* text : {
           // Returned: the caller gets the list itself.
           R"IR(
graph(%x : Tensor):
  %l : Tensor[] = prim::ListConstruct(%x)
  %a : Tensor[] = aten::append(%l, %x)
  return (%l))IR",
           // The append's result is read.
           R"IR(
graph(%x : Tensor):
  %one : int = prim::Constant[value=1]()
  %l : Tensor[] = prim::ListConstruct(%x)
  %a : Tensor[] = aten::append(%l, %x)
  %c : Tensor = aten::cat(%a, %one)
  return (%c))IR",
           // Appended to inside a loop.
           R"IR(
graph(%x : Tensor):
  %one : int = prim::Constant[value=1]()
  %true : bool = prim::Constant[value=1]()
  %l : Tensor[] = prim::ListConstruct(%x)
  %r : Tensor = prim::Loop(%one, %true, %x)
    block0(%i : int, %y : Tensor):
      %a : Tensor[] = aten::append(%l, %y)
      -> (%true, %y)
  %c : Tensor = aten::cat(%l, %one)
  return (%c))IR",
           // Read by an op that returns a list (it could be this one).
           R"IR(
graph(%x : Tensor):
  %one : int = prim::Constant[value=1]()
  %l : Tensor[] = prim::ListConstruct(%x)
  %m : Tensor[] = aten::list(%l)
  %a : Tensor[] = aten::append(%l, %x)
  %c : Tensor = aten::cat(%m, %one)
  return (%c))IR",
       }) {
    auto graph = parse_torchscript(text);
    EXPECT_EQ(snapshot_lists(*graph), 0) << *graph;
  }
}

}  // namespace
}  // namespace kiln
