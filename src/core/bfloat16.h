// Host-side conversions between float and the 16-bit float formats (round to nearest even),
// used by the CPU backend and file I/O. Device code has its own intrinsics.
#pragma once

#include <cstdint>
#include <cstring>

namespace surogate {

inline float bf16_to_float(uint16_t bits) {
  uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, sizeof(value));
  return value;
}

inline uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // NaN stays NaN
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float f16_to_float(uint16_t bits);
uint16_t float_to_f16(float value);

}  // namespace surogate
