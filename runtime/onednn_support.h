#pragma once

// What kiln's own oneDNN (runtime/onednn/) can do on this CPU, for the driver, which sees neither
// oneDNN's headers nor whether kiln was built with it.

namespace kiln {

/// Whether this CPU multiplies bf16 natively (avx512_bf16 or AMX) as oneDNN sees it
/// (ONEDNN_MAX_CPU_ISA lowers what it sees), and kiln was built with its own oneDNN, whose
/// convolutions and matmuls are the ones that multiply in bf16. False otherwise.
bool onednn_native_bf16();

}  // namespace kiln
