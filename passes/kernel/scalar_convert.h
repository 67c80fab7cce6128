// Bit-exact conversions between float and the 16-bit float formats (round to nearest even), for
// the reference interpreter and tests. Code generators emit their own.
#pragma once

#include <cstdint>

namespace kiln::kernel {

float float_from_half(uint16_t bits);
uint16_t half_from_float(float value);
float float_from_bfloat16(uint16_t bits);
uint16_t bfloat16_from_float(float value);

}  // namespace kiln::kernel
