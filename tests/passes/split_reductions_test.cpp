// split_reductions: the pass records the target's piece count on each kernel; the pipeline runs
// it after lower_kernels, only when the target gives a count.
#include "passes/split_reductions.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "passes/ir/parser.h"
#include "passes/pipeline.h"

namespace kiln {
namespace {

kernel::Kernel reduction(std::vector<int64_t> sizes, int reduce_rank) {
  kernel::Kernel k;
  k.name = "k";
  k.sizes = std::move(sizes);
  k.reduce_rank = reduce_rank;
  return k;
}

TEST(SplitReductionsTest, RecordsTheTargetsPieceCountOnEachKernel) {
  std::vector<kernel::Kernel> kernels = {reduction({1 << 20}, 1), reduction({64, 128}, 1)};
  // A target that splits only full reductions, into 8.
  const int split = split_reductions(
      kernels, [](const kernel::Kernel& k) -> int64_t { return k.row_rank() == 0 ? 8 : 0; });
  EXPECT_EQ(split, 1);
  EXPECT_EQ(kernels[0].split_pieces, 8);
  EXPECT_EQ(kernels[1].split_pieces, 0);
  // The count is part of what a kernel computes: the cache and the dumps tell them apart.
  kernel::Kernel whole = kernels[0];
  whole.split_pieces = 0;
  EXPECT_FALSE(kernel::same_computation(whole, kernels[0]));
}

TEST(SplitReductionsTest, RunsAfterLowerKernelsAndOnlyWithATargetCount) {
  const auto& names = pipeline_pass_names();
  const auto at = [&](const char* name) { return std::find(names.begin(), names.end(), name); };
  ASSERT_NE(at("split_reductions"), names.end());
  EXPECT_EQ(at("split_reductions") - at("lower_kernels"), 1);

  const char* sum =
      "graph(%x : f32[1048576]):\n"
      "  %s : f32[] = aten::sum(%x) {dtype=None}\n"
      "  %t : f32[] = aten::mul.Scalar(%s) {other=2}\n"
      "  return (%t)\n";
  auto graph = ir::parse_graph(sum);
  PipelineResult without = run_pipeline(*graph, PipelineOptions{});
  ASSERT_EQ(without.kernels.size(), 1u);
  EXPECT_EQ(without.kernels[0].split_pieces, 0);
  EXPECT_EQ(std::count(without.passes_run.begin(), without.passes_run.end(), "split_reductions"),
            0);

  PipelineOptions options;
  options.reduction_pieces = [](const kernel::Kernel&) -> int64_t { return 16; };
  graph = ir::parse_graph(sum);
  PipelineResult with = run_pipeline(*graph, options);
  ASSERT_EQ(with.kernels.size(), 1u);
  EXPECT_EQ(with.kernels[0].split_pieces, 16);
}

}  // namespace
}  // namespace kiln
