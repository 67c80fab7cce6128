// Bit-exact conversions between float and the 16-bit float formats (round to nearest even), and
// the one definition of float -> integer conversion, for the reference interpreter, constants
// and tests. Code generators emit their own code for the same rules.
#pragma once

#include <cstdint>

#include "passes/ir/types.h"

namespace kiln::kernel {

/// Whether a float of dtype `from` converts to the integer dtype `to` through a 64-bit integer
/// (int64 results, and uint8 from float64, as c10's conversions compile on x86); every other
/// float -> integer conversion goes through a 32-bit one.
bool converts_through_int64(ir::DType from, ir::DType to);

/// A float of dtype `from` converted to the integer dtype `to` (not bool) as eager's CPU kernels
/// convert on x86, so that every backend gives one defined result where C++ and LLVM leave it
/// undefined: truncated toward zero into the intermediate integer (converts_through_int64), whose
/// most negative value stands for NaN, infinities and values out of its range (x86's "integer
/// indefinite"), then wrapped to the width of `to`. (-300.7 to uint8 is 212; NaN, inf and 3e9 to
/// int32 are INT32_MIN; NaN to int8 is 0.)
int64_t integer_from_float(double value, ir::DType from, ir::DType to);

float float_from_half(uint16_t bits);
uint16_t half_from_float(float value);
float float_from_bfloat16(uint16_t bits);
uint16_t bfloat16_from_float(float value);

}  // namespace kiln::kernel
