// The passes' size decisions (passes/kernel/size_decisions.h): recorded in order with their
// outcomes under a recording on this thread, and only compared outside one; and the decisions
// the pipeline makes for a linear's rows, which a shape class keeps as guards.
#include "passes/kernel/size_decisions.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "passes/ir/parser.h"
#include "passes/kernel/lower_ops.h"

namespace kiln::kernel {
namespace {

TEST(SizeDecisions, AreRecordedInOrderWithTheirOutcomes) {
  EXPECT_TRUE(at_least(5, 5, "outside"));  // no recording: compared only
  RecordSizeDecisions outer;
  EXPECT_FALSE(at_least(3, 5, "a"));
  EXPECT_TRUE(at_most(4, 4, "b"));
  {
    RecordSizeDecisions inner;  // takes the decisions until it ends
    EXPECT_TRUE(at_least(9, 8, "c"));
    ASSERT_EQ(inner.decisions().size(), 1u);
    EXPECT_EQ(std::string(inner.decisions()[0].what), "c");
  }
  std::thread other([] { EXPECT_TRUE(at_least(1, 0, "another thread")); });
  other.join();
  ASSERT_EQ(outer.decisions().size(), 2u);
  EXPECT_EQ(outer.decisions()[0].value, 3);
  EXPECT_EQ(outer.decisions()[0].threshold, 5);
  EXPECT_FALSE(outer.decisions()[0].outcome);
  // at_most(4, 4) is recorded as !(4 >= 5).
  EXPECT_EQ(outer.decisions()[1].threshold, 5);
  EXPECT_FALSE(outer.decisions()[1].outcome);
}

TEST(SizeDecisions, ADifferenceIsRecordedWithBothSides) {
  // A gate's 32 values broadcast over a 32 x 12 x 12 map: 4576 extra elements, more than 4096.
  RecordSizeDecisions recording;
  EXPECT_FALSE(difference_at_most(32 * 144, 32, 4096, "extra"));
  EXPECT_TRUE(difference_at_most(32 * 128, 32, 4096, "extra"));
  ASSERT_EQ(recording.decisions().size(), 2u);
  const SizeDecision& d = recording.decisions()[0];
  EXPECT_EQ(d.value, 32 * 144);
  EXPECT_EQ(d.less, 32);
  EXPECT_EQ(d.threshold, 4097);  // recorded as !(value - less >= 4097)
  EXPECT_TRUE(d.outcome);
  EXPECT_FALSE(recording.decisions()[1].outcome);
}

TEST(SizeDecisions, ALinearsRowsDecideWhetherItIsAContraction) {
  auto linear = [](int rows) {
    return ir::parse_graph("graph(%x : f32[" + std::to_string(rows) +
                           ",64], %w : f32[32,64]):\n"
                           "  %y : f32[" +
                           std::to_string(rows) + ",32] = aten::linear(%x, %w)\n  return (%y)\n");
  };
  for (int rows : {4, 5}) {
    const auto graph = linear(rows);
    RecordSizeDecisions recording;
    EXPECT_EQ(is_contraction(*graph->nodes()[0]), rows <= 4);
    ASSERT_EQ(recording.decisions().size(), 1u);
    EXPECT_EQ(recording.decisions()[0].value, rows);
  }
}

}  // namespace
}  // namespace kiln::kernel
