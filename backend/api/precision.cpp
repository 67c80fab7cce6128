#include "backend/api/precision.h"

#include <mutex>

#include "kiln/error.h"
#include "passes/base/environment.h"
#include "runtime/onednn_support.h"

namespace kiln {

bool native_bf16() {
  return environment().native_bf16.value_or(onednn_native_bf16());
}

bool multiplies_in_bf16(const CompileOptions& options, bool on_cpu) {
  if (options.precision != Precision::BF16) return false;
  if (!on_cpu) {
    static std::once_flag warned_cuda;
    std::call_once(warned_cuda, [] {
      log(LogLevel::Warn, "precision=bf16 applies to the CPU; CUDA graphs run fp32");
    });
    return false;
  }
  if (native_bf16()) return true;
  const bool forced = environment().native_bf16.has_value();
  const std::string why =
      std::string("precision=bf16, but ") +
      (forced ? "KILN_NATIVE_BF16=0 says this CPU has no native bf16"
              : "this CPU has no native bf16 (neither AVX512-BF16 nor AMX), or kiln was built "
                "without its oneDNN");
  if (options.strict) throw Error(ErrorKind::Unsupported, why + "; allowed here: precision=fp32");
  static std::once_flag warned;
  std::call_once(warned, [&] { log(LogLevel::Warn, why + ": running fp32"); });
  return false;
}

void check_inference_precision(const CompileOptions& options, bool needs_gradients,
                               const std::string& graph) {
  if (options.precision != Precision::BF16 || !needs_gradients) return;
  throw Error(ErrorKind::InvalidInput,
              graph +
                  ": precision=bf16 is for inference, but gradients must flow through this "
                  "graph (its inputs require grad); use precision=fp32 to train, or run it "
                  "under torch.no_grad()");
}

}  // namespace kiln
