// The fusible ops' definitions (passes/kernel/op_lowering.h): one per op, each with its graph-IR
// row, and the reduced dims they declare agree with the op table's kinds.
#include "passes/kernel/op_lowering.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "passes/ir/op_table.h"
#include "passes/kernel/lower_ops.h"

namespace kiln::kernel {
namespace {

TEST(OpLoweringTest, EveryDefinitionHasItsOpTableRowAndAKindThatFitsItsReducedDims) {
  const std::vector<const OpLowering*> all = op_lowerings();
  ASSERT_GE(all.size(), 75u);
  for (const OpLowering* op : all) {
    SCOPED_TRACE(std::string(op->name));
    const ir::OpInfo* info = ir::find_op(op->name);
    ASSERT_NE(info, nullptr) << "no row in passes/ir/op_table.cpp";
    ASSERT_TRUE(op->lower);
    const bool reduces =
        info->kind == ir::OpKind::Reduction || info->kind == ir::OpKind::Normalization;
    switch (op->reduced) {
      case ReducedDims::None:
        EXPECT_FALSE(reduces);
        break;
      case ReducedDims::LastDim:
        EXPECT_EQ(info->kind, ir::OpKind::Gemm);  // a linear computed as a contraction
        break;
      case ReducedDims::All:
      case ReducedDims::DimAttr:
      case ReducedDims::NormalizedShape:
        EXPECT_TRUE(reduces);
        break;
    }
  }
}

TEST(OpLoweringTest, LoweredOpsAreTheDefinitionsNamesSortedAndDistinct) {
  const std::vector<std::string> names = lowered_ops();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  EXPECT_EQ(names.size(), op_lowerings().size());
  EXPECT_NE(find_op_lowering("aten::layer_norm"), nullptr);
  EXPECT_EQ(find_op_lowering("aten::conv2d"), nullptr);  // ATen's, never fused
}

}  // namespace
}  // namespace kiln::kernel
