// The differential fuzzer: random graphs over the ops kiln fuses, built while running every op
// eagerly through ATen on the real inputs (the eager results are the reference and give each
// node its output type), then compiled by kiln with fusion on and memory planning, run, and
// compared element by element.
//
// Tolerances. Each value carries, beside its eager result, a float64 tensor of the same shape:
// the error bound of each element, propagated to first order from the inputs of the op that made
// it (graph inputs are exact):
//   - 0 means kiln must give the identical value: integers, bools, and floats from ops that round
//     the same way in both (casts, selections, clamps, comparisons, add/sub/mul with alpha 1 in
//     float32/float64 (kiln never contracts a multiply and an add into one FMA), except a
//     where.self whose branch eager rounds to half). NaN must be NaN,
//     an infinity the same infinity. Comparisons, where conditions and float-to-integer casts
//     only ever read such exact values.
//   - inf means the element is not checked: the result is ill-conditioned (an interval that
//     reaches a pole, a NaN or an overflow, a special value eager gives in float32 but not in
//     float64, a sum that may overflow in one order and not in another, an overflowed product
//     that kiln may fuse into an FMA). The count is reported.
//   - otherwise |kiln - eager| <= max(bound, rtol * |eager|) with rtol = 1e-5 (float32), 1e-12
//     (float64), 1e-2 (float16), 2e-2 (bfloat16: kiln does not round intermediates to half,
//     eager does). For an elementwise op the bound is the op evaluated in float64 at the corners
//     of its inputs' error boxes (each widened by one unit roundoff u of the result type), twice,
//     plus c u |result| with c = 2 for arithmetic, 4 for sqrt/rsqrt/reciprocal, 8 for
//     exp/log/tanh/sigmoid/erf, 16 for gelu/silu/pow/softplus/mish (and 16 u |x| for gelu, whose
//     1 + erf(x/sqrt2) cancels for x < -3 in eager and kiln alike). Sums and means add
//     4 n u sum|x| (n = reduced size, u of the accumulation type: float32 for half inputs);
//     softmax allows a factor exp(+-2d) for input errors d plus 8 u (n + |x - max|) relative;
//     log_softmax 2d plus 8 u (n + |x - max| + |lse|); layer_norm d (2 + |x^|) / sigma plus
//     8 n u max|x| / sigma (1 + |x^|) (see fuzz_case.cpp).
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "passes/ir/graph.h"

namespace kiln::fuzz {

struct FuzzCase {
  uint64_t seed = 0;
  /// The graph as generated; run_case hands it to compile_graph (which consumes it).
  std::unique_ptr<ir::Graph> graph;
  std::string ir_text;                   // print_graph of the graph before compilation
  std::vector<at::Tensor> inputs;        // one per graph input
  std::vector<at::Tensor> constants;     // the tensor of prim::Constant {index=i}
  std::vector<std::string> input_notes;  // how each input, then each constant, was made
  std::vector<at::Tensor> expected;      // the eager result of each graph output
  std::vector<at::Tensor> bounds;        // per graph output: float64 error bound per element
  int num_ops = 0;                       // ops in the graph (constants not counted)
  bool large = false;                    // made by make_case(seed, ..., /*large=*/true)
  // A symbolic case's size inputs: dims of its main shape (those ops and inputs copy), and their
  // values in this case. Empty for make_case's cases, and where no main dim is 2 or more.
  std::vector<int> size_dims;
  std::vector<int64_t> binding;
};

/// The case of a seed; the same seed always gives the same graph and inputs. With
/// `all_outputs`, every op's result is also a graph output (the same graph and inputs otherwise):
/// to see which op differs first. A `large` case has the same ops, but a main shape of 64K-128K
/// elements (scaled up from the one it would have had): its full reductions are large enough to
/// be split across threads (kernel/split_reduction.h), which small cases never are.
FuzzCase make_case(uint64_t seed, bool all_outputs = false, bool large = false);

/// The seed's symbolic case: one or two dims of its main shape are size inputs, and `binding`
/// (one value per size input, each at least 2) replaces them; empty: the sizes the seed draws.
/// Its element values come from a stream per tensor, so the ops drawn do not depend on how many
/// elements a tensor has: at another binding the case is the same program, but where an op's
/// operands or scalars depend on the data (then run_symbolic_seed skips that binding). Not the
/// case make_case gives for the seed.
FuzzCase make_symbolic_case(uint64_t seed, std::span<const int64_t> binding = {});

struct CaseResult {
  uint64_t seed = 0;
  bool passed = false;
  int ops = 0;
  int kernels = 0;           // kiln::fused kernels generated
  int in_place = 0;          // kernel outputs written over a dying input
  int fused_ops = 0;         // graph ops that run inside them
  int unlowered_ops = 0;     // lowerable ops that still ran through ATen (a group kiln gave up on)
  int layout_differs = 0;    // outputs whose strides differ from eager's (not a failure)
  int64_t checked = 0;       // output elements compared
  int64_t unchecked = 0;     // float output elements whose bound is inf
  int split_reductions = 0;  // kernels split into pieces and a finish (split_reduction.h)
  double seconds = 0;        // compile and run
  std::string report;        // on failure: what differs, and the reproducer
};

/// Compiles the case (fusion on, strict, memory planned) for `device`, runs the plan on the
/// case's inputs (copied there) and compares every output with the eager result on that device
/// (for a GPU: the graph op by op through ATen's kernels there), within the case's bounds.
/// Consumes fuzz_case.graph.
CaseResult run_case(FuzzCase& fuzz_case, c10::Device device = c10::Device(c10::kCPU));

/// make_case + run_case.
CaseResult run_seed(uint64_t seed, bool all_outputs = false,
                    c10::Device device = c10::Device(c10::kCPU), bool large = false);

/// "" when `actual` matches `expected` within `bound` (the case's error bound for that output);
/// else the first difference. Adds to the counts of elements compared and of those not.
std::string compare_output(const at::Tensor& actual, const at::Tensor& expected,
                           const at::Tensor& bound, int64_t& checked, int64_t& unchecked);

/// The reproducer of a case: seed, graph IR, inputs and constants, followed by `what`.
std::string reproducer(const FuzzCase& fuzz_case, const std::string& what);

}  // namespace kiln::fuzz
