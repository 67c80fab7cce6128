// Checked runs (KILN_DEBUG=bounds): a kernel that writes outside its buffer is named, a correct
// plan gives the results it gives unchecked.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "backend/api/compile_graph.h"
#include "kiln/error.h"
#include "kiln/options.h"
#include "passes/ir/parser.h"
#include "runtime/bounds_check.h"
#include "runtime/executor.h"
#include "support/one_kernel_plan.h"

namespace kiln {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal);
    return e.what();
  }
  return "";
}

TEST(BoundsCheck, ABufferStartsPoisonedAndAligned) {
  GuardedBuffers guarded;
  at::Tensor t = guarded.allocate(ir::make_contiguous(ir::DType::Float32, {4, 5}),
                                  c10::Device(c10::kCPU), "t");
  EXPECT_EQ(t.sizes(), at::IntArrayRef({4, 5}));
  EXPECT_TRUE(t.isnan().all().item<bool>());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64, 0u);
  t.fill_(1);  // every byte of the buffer, none outside it
  EXPECT_EQ(error_of([&] { guarded.check_after("fill"); }), "");
}

TEST(BoundsCheck, AWriteOnEitherSideIsNamed) {
  GuardedBuffers guarded;
  const auto type = ir::make_contiguous(ir::DType::Float32, {4, 5});
  at::Tensor past = guarded.allocate(type, c10::Device(c10::kCPU), "the buffer past");
  past.data_ptr<float>()[20] = 0;  // the element right after the last
  EXPECT_NE(error_of([&] { guarded.check_after("step"); })
                .find("after step step, the guard band of the buffer past (80 bytes) was "
                      "written at byte 1 past its end"),
            std::string::npos);

  GuardedBuffers other;
  at::Tensor before = other.allocate(type, c10::Device(c10::kCPU), "the buffer before");
  static_cast<uint8_t*>(before.data_ptr())[-3] = 0;
  EXPECT_NE(error_of([&] { other.check_after("s"); }).find("at byte 3 before its start"),
            std::string::npos);
}

// A stand-in for a generated kernel that writes one element too many.
void copy_one_too_many(void* const* buffers, const int64_t*, int64_t begin, int64_t end) {
  const float* in = static_cast<const float*>(buffers[0]);
  float* out = static_cast<float*>(buffers[1]);
  for (int64_t i = begin; i < end; ++i)
    out[i] = in[i];
  if (end == 64) out[64] = 0;
}

void copy(void* const* buffers, const int64_t*, int64_t begin, int64_t end) {
  const float* in = static_cast<const float*>(buffers[0]);
  float* out = static_cast<float*>(buffers[1]);
  for (int64_t i = begin; i < end; ++i)
    out[i] = in[i];
}

Plan copy_plan(KernelFunction function) {
  return testing::one_kernel_plan(function, 64, 64, "copy");
}

TEST(BoundsCheck, ACheckedRunNamesTheKernelThatWroteTooFar) {
  const at::Tensor x = at::randn({64});
  // (Unchecked, the stray write would land past the output's end, unseen.)
  Plan rogue = copy_plan(copy_one_too_many);
  const std::string error = error_of([&] { run_plan(rogue, {x}, /*check_bounds=*/true); });
  EXPECT_NE(error.find("KILN_DEBUG=bounds: after step copy, the guard band of output 0 of copy"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("at byte 1 past its end"), std::string::npos) << error;

  Plan correct = copy_plan(copy);
  EXPECT_TRUE(run_plan(correct, {x}, /*check_bounds=*/true).at(0).equal(x));
}

// Planned intermediates, in-place writes and extern steps writing into planned buffers: in a
// checked run each has a buffer of its own, and the results are the unchecked run's.
TEST(BoundsCheck, ACheckedRunOfACompiledPlanGivesItsResults) {
  CompileOptions options;
  options.strict = true;
  auto region = compile_graph(ir::parse_graph(R"IR(
graph(%x : f32[64,32], %w : f32[32,32], %bias : f32[32]):
  %a : f32[64,32] = aten::mm(%x, %w)
  %t : f32[64,32] = aten::add.Tensor(%a, %bias) {alpha=1}
  %b : f32[64,32] = aten::tanh(%t)
  %c : f32[64,32] = aten::mm(%b, %w)
  %s : f32[64] = aten::sum.dim_IntList(%c) {dim=[1], keepdim=false, dtype=None}
  return (%s)
)IR"),
                              {}, c10::Device(c10::kCPU), options, "checked", /*plan_memory=*/true);
  ASSERT_GT(region->kernels, 0);
  ASSERT_FALSE(region->plan.planned.empty());
  auto x = at::randn({64, 32}), w = at::randn({32, 32}), bias = at::randn({32});
  auto unchecked = run_plan(region->plan, {x, w, bias}, false);
  auto checked = run_plan(region->plan, {x, w, bias}, true);
  EXPECT_TRUE(checked.at(0).equal(unchecked.at(0)));
}

}  // namespace
}  // namespace kiln
