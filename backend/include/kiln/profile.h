// What `kiln profile` and kiln.profile report: where the time of a compiled model's calls goes,
// plan step by plan step (each generated kernel with the ops fused into it, each op run through
// ATen, each layout conversion), with each step's share of the whole call.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kiln/export.h"

namespace kiln {

/// One step of one plan, over the calls of a profiling session.
struct ProfiledStep {
  int plan = 0;          // plans numbered in the order they first ran
  int step = 0;          // the step's index in its plan
  std::string name;      // "kernel 3", "mkldnn::_convolution_pointwise", "re-layout for kernel 3"
  std::string category;  // convolution, gemm, attention, elementwise, reduction,
                         // normalization, pooling, layout, view, copy or other
  std::string ops;       // a kernel's fused ops, joined by " + "; empty for other steps
  std::vector<int64_t> input_sizes;   // of its first input
  std::vector<int64_t> output_sizes;  // of its first output
  int64_t runs = 0;                   // times it ran in the session
  double ms = 0;                      // per call of the model
  double share = 0;                   // of the whole call's time, 0..1
};

struct KILN_API Profile {
  int calls = 0;
  double call_ms = 0;   // wall time per call, whole call
  double steps_ms = 0;  // per call, in plan steps; the rest is guards, the interpreter or Python
                        // between regions, and ops kiln did not compile
  std::vector<ProfiledStep> steps;                         // the slowest first
  std::vector<std::pair<std::string, double>> categories;  // ms per call, the largest first

  /// A table of the `max_rows` slowest steps, then the time per category.
  std::string to_text(int max_rows = 25) const;
  std::string to_json() const;
};

/// Opens a profiling session: from now until finish_profiling, every plan step that runs in this
/// process (any thread, any compiled module or torch.compile graph) is timed, a GPU step to its
/// end. Throws InvalidInput when a session is already open.
KILN_API void start_profiling();
/// Closes the session. `calls` and `call_ms` are the caller's count and wall time per call of
/// what it profiled; step times are divided by `calls`.
KILN_API Profile finish_profiling(int calls, double call_ms);

}  // namespace kiln
