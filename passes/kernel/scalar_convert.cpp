#include "passes/kernel/scalar_convert.h"

#include <bit>
#include <cmath>

namespace kiln::kernel {

bool converts_through_int64(ir::DType from, ir::DType to) {
  return to == ir::DType::Int64 || (to == ir::DType::UInt8 && from == ir::DType::Float64);
}

int64_t integer_from_float(double value, ir::DType from, ir::DType to) {
  int64_t wide;
  if (converts_through_int64(from, to)) {
    const bool in_range = value >= -0x1p63 && value < 0x1p63;  // false for NaN
    wide = in_range ? static_cast<int64_t>(value) : INT64_MIN;
  } else {
    const bool in_range = value >= -0x1p31 && value < 0x1p31;
    wide = in_range ? static_cast<int32_t>(value) : INT32_MIN;
  }
  switch (to) {
    case ir::DType::UInt8:
      return static_cast<uint8_t>(wide);
    case ir::DType::Int8:
      return static_cast<int8_t>(wide);
    case ir::DType::Int16:
      return static_cast<int16_t>(wide);
    case ir::DType::Int32:
      return static_cast<int32_t>(wide);
    default:
      return wide;
  }
}

float float_from_half(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const int exponent = (bits >> 10) & 0x1f;
  const uint32_t mantissa = bits & 0x3ff;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // zero or subnormal
  } else if (exponent == 31) {
    magnitude = mantissa ? NAN : INFINITY;
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  }
  return std::bit_cast<float>(std::bit_cast<uint32_t>(magnitude) | sign);
}

uint16_t half_from_float(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const float magnitude = std::fabs(value);
  if (std::isnan(value)) return sign | 0x7e00;
  if (magnitude >= 65520.0f) return sign | 0x7c00;  // rounds to infinity
  if (magnitude < 6.103515625e-05f) {
    // Subnormal (or zero): a multiple of 2^-24, rounded to nearest even by rint.
    return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(magnitude, 24)));
  }
  int exponent;
  const float fraction = std::frexp(magnitude, &exponent);  // in [0.5, 1)
  // 11 significant bits; a carry out of the mantissa correctly bumps the exponent.
  const uint32_t significand = static_cast<uint32_t>(std::nearbyint(std::ldexp(fraction, 11)));
  const uint32_t biased = static_cast<uint32_t>(exponent + 14);
  return sign | static_cast<uint16_t>((biased << 10) + significand - 0x400);
}

float float_from_bfloat16(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

uint16_t bfloat16_from_float(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace kiln::kernel
