#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/bfloat16.h"

namespace surogate {

float f16_to_float(uint16_t bits) {
  uint32_t sign = (bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  uint32_t out;
  if (exponent == 0) {
    if (mantissa == 0) {
      out = sign;
    } else {  // subnormal: value = mantissa * 2^-24
      float value = std::ldexp(static_cast<float>(mantissa), -24);
      std::memcpy(&out, &value, sizeof(out));
      out |= sign;
    }
  } else if (exponent == 0x1f) {
    out = sign | 0x7f800000u | (mantissa << 13);
  } else {
    out = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float value;
  std::memcpy(&value, &out, sizeof(value));
  return value;
}

uint16_t float_to_f16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;          // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;         // overflow rounds to infinity
  if (magnitude < 0x38800000u) {                               // subnormal or zero in half
    float scaled = std::ldexp(std::fabs(value), 24);           // exact multiple of 2^-24
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  uint32_t rounding = 0xfffu + ((magnitude >> 13) & 1u);
  return sign | static_cast<uint16_t>((magnitude - 0x38000000u + rounding) >> 13);
}

}  // namespace surogate
