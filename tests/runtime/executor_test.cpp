// The plan builder and executor on graphs written as IR text, checked against ATen.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <mutex>
#include <set>
#include <thread>

#include "kiln/error.h"
#include "passes/ir/parser.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"
#include "runtime/plan_builder.h"
#include "support/one_kernel_plan.h"

namespace kiln {
namespace {

Plan compile_text(const std::string& text, std::vector<at::Tensor> constants = {}) {
  auto graph = ir::parse_graph(text);
  PipelineOptions options;
  options.fusion = false;  // these tests are about extern steps; kernels are tested end to end
  options.can_write_into_buffer = can_write_into_buffer;
  auto result = run_pipeline(*graph, options);
  return build_plan(*graph, constants, result.memory, c10::Device(c10::kCPU));
}

const char* kChain = R"IR(
graph(%x : f32[64,32], %y : f32[64,32]):
  %a : f32[64,32] = aten::add.Tensor(%x, %y) {alpha=1}
  %b : f32[64,32] = aten::relu(%a)
  %c : f32[64,32] = aten::mul.Tensor(%b, %x)
  %d : f32[64,32] = aten::sigmoid(%c)
  %e : f32[64,32] = aten::sub.Tensor(%d, %y) {alpha=2}
  return (%e)
)IR";

TEST(Executor, ChainMatchesATen) {
  Plan plan = compile_text(kChain);
  auto x = at::randn({64, 32}), y = at::randn({64, 32});
  auto out = run_plan(plan, {x, y});
  ASSERT_EQ(out.size(), 1u);
  auto expected = at::sigmoid(at::relu(x + y) * x) - 2 * y;
  EXPECT_TRUE(at::allclose(out[0], expected));
}

TEST(Executor, IntermediatesShareTheArena) {
  Plan plan = compile_text(kChain);
  EXPECT_EQ(plan.planned.size(), 4u);  // a..d; e escapes (it is the output)
  EXPECT_LT(plan.arena_bytes, plan.unshared_bytes);
}

TEST(Executor, OutputsAreFreshTensors) {
  Plan plan = compile_text(kChain);
  auto x = at::randn({64, 32}), y = at::randn({64, 32});
  auto first = run_plan(plan, {x, y});
  auto second = run_plan(plan, {x, y});
  EXPECT_NE(first[0].data_ptr(), second[0].data_ptr());
  EXPECT_TRUE(first[0].equal(second[0]));
}

TEST(Executor, ConstantsAndTensorLists) {
  Plan plan = compile_text(R"IR(
graph(%x : f32[2,3]):
  %w : f32[2,3] = prim::Constant() {index=0}
  %c : f32[4,3] = aten::cat(%x, %w) {tensors=2, dim=0}
  %s : f32[3] = aten::sum.dim_IntList(%c) {dim=[0], keepdim=false, dtype=None}
  return (%s, %c)
)IR",
                           {at::ones({2, 3})});
  auto x = at::randn({2, 3});
  auto out = run_plan(plan, {x});
  EXPECT_TRUE(at::allclose(out[0], x.sum(0) + 2));
  EXPECT_TRUE(at::allclose(out[1], at::cat({x, at::ones({2, 3})})));
}

TEST(Executor, UnknownOperatorIsUnsupported) {
  try {
    compile_text("graph(%x : f32[2]):\n  %y : f32[2] = aten::no_such_op(%x)\n  return (%y)\n");
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("no operator 'aten::no_such_op'"), std::string::npos);
  }
}

TEST(Executor, FailingOpNamesItself) {
  Plan plan = compile_text(R"IR(
graph(%x : f32[2,3], %y : f32[3,4]):
  %z : f32[2,4] = aten::mm(%x, %y)
  return (%z)
)IR");
  try {
    run_plan(plan, {at::randn({2, 3}), at::randn({5, 4})});  // not the planned shape
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("aten::mm failed"), std::string::npos) << e.what();
  }
}

// A stand-in for a generated kernel: doubles its input and notes which threads ran it.
std::mutex threads_mutex;
std::set<std::thread::id> kernel_threads;

void double_and_record_thread(void* const* buffers, const int64_t*, int64_t begin, int64_t end) {
  {
    std::lock_guard lock(threads_mutex);
    kernel_threads.insert(std::this_thread::get_id());
  }
  const float* in = static_cast<const float*>(buffers[0]);
  float* out = static_cast<float*>(buffers[1]);
  for (int64_t i = begin; i < end; ++i)
    out[i] = in[i] * 2;
}

// at::parallel_for is a header template: in a file built without OpenMP its pragma is ignored
// and every kernel silently runs on the calling thread. The executor goes through run_parallel
// (runtime/parallel.h), built with it.
TEST(Executor, KernelStepsRunOnTorchsThreadPool) {
  if (at::get_num_threads() < 2) GTEST_SKIP() << "needs at least 2 intra-op threads";
  constexpr int64_t n = 1 << 20;
  const Plan plan = testing::one_kernel_plan(double_and_record_thread, n, 1024, "double");
  kernel_threads.clear();
  const at::Tensor x = at::randn({n});
  const std::vector<at::Tensor> out = run_plan(plan, {x});
  EXPECT_TRUE(at::equal(out.at(0), x * 2));
  EXPECT_GE(kernel_threads.size(), 2u);
}

// View ops become as_strided of their input (no boxed call); the results alias the input and
// equal ATen's views, including offsets (select, slice) and views of views. An input with
// another layout than the plan was built for (a transposed x) takes the boxed call, whose
// result is still ATen's.
TEST(Executor, ViewStepsMatchATensViews) {
  Plan plan = compile_text(R"IR(
graph(%x : f32[2,6,4]):
  %u : f32[2,6,2,2] = aten::unflatten.int(%x) {dim=-1, sizes=[2,2]}
  %p : f32[2,2,2,6]{24,1,2,4} = aten::permute(%u) {dims=[0,3,2,1]}
  %s : f32[2,2,6]{24,2,4} = aten::select.int(%p) {dim=1, index=1}
  %t : f32[2,2,3]{24,2,8} = aten::slice.Tensor(%s) {dim=2, start=1, end=6, step=2}
  return (%t, %p)
)IR");
  int views = 0;
  for (const Step& step : plan.steps)
    if (const auto* e = std::get_if<ExternStep>(&step)) views += e->view.has_value();
  EXPECT_EQ(views, 4);
  auto expect_views_of = [&](const at::Tensor& x) {
    auto out = run_plan(plan, {x});
    const at::Tensor p = x.unflatten(-1, {2, 2}).permute({0, 3, 2, 1});
    const at::Tensor t = p.select(1, 1).slice(2, 1, 6, 2);
    EXPECT_TRUE(out[0].equal(t));
    EXPECT_TRUE(out[1].equal(p));
    EXPECT_TRUE(out[0].is_alias_of(x));
  };
  at::Tensor base = at::randn({3, 2, 6, 4});
  expect_views_of(base[1]);  // a storage offset of its own
  at::Tensor same_values_other_layout = at::randn({2, 4, 6}).transpose(1, 2);
  expect_views_of(same_values_other_layout);
}

// ATen picks an upsampling's output layout from its input's strides, those of size-1 dims
// included, which the IR's types leave open: a [3, 8, 1, 1] map strided as channels-last (what a
// CPU convolution returns) comes back upsampled channels-last. The executor copies it into the
// contiguous layout the graph says, which the view after it needs.
TEST(Executor, FreshOutputsTakeTheirTypesLayout) {
  Plan plan = compile_text(R"IR(
graph(%x : f32[3,8,1,1]):
  %u : f32[3,8,2,2] = aten::upsample_nearest2d.vec(%x) {output_size=None, scale_factors=[2.0,2.0]}
  %v : f32[3,32] = aten::view(%u) {size=[3,32]}
  return (%v)
)IR");
  const at::Tensor x = at::randn({3, 8, 1, 1}).as_strided({3, 8, 1, 1}, {8, 1, 8, 8});
  ASSERT_TRUE(at::upsample_nearest2d(x, std::nullopt, std::vector<double>{2.0, 2.0})
                  .is_contiguous(at::MemoryFormat::ChannelsLast));
  auto out = run_plan(plan, {x});
  const at::Tensor expected =
      at::upsample_nearest2d(x, std::nullopt, std::vector<double>{2.0, 2.0}).reshape({3, 32});
  EXPECT_TRUE(out[0].equal(expected));
}

}  // namespace
}  // namespace kiln
