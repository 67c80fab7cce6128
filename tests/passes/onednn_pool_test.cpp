// onednn_pool: aten::max_pool2d over a 4-D float32 or bf16 CPU tensor becomes
// kiln::onednn_max_pool2d, with both values of every pair spelled out; other pools stay.
#include <string>

#include <gtest/gtest.h>

#include "passes/ir/parser.h"
#include "passes/ir/printer.h"
#include "passes/onednn_pool.h"

namespace kiln {
namespace {

std::string pool(const std::string& type, const std::string& attrs) {
  return "graph(%x : " + type + "[1,8,9,9]{648,1,72,8}):\n  %y : " + type +
         "[1,8,4,4]{128,1,32,8} = aten::max_pool2d(%x) {" + attrs + "}\n  return (%y)\n";
}

TEST(OneDnnPoolTest, AMaxPoolBecomesKilnsWithEveryPairSpelledOut) {
  auto g = ir::parse_graph(
      pool("f32", "kernel_size=[3], stride=[], padding=[0,0], dilation=[1], ceil_mode=false"));
  EXPECT_EQ(onednn_pool(*g), 1);
  EXPECT_EQ(ir::print_graph(*g),
            "graph(%x : f32[1,8,9,9]{648,1,72,8}):\n"
            "  %y : f32[1,8,4,4]{128,1,32,8} = kiln::onednn_max_pool2d(%x) {kernel_size=[3,3], "
            "stride=[3,3], padding=[0,0], dilation=[1,1], ceil_mode=false}\n"
            "  return (%y)\n");
  g = ir::parse_graph(pool(
      "bf16", "kernel_size=[3,3], stride=[2,2], padding=[1,1], dilation=[1,1], ceil_mode=true"));
  EXPECT_EQ(onednn_pool(*g), 1);
}

TEST(OneDnnPoolTest, OtherTypesAndMalformedPoolsStay) {
  for (const std::string& text : {
           pool("i64",
                "kernel_size=[2,2], stride=[2,2], padding=[0,0], dilation=[1,1], "
                "ceil_mode=false"),
           pool("f64",
                "kernel_size=[2,2], stride=[2,2], padding=[0,0], dilation=[1,1], "
                "ceil_mode=false"),
           pool("f32",
                "kernel_size=[2,2,2], stride=[2,2], padding=[0,0], dilation=[1,1], "
                "ceil_mode=false"),
           pool("f32", "kernel_size=[2,2], stride=[2,2], padding=[0,0], dilation=[1,1]"),
       }) {
    auto g = ir::parse_graph(text);
    EXPECT_EQ(onednn_pool(*g), 0) << text;
    EXPECT_NE(ir::print_graph(*g).find("aten::max_pool2d"), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln
