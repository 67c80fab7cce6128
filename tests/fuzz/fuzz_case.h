// The differential fuzzer: random graphs over the ops kiln fuses, built while running every op
// eagerly through ATen on the real inputs (the eager results are the reference and give each
// node its output type), then compiled by kiln with fusion on and memory planning, run, and
// compared element by element.
//
// Tolerances. Each value carries, beside its eager result, a float64 tensor of the same shape:
// the error bound of each element, propagated to first order from the inputs of the op that made
// it (graph inputs are exact):
//   - 0 means kiln must give the identical value (integers, bools, and floats from ops that round
//     the same way in both: casts, selections, comparisons, add/sub/mul with alpha 1 in
//     float32/float64). NaN must be NaN, an infinity the same infinity.
//   - inf means the element is not checked (the result is ill-conditioned: a discontinuity, an
//     overflow that kiln's unrounded half intermediates may not reproduce, ...). The fraction of
//     such elements is counted and reported.
//   - otherwise |kiln - eager| <= max(bound, rtol * |eager|), rtol = 1e-5 (float32), 1e-12
//     (float64), 1e-2 (float16), 2e-2 (bfloat16: kiln does not round intermediates to half,
//     eager does). The bound of an elementwise op is the op evaluated in float64 at the corners
//     of its inputs' error boxes (each widened by one unit roundoff), plus c units roundoff of the
//     result (c = 2 for arithmetic, 4 for sqrt/rsqrt/reciprocal, 8 for exp/log/tanh/sigmoid/erf,
//     16 for gelu/silu/pow); reductions add 4 n u sum|x| (n = reduced size, u of the accumulation
//     type), softmax and layer_norm bounds of the same kind (see fuzz_case.cpp).
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "passes/ir/graph.h"

namespace kiln::fuzz {

struct FuzzCase {
  uint64_t seed = 0;
  /// The graph as generated; run_case hands it to compile_graph (which consumes it).
  std::unique_ptr<ir::Graph> graph;
  std::string ir_text;                    // print_graph of the graph before compilation
  std::vector<at::Tensor> inputs;         // one per graph input
  std::vector<at::Tensor> constants;      // the tensor of prim::Constant {index=i}
  std::vector<std::string> input_notes;   // how each input, then each constant, was made
  std::vector<at::Tensor> expected;       // the eager result of each graph output
  std::vector<at::Tensor> bounds;         // per graph output: float64 error bound per element
  int num_ops = 0;                        // ops in the graph (constants not counted)
};

/// The case of a seed; the same seed always gives the same graph and inputs.
FuzzCase make_case(uint64_t seed);

struct CaseResult {
  uint64_t seed = 0;
  bool passed = false;
  int ops = 0;
  int kernels = 0;    // kiln::fused kernels generated
  int fused_ops = 0;  // graph ops that run inside them
  int64_t checked = 0;    // output elements compared
  int64_t unchecked = 0;  // float output elements whose bound is inf
  double seconds = 0;     // compile and run
  std::string report;     // on failure: what differs, and the reproducer
};

/// Compiles the case (fusion on, strict, memory planned), runs the plan on the case's inputs and
/// compares every output with the eager result. Consumes fuzz_case.graph.
CaseResult run_case(FuzzCase& fuzz_case);

/// make_case + run_case.
CaseResult run_seed(uint64_t seed);

/// The reproducer of a case: seed, graph IR, inputs and constants, followed by `what`.
std::string reproducer(const FuzzCase& fuzz_case, const std::string& what);

}  // namespace kiln::fuzz
