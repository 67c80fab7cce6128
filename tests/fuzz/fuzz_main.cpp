// kiln_fuzz: runs the differential fuzzer on a range of seeds and prints a summary (cases, fused
// kernels, failures with their reproducers). Exit code 1 when a case fails.
//
//   kiln_fuzz --seeds A:B [--device cpu|cuda] [--verbose] [--show] [--all-outputs] [--large]
//   kiln_fuzz --symbolic --seeds A:B [--verbose]
//     --seeds A:B   seeds A, A+1, ..., B-1 (default 0:100)
//     --device D    where kiln compiles and runs the cases (cuda: CUDA kernels, against eager
//                   CUDA: the graph op by op through ATen's CUDA kernels)
//     --verbose     one line per case, and kiln's warnings (KILN_LOG=warn)
//     --show        print each case's graph and inputs before running it
//     --large       cases of 64K-128K elements (reductions split across threads)
//     --all-outputs every op's result is also a graph output: shows which op differs first
//     --symbolic    the seeds' symbolic cases (fuzz_symbolic.h): each compiled once as a shape
//                   class, its plan run at bindings it was not compiled at (CPU only)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ATen/Context.h>

#include "backend/codegen/cuda/compile_cuda_kernels.h"
#include "fuzz/fuzz_case.h"
#include "fuzz/fuzz_symbolic.h"

namespace {

int usage(const char* why) {
  std::fprintf(
      stderr,
      "kiln_fuzz: %s\nusage: kiln_fuzz --seeds A:B [--device cpu|cuda] [--verbose] [--show] "
      "[--all-outputs] [--large]\n       kiln_fuzz --symbolic --seeds A:B [--verbose]\n",
      why);
  return 2;
}

/// The symbolic cases of seeds first..last-1; exit code 1 when one fails.
int run_symbolic(uint64_t first, uint64_t last, bool verbose) {
  const auto start = std::chrono::steady_clock::now();
  kiln::fuzz::SymbolicTally tally;
  for (uint64_t seed = first; seed < last; ++seed) {
    const kiln::fuzz::SymbolicResult r = kiln::fuzz::run_symbolic_seed(seed);
    tally.add(r);
    if (verbose) {
      std::printf(
          "seed %llu: %s, %d size inputs, %s, %d generic kernels, %d bindings run, %d "
          "skipped, %.3f s\n",
          static_cast<unsigned long long>(seed), r.passed ? "ok" : "FAILED", r.size_inputs,
          r.formed ? "a class" : ("no class: " + r.not_formed).c_str(), r.generic_kernels,
          r.bindings_run, r.bindings_skipped, r.seconds);
    }
    if (!r.passed) std::printf("%s\n", r.report.c_str());
    std::fflush(stdout);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("kiln_fuzz --symbolic (seeds %llu:%llu, %.1f s): %s\n",
              static_cast<unsigned long long>(first), static_cast<unsigned long long>(last),
              seconds, tally.summary().c_str());
  return tally.failed.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t first = 0, last = 100;
  bool verbose = false, show = false, all_outputs = false, large = false, symbolic = false;
  c10::Device device(c10::kCPU);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--verbose") {
      verbose = true;
    } else if (arg == "--show") {
      show = true;
    } else if (arg == "--all-outputs") {
      all_outputs = true;
    } else if (arg == "--large") {
      large = true;
    } else if (arg == "--symbolic") {
      symbolic = true;
    } else if (arg == "--device" && i + 1 < argc) {
      const std::string name = argv[++i];
      if (name != "cpu" && name != "cuda") return usage(("unknown device '" + name + "'").c_str());
      device = c10::Device(name == "cpu" ? c10::kCPU : c10::kCUDA, 0);
    } else if (arg == "--seeds" && i + 1 < argc) {
      const std::string range = argv[++i];
      const size_t colon = range.find(':');
      try {
        if (colon == std::string::npos) {
          first = std::stoull(range);
          last = first + 1;
        } else {
          first = std::stoull(range.substr(0, colon));
          last = std::stoull(range.substr(colon + 1));
        }
      } catch (const std::exception&) {
        return usage(("bad seed range '" + range + "'").c_str());
      }
      if (last <= first) return usage("empty seed range");
    } else {
      return usage(("unknown argument '" + arg + "'").c_str());
    }
  }
  if (!verbose) setenv("KILN_LOG", "error", /*overwrite=*/0);
  if (symbolic) {
    if (!device.is_cpu())
      return usage("--symbolic runs on the CPU only (CUDA has no shape classes)");
    return run_symbolic(first, last, verbose);
  }
  if (device.is_cuda()) {
    if (!at::hasCUDA()) {
      std::fprintf(stderr,
                   "kiln_fuzz: --device cuda, but this build cannot make CUDA tensors "
                   "(configure with -DKILN_TORCH_CUDA=ON on a machine with a GPU)\n");
      return 2;
    }
    const std::string why = kiln::codegen::cuda::cuda_codegen_unavailable_reason();
    if (!why.empty()) {
      std::fprintf(stderr, "kiln_fuzz: no CUDA code generation here: %s\n", why.c_str());
      return 2;
    }
  }

  const auto start = std::chrono::steady_clock::now();
  int cases = 0, cases_with_kernels = 0, kernels = 0, ops = 0, fused_ops = 0, unlowered = 0;
  int layout_differs = 0, split_reductions = 0;
  int64_t checked = 0, unchecked = 0;
  std::vector<uint64_t> failed;
  for (uint64_t seed = first; seed < last; ++seed) {
    kiln::fuzz::CaseResult r;
    if (show) {
      kiln::fuzz::FuzzCase c = kiln::fuzz::make_case(seed, all_outputs, large);
      std::printf("%s", kiln::fuzz::reproducer(c, "case").c_str());
      r = kiln::fuzz::run_case(c, device);
    } else {
      r = kiln::fuzz::run_seed(seed, all_outputs, device, large);
    }
    ++cases;
    cases_with_kernels += r.kernels > 0;
    kernels += r.kernels;
    ops += r.ops;
    fused_ops += r.fused_ops;
    unlowered += r.unlowered_ops;
    split_reductions += r.split_reductions;
    layout_differs += r.layout_differs;
    checked += r.checked;
    unchecked += r.unchecked;
    if (verbose) {
      std::printf(
          "seed %llu: %s, %d ops, %d kernels, %d ops fused, %lld elements checked, %lld "
          "not, %.3f s\n",
          static_cast<unsigned long long>(seed), r.passed ? "ok" : "FAILED", r.ops, r.kernels,
          r.fused_ops, static_cast<long long>(r.checked), static_cast<long long>(r.unchecked),
          r.seconds);
    }
    if (!r.passed) {
      failed.push_back(seed);
      std::printf("%s\n", r.report.c_str());
    }
    std::fflush(stdout);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("kiln_fuzz: %d cases (seeds %llu:%llu) in %.1f s; %zu failed\n", cases,
              static_cast<unsigned long long>(first), static_cast<unsigned long long>(last),
              seconds, failed.size());
  std::printf("  %d fused kernels; %d of %d ops ran in them; %d cases with kernels\n", kernels,
              fused_ops, ops, cases_with_kernels);
  std::printf("  %d reductions split across threads\n", split_reductions);
  std::printf(
      "  %d lowerable ops ran through ATen (groups kiln gave up on: KILN_LOG=warn says why)\n",
      unlowered);
  std::printf("  %d outputs with strides other than eager's\n", layout_differs);
  std::printf("  %lld output elements checked, %lld not checked (ill-conditioned)\n",
              static_cast<long long>(checked), static_cast<long long>(unchecked));
  if (!failed.empty()) {
    std::printf("  failed seeds:");
    for (uint64_t s : failed)
      std::printf(" %llu", static_cast<unsigned long long>(s));
    std::printf("\n");
  }
  return failed.empty() ? 0 : 1;
}
