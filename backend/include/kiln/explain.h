// What `explain` reports: where each operation of a compiled module runs, and why.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/export.h"

namespace kiln {

/// Where an operation runs.
enum class RunsIn {
  FusedKernel,  // a kernel kiln generated
  ExternAten,   // one call of ATen's kernel (or oneDNN's, or kiln's hand-written ones)
  Interpreter,  // the TorchScript interpreter
  Eager,        // eager PyTorch (the fallback under torch.compile)
};

/// "fused kernel", "extern ATen", "TorchScript interpreter", "eager": the text and JSON form.
KILN_API const char* runs_in_name(RunsIn where);

/// Where one operation runs, as `explain` reports it.
struct ExplainEntry {
  std::string op;  // "aten::linear", "prim::If", ...
  RunsIn where;
  std::string why;
};

struct KILN_API Explanation {
  std::vector<ExplainEntry> entries;
  int nodes = 0;
  int kernels = 0;        // nodes that run inside generated kernels
  int fused_kernels = 0;  // generated kernels
  int extern_calls = 0;
  int interpreter = 0;
  int regions = 0;
  int fallback_regions = 0;
  double compile_seconds = 0;
  double codegen_seconds = 0;         // the part of compile_seconds spent in LLVM
  int disk_cache_hits = 0;            // code modules loaded (disk cache or package)
  int disk_cache_misses = 0;          // code modules compiled
  int64_t planned_bytes = 0;          // arena bytes of the memory plans
  int64_t unshared_bytes = 0;         // what the planned intermediates would take without sharing
  int in_place_writes = 0;            // kernel outputs written over an input that dies there
  int layout_conversions = 0;         // all of them: onednn_conversions + channels_last_conversions
  int onednn_conversions = 0;         // to_mkldnn / to_dense around prepacked (oneDNN) convolutions
  int channels_last_conversions = 0;  // copies assign_layout inserted at region boundaries

  /// Sets the counts from the entries: nodes, kernels, extern_calls, onednn_conversions (and
  /// layout_conversions, adding channels_last_conversions, which the regions report), and
  /// interpreter (everything that runs outside kiln: the TorchScript interpreter, eager PyTorch).
  void tally();
  std::string to_text() const;
  std::string to_json() const;
};

}  // namespace kiln
