// The reference interpreter: what a kernel computes, one element at a time, with no cleverness.
// It is the oracle for every code generator (tests compare generated code against it).
//
// Float arithmetic is done in double and rounded to the expr's dtype after every op, so +, -, *,
// / and sqrt are correctly rounded and transcendental functions are within half an ulp of the
// exact result. Integer arithmetic wraps at the dtype's width.
#pragma once

#include <vector>

#include "passes/kernel/kernel.h"

namespace kiln::kernel {

/// Runs `kernel` over `buffers` (one pointer per Buffer, in order, each addressed by element
/// offsets as the index maps say). A size-generic kernel runs at its example binding;
/// bind_sizes (size_terms.h) gives it others.
void interpret(const Kernel& kernel, const std::vector<void*>& buffers);

}  // namespace kiln::kernel
