// Kernels that write their output over an input that dies there, end to end: the plan says it
// happened, and the results equal ATen's.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "backend/api/compile_graph.h"
#include "kiln/options.h"
#include "passes/ir/parser.h"
#include "runtime/executor.h"

namespace kiln {
namespace {

std::shared_ptr<CompiledRegion> compile_text(const std::string& text) {
  CompileOptions options;
  options.strict = true;
  return compile_graph(ir::parse_graph(text), {}, c10::Device(c10::kCPU), options, "in_place",
                       /*plan_memory=*/true);
}

// The epilogue kernel after the first mm reads its product (an arena buffer that dies there) and
// writes b over it; the second epilogue writes d over c the same way. (tanh: an activation the
// product's own oneDNN primitive does not apply, so it stays a kernel; the bias add goes into
// that primitive where the runtime has it, or into the kernel.)
const char* kTwoLayers = R"IR(
graph(%x : f32[64,32], %w : f32[32,32], %v : f32[32,32], %bias : f32[32]):
  %a : f32[64,32] = aten::mm(%x, %w)
  %t : f32[64,32] = aten::add.Tensor(%a, %bias) {alpha=1}
  %b : f32[64,32] = aten::tanh(%t)
  %c : f32[64,32] = aten::mm(%b, %v)
  %d : f32[64,32] = aten::tanh(%c)
  %e : f32[64,32] = aten::mm(%d, %w)
  return (%e)
)IR";

TEST(InPlace, EpilogueWritesOverTheGemmOutput) {
  auto region = compile_text(kTwoLayers);
  EXPECT_EQ(region->kernels, 2);
  EXPECT_EQ(region->plan.in_place_writes, 2);
  // a/b and c/d each take one buffer (b is alive while the mm writes c); without sharing, each
  // of the four would have its own.
  EXPECT_EQ(region->plan.arena_bytes, 2 * 64 * 32 * 4);
  EXPECT_EQ(region->plan.unshared_bytes, 4 * 64 * 32 * 4);

  auto x = at::randn({64, 32}), w = at::randn({32, 32}), v = at::randn({32, 32});
  auto bias = at::randn({32});
  auto expected = at::mm(at::tanh(at::mm(at::tanh(at::mm(x, w) + bias), v)), w);
  for (int call = 0; call < 2; ++call) {  // the second call reuses the arena
    auto out = run_plan(region->plan, {x, w, v, bias});
    EXPECT_TRUE(at::allclose(out.at(0), expected, 1e-4, 1e-5));
  }
}

TEST(InPlace, InputOfTheGraphIsNeverOverwritten) {
  auto region = compile_text(R"IR(
graph(%x : f32[32,32]):
  %a : f32[32,32] = aten::tanh(%x)
  %b : f32[32,32] = aten::mm(%a, %x)
  return (%b)
)IR");
  EXPECT_EQ(region->plan.in_place_writes, 0);
  auto x = at::randn({32, 32});
  const auto before = x.clone();
  run_plan(region->plan, {x});
  EXPECT_TRUE(x.equal(before));
}

}  // namespace
}  // namespace kiln
