// The `precision` compile option, resolved for this CPU and graph (docs/precision.md).
#pragma once

#include <string>

#include "kiln/options.h"
#include "passes/base/export.h"

namespace kiln {

/// Whether this CPU multiplies bf16 natively for kiln (AVX512-BF16 or AMX, as kiln's oneDNN sees
/// it), or what KILN_NATIVE_BF16 says.
KILN_INTERNAL bool native_bf16();

/// Whether compiles with `options` multiply in bf16: precision=bf16 on a CPU with native bf16
/// (AVX512-BF16 or AMX, as kiln's oneDNN sees it; KILN_NATIVE_BF16 overrides). Elsewhere
/// precision=bf16 warns once per process and runs fp32, or with `strict` throws kiln::Error
/// (unsupported) saying what the CPU lacks. On CUDA (`on_cpu` false) precision=bf16 is not
/// implemented: it warns once and runs fp32.
bool multiplies_in_bf16(const CompileOptions& options, bool on_cpu);

/// Throws kiln::Error (invalid input) for precision=bf16 on `graph` where a gradient must flow
/// through it: bf16 is an inference precision.
void check_inference_precision(const CompileOptions& options, bool needs_gradients,
                               const std::string& graph);

}  // namespace kiln
