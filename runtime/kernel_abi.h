// The calling convention between generated kernels and the executor (torch-free, so both the
// code generators and the runtime include it).
#pragma once

#include <cstdint>

namespace kiln {

/// Computes the part [begin, end) of the kernel's launch range; `buffers` holds one data pointer
/// per kernel buffer (inputs, then outputs), each already at its tensor's storage offset.
using KernelFunction = void (*)(void* const* buffers, int64_t begin, int64_t end);

}  // namespace kiln
