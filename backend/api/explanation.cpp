#include <iomanip>
#include <map>
#include <sstream>

#include "backend/api/json_text.h"
#include "kiln/explain.h"

namespace kiln {

const char* runs_in_name(RunsIn where) {
  switch (where) {
    case RunsIn::FusedKernel:
      return "fused kernel";
    case RunsIn::ExternAten:
      return "extern ATen";
    case RunsIn::Interpreter:
      return "TorchScript interpreter";
    case RunsIn::Eager:
      return "eager";
  }
  return "unknown";
}

void Explanation::tally() {
  nodes = kernels = extern_calls = interpreter = onednn_conversions = 0;
  for (const auto& entry : entries) {
    ++nodes;
    if (entry.op == "aten::to_mkldnn" || entry.op == "aten::to_dense") ++onednn_conversions;
    if (entry.where == RunsIn::ExternAten)
      ++extern_calls;
    else if (entry.where == RunsIn::FusedKernel)
      ++kernels;
    else
      ++interpreter;
  }
  layout_conversions = onednn_conversions + channels_last_conversions;
}

std::string Explanation::to_text() const {
  std::ostringstream out;
  size_t op_width = 4;
  for (const auto& e : entries)
    op_width = std::max(op_width, e.op.size());
  for (const auto& e : entries) {
    out << std::left << std::setw(static_cast<int>(op_width) + 2) << e.op << std::setw(25)
        << runs_in_name(e.where) << e.why << "\n";
  }
  out << "\n"
      << nodes << " nodes: " << kernels << " in " << fused_kernels << " generated kernels, "
      << extern_calls << " extern ATen calls, " << interpreter
      << " in the TorchScript interpreter\n"
      << regions << " compiled regions (" << fallback_regions << " fell back to the interpreter)"
      << ", compile time " << std::fixed << std::setprecision(3) << compile_seconds << " s ("
      << codegen_seconds << " s in LLVM; code modules: " << disk_cache_hits
      << " loaded (disk cache or package), " << disk_cache_misses << " compiled)\n"
      << "intermediate memory: " << planned_bytes << " bytes planned (" << unshared_bytes
      << " without sharing), " << in_place_writes << " kernel outputs written in place\n"
      << "layout conversions: " << layout_conversions << " (" << onednn_conversions
      << " to and from oneDNN's layout, " << channels_last_conversions
      << " to and from channels-last)\n";
  return out.str();
}

std::string Explanation::to_json() const {
  std::ostringstream out;
  out << "{\"nodes\": " << nodes << ", \"kernels\": " << kernels
      << ", \"fused_kernels\": " << fused_kernels << ", \"extern\": " << extern_calls
      << ", \"interpreter\": " << interpreter << ", \"regions\": " << regions
      << ", \"fallback_regions\": " << fallback_regions
      << ", \"layout_conversions\": " << layout_conversions
      << ", \"onednn_conversions\": " << onednn_conversions
      << ", \"channels_last_conversions\": " << channels_last_conversions
      << ", \"compile_seconds\": " << compile_seconds
      << ", \"codegen_seconds\": " << codegen_seconds
      << ", \"disk_cache_hits\": " << disk_cache_hits
      << ", \"disk_cache_misses\": " << disk_cache_misses
      << ", \"planned_bytes\": " << planned_bytes << ", \"unshared_bytes\": " << unshared_bytes
      << ", \"in_place_writes\": " << in_place_writes << ", \"entries\": [";
  for (size_t i = 0; i < entries.size(); ++i) {
    out << (i ? ", " : "") << "{\"op\": " << json_string(entries[i].op)
        << ", \"where\": " << json_string(runs_in_name(entries[i].where))
        << ", \"why\": " << json_string(entries[i].why) << "}";
  }
  out << "]}";
  return out.str();
}

}  // namespace kiln
