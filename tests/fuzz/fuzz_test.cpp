// The differential fuzzer on a fixed set of seeds: every case matches eager ATen, and the cases
// really run generated kernels (not only the ATen path).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <limits>

#include "backend/codegen/cuda/cuda_emitter.h"
#include "cuda/cuda_emulation.h"
#include "cuda/cuda_test_support.h"
#include "fuzz/error_bounds.h"
#include "fuzz/fuzz_case.h"
#include "fuzz/fuzz_symbolic.h"
#include "passes/pipeline.h"

namespace kiln::fuzz {
namespace {

constexpr uint64_t kSeeds = 400;

TEST(Fuzz, FixedSeedsMatchEager) {
  const auto start = std::chrono::steady_clock::now();
  std::string reports;
  int failed = 0, cases_with_kernels = 0, kernels = 0, ops = 0, fused_ops = 0, in_place = 0,
      unlowered = 0;
  int64_t checked = 0, unchecked = 0;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    CaseResult r = run_seed(seed);
    if (!r.passed) {
      ++failed;
      reports += r.report;
    }
    cases_with_kernels += r.kernels > 0;
    kernels += r.kernels;
    in_place += r.in_place;
    ops += r.ops;
    fused_ops += r.fused_ops;
    unlowered += r.unlowered_ops;
    checked += r.checked;
    unchecked += r.unchecked;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "fuzz: seeds 0:%llu in %.1f s: %d failed; %d kernels (%d writing in place), %d of %d ops "
      "fused, %d cases with kernels; %lld elements checked, %lld not checked (ill-conditioned)\n",
      static_cast<unsigned long long>(kSeeds), seconds, failed, kernels, in_place, fused_ops, ops,
      cases_with_kernels, static_cast<long long>(checked), static_cast<long long>(unchecked));
  EXPECT_EQ(failed, 0) << reports;
  // Guards on the fuzzer itself: most cases fuse, and most elements are compared.
  EXPECT_GE(cases_with_kernels, static_cast<int>(kSeeds * 8 / 10));
  // The lowering gives no group back on these seeds (a value the same for a whole row stored per
  // element is one such pattern the kernel IR must express). A group given back runs correctly
  // through ATen, so only this count shows a lowering that refuses a pattern the fusers form;
  // KILN_LOG=warn on kiln_fuzz says which.
  EXPECT_EQ(unlowered, 0) << unlowered << " ops of groups given back";
  // One case can leave tens of thousands unchecked (seed 278: the pow(-2) of integer zeros feeds
  // three layer norms, 48000 of its 51000 elements), so the guard allows a tenth.
  EXPECT_GE(checked, 10 * unchecked);
}

// Seeds past the fixed range that once failed, each for a reason the fixed seeds did not reach:
// 7417 (an infinite layer_norm weight times a normalized 0), 13010 (an empty channels-last layer
// norm given back to ATen), 14287-17407 but 15821 (sums of empty rows left unwritten), 15821 (an
// int64 operand of a bfloat16 maximum).
TEST(Fuzz, SeedsThatOnceFailedMatchEager) {
  for (uint64_t seed :
       {7417, 13010, 14287, 14357, 15044, 15113, 15211, 15821, 16689, 16893, 17407}) {
    CaseResult r = run_seed(seed);
    EXPECT_TRUE(r.passed) << r.report;
    EXPECT_EQ(r.unlowered_ops, 0) << "seed " << seed;
  }
  // Large (see LargeCasesMatchEager): 853, a float16 sum past 65504 with an inf in it, which
  // eager's threads add as float16 (inf - inf).
  for (uint64_t seed : {853}) {
    CaseResult r = run_seed(seed, false, c10::Device(c10::kCPU), /*large=*/true);
    EXPECT_TRUE(r.passed) << r.report;
  }
}

// Large cases (64K-128K elements): their full reductions are split across threads
// (kernel/split_reduction.h), which no small case's are.
TEST(Fuzz, LargeCasesMatchEager) {
  constexpr uint64_t kLargeSeeds = 60;
  std::string reports;
  int failed = 0, splits = 0, unlowered = 0;
  for (uint64_t seed = 0; seed < kLargeSeeds; ++seed) {
    CaseResult r = run_seed(seed, /*all_outputs=*/false, c10::Device(c10::kCPU), /*large=*/true);
    if (!r.passed) {
      ++failed;
      reports += r.report;
    }
    splits += r.split_reductions;
    unlowered += r.unlowered_ops;
  }
  std::printf("fuzz: large seeds 0:%llu: %d failed, %d reductions split\n",
              static_cast<unsigned long long>(kLargeSeeds), failed, splits);
  EXPECT_EQ(failed, 0) << reports;
  EXPECT_EQ(unlowered, 0);
  EXPECT_GE(splits, 20);  // 35 when written: the split must stay exercised
}

// The kernels of the same seeds, rendered to CUDA C: NVRTC compiles them for sm_80 and sm_90
// and ptxas accepts them (no GPU needed; running them is scripts/gpu-check's job).
TEST(Fuzz, KernelsCompileForCuda) {
  if (const std::string why = cuda::nvrtc_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  std::vector<kernel::Kernel> kernels;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    FuzzCase c = make_case(seed);
    PipelineOptions options;
    PipelineResult result = run_pipeline(*c.graph, options);
    kernels.insert(kernels.end(), result.kernels.begin(), result.kernels.end());
  }
  const auto start = std::chrono::steady_clock::now();
  EXPECT_GT(kernels.size(), kSeeds);
  cuda_test::expect_compiles_for_all_architectures(codegen::cuda::emit_cuda_module(kernels).source,
                                                   "fuzz_kernels", false);
  std::printf("fuzz: %zu kernels of seeds 0:%llu compiled for CUDA in %.1f s\n", kernels.size(),
              static_cast<unsigned long long>(kSeeds),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// The kernels of the first seeds, rendered to CUDA C, run on the CPU through the emulation of
// CUDA's threads (tests/cuda/cuda_emulation.h) and compared with the reference interpreter.
TEST(Fuzz, KernelsRunOnEmulatedCuda) {
  if (const std::string why = cuda_test::emulation_unavailable_reason(); !why.empty()) {
    GTEST_SKIP() << why;
  }
  constexpr uint64_t kEmulatedSeeds = 150;
  std::vector<kernel::Kernel> kernels;
  for (uint64_t seed = 0; seed < kEmulatedSeeds; ++seed) {
    FuzzCase c = make_case(seed);
    PipelineResult result = run_pipeline(*c.graph, PipelineOptions{});
    kernels.insert(kernels.end(), result.kernels.begin(), result.kernels.end());
  }
  std::printf("fuzz: %zu kernels of seeds 0:%llu run on emulated CUDA\n", kernels.size(),
              static_cast<unsigned long long>(kEmulatedSeeds));
  EXPECT_EQ(cuda_test::emulation_differences(kernels), "");
}

// Symbolic sizes: each seed's case compiled once as a shape class, its plan run at the base, the
// check binding and six bindings it never saw (primes, both sides of the vector widths), each
// against eager there.
TEST(Fuzz, SymbolicSizesMatchEager) {
  constexpr uint64_t kSymbolicSeeds = 200;
  const auto start = std::chrono::steady_clock::now();
  SymbolicTally tally;
  for (uint64_t seed = 0; seed < kSymbolicSeeds; ++seed)
    tally.add(run_symbolic_seed(seed));
  std::printf("symbolic fuzz: seeds 0:%llu in %.1f s: %s\n",
              static_cast<unsigned long long>(kSymbolicSeeds),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              tally.summary().c_str());
  EXPECT_TRUE(tally.failed.empty()) << tally.reports;
  // Guards on the fuzzer: most cases have size inputs, kiln forms a class for most of those (it
  // refuses only where the program itself changes with its sizes), and most plans run.
  EXPECT_GE(tally.with_sizes, static_cast<int>(kSymbolicSeeds * 8 / 10));
  EXPECT_GE(tally.formed, tally.with_sizes * 9 / 10);
  EXPECT_GE(tally.run, tally.formed * 7);
}

// A symbolic case at another binding is the same program: the same ops, the same inputs, and
// the main shape's size dims (and only those) at the new values.
TEST(Fuzz, SymbolicCaseMovesOnlyItsSizes) {
  int compared = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    FuzzCase base = make_symbolic_case(seed);
    if (base.binding.empty()) continue;
    std::vector<int64_t> moved = base.binding;
    for (int64_t& v : moved)
      v += 3;
    FuzzCase there = make_symbolic_case(seed, moved);
    EXPECT_EQ(there.binding, moved);
    EXPECT_EQ(there.size_dims, base.size_dims);
    const auto nodes = base.graph->nodes(), nodes_there = there.graph->nodes();
    ASSERT_EQ(nodes_there.size(), nodes.size()) << "seed " << seed;
    for (size_t i = 0; i < nodes.size(); ++i)
      EXPECT_EQ(nodes_there[i]->op(), nodes[i]->op()) << "seed " << seed;
    ASSERT_EQ(there.inputs.size(), base.inputs.size());
    ++compared;
  }
  EXPECT_GE(compared, 15);
}

TEST(Fuzz, SameSeedGivesSameCase) {
  FuzzCase a = make_case(17), b = make_case(17);
  EXPECT_EQ(a.ir_text, b.ir_text);
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    EXPECT_EQ(a.inputs[i].strides(), b.inputs[i].strides());
    EXPECT_TRUE(at::equal(a.inputs[i].nan_to_num(0), b.inputs[i].nan_to_num(0)));
  }
}

// An infinite layer_norm weight times a normalized value is owed exactly where that value is
// clearly nonzero; times one that is 0 up to rounding (any row of one element) eager gives the
// sign of a rounding residue, kiln NaN, and the bound owes neither (seed 7417: eager -inf).
TEST(Fuzz, InfiniteLayerNormWeightIsOwedOnlyOffZero) {
  const auto bound = [](const at::Tensor& x, const at::Tensor& w) {
    const int64_t n = x.size(-1);
    const ir::AttrList attrs = {
        {"normalized_shape", std::vector<int64_t>{n}}, {"bias", ir::NoneAttr{}}, {"eps", 1e-5}};
    const Val in = leaf_val(x), weight = leaf_val(w);
    const at::Tensor r = at::layer_norm(x, {n}, w);
    return error_bound("aten::layer_norm", attrs, {&in, &weight}, r, at::kFloat);
  };
  const float inf = std::numeric_limits<float>::infinity();
  const at::Tensor owed = bound(at::tensor({1.0f, 3.0f}), at::tensor({-inf, inf}));
  EXPECT_TRUE(at::equal(owed, at::zeros({2}, at::kDouble))) << owed;
  const at::Tensor not_owed = bound(at::tensor({0.001f}), at::tensor({-inf}));
  EXPECT_TRUE(at::isinf(not_owed).all().item<bool>()) << not_owed;
}

TEST(Fuzz, MismatchPrintsReproducer) {
  for (uint64_t seed = 0;; ++seed) {
    FuzzCase c = make_case(seed);
    if (c.expected.empty() || c.expected[0].numel() == 0) continue;
    // Claim an eager result no run can give, required exactly.
    const at::Tensor& e = c.expected[0];
    c.expected[0] = e.scalar_type() == at::kBool ? at::logical_not(e) : at::full_like(e, 77);
    c.bounds[0] = at::zeros_like(c.bounds[0]);
    const std::string graph_text = c.ir_text;
    CaseResult r = run_case(c);
    EXPECT_FALSE(r.passed);
    EXPECT_NE(r.report.find("seed " + std::to_string(seed)), std::string::npos) << r.report;
    EXPECT_NE(r.report.find(graph_text), std::string::npos) << r.report;
    EXPECT_NE(r.report.find("%x0 : "), std::string::npos) << r.report;
    EXPECT_NE(r.report.find("first at ["), std::string::npos) << r.report;
    return;
  }
}

}  // namespace
}  // namespace kiln::fuzz
