// Which outputs of a kernel may be written over one of its inputs.
//
// An output can take an input's memory when every element is read and written at the same place
// in the same iteration: the kernel reduces nothing, the output is stored once, and every load of
// the input uses exactly the output's index map with an element of the same size. Each element
// is then read (possibly several times) before it is written, and no other element reads it, so
// the result does not depend on the loop order, the vector width or the thread split.
//
//   kernel k [1024]                       in place: b0 -> b2
//     in  b0: f32                         (b1 is read through a broadcast map, so it cannot be)
//     in  b1: f32
//     out b2: f32
//     %0 = load b0[1]
//     %1 = load b1[0]
//     %2 = add %0, %1
//     store b2[1] = %2
#pragma once

#include <utility>
#include <vector>

#include "passes/kernel/kernel.h"

namespace kiln::kernel {

/// Pairs (input buffer, output buffer) that could share memory, in buffer order. An input or
/// output may appear in several pairs; the caller picks at most one pair per buffer.
std::vector<std::pair<int, int>> in_place_candidates(const Kernel& kernel);

}  // namespace kiln::kernel
