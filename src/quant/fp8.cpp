// FP8 encoding and decoding; see fp8.h.
#include "quant/fp8.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace surogate::quant {
namespace {

struct Layout {
  int mantissa_bits;
  int bias;
  uint8_t max_code;   // the largest finite magnitude's code
  float min_normal;   // 2^(1 − bias)
};

Layout layout(Fp8Format format) {
  return format == Fp8Format::E4M3 ? Layout{3, 7, 0x7E, 0x1p-6f} : Layout{2, 15, 0x7B, 0x1p-14f};
}

}  // namespace

float fp8_max(Fp8Format format) { return format == Fp8Format::E4M3 ? 448.0f : 57344.0f; }

float fp8_decode(uint8_t code, Fp8Format format) {
  const Layout l = layout(format);
  const bool negative = (code & 0x80) != 0;
  const int magnitude = code & 0x7F;
  const int exponent = magnitude >> l.mantissa_bits;
  const int mantissa = magnitude & ((1 << l.mantissa_bits) - 1);
  float value;
  if (format == Fp8Format::E4M3 && magnitude == 0x7F) {
    value = NAN;
  } else if (format == Fp8Format::E5M2 && exponent == 0x1F) {
    value = mantissa == 0 ? INFINITY : NAN;
  } else if (exponent == 0) {
    value = std::ldexp(static_cast<float>(mantissa), 1 - l.bias - l.mantissa_bits);
  } else {
    value = std::ldexp(static_cast<float>((1 << l.mantissa_bits) + mantissa), exponent - l.bias - l.mantissa_bits);
  }
  return negative ? -value : value;
}

uint8_t fp8_encode(float x, Fp8Format format) {
  // On the float's bits: the magnitude's mantissa rounded to `mantissa_bits` (to nearest, ties to
  // even: add half an ulp minus one, plus the kept lowest bit), the exponent rebiased; below the
  // smallest normal the value is a multiple of the subnormal spacing, found by an exact scaling.
  const Layout l = layout(format);
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const auto sign = static_cast<uint8_t>((bits >> 24) & 0x80);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return static_cast<uint8_t>(sign | 0x7F);  // NaN
  const float value = std::bit_cast<float>(magnitude);
  if (value >= fp8_max(format)) return static_cast<uint8_t>(sign | l.max_code);
  const int min_exponent = 1 - l.bias;
  if (value < l.min_normal) {
    // Subnormal: value / 2^(min_exponent − mantissa_bits) is below 2^mantissa_bits and exact;
    // rounding up to 2^mantissa_bits gives the smallest normal's code, which is that number.
    const float steps = std::nearbyint(std::ldexp(value, l.mantissa_bits - min_exponent));
    return static_cast<uint8_t>(sign | static_cast<int>(steps));
  }
  const int drop = 23 - l.mantissa_bits;
  const uint32_t rounded = (magnitude + (1u << (drop - 1)) - 1u + ((magnitude >> drop) & 1u)) >> drop;
  const uint32_t code = rounded - (static_cast<uint32_t>(127 - l.bias) << l.mantissa_bits);
  return static_cast<uint8_t>(sign | std::min<uint32_t>(code, l.max_code));
}

const std::array<float, 256>& fp8_decoded(Fp8Format format) {
  static const auto table_of = [](Fp8Format f) {
    std::array<float, 256> values{};
    for (int code = 0; code < 256; ++code) values[code] = fp8_decode(static_cast<uint8_t>(code), f);
    return values;
  };
  static const std::array<float, 256> e4m3 = table_of(Fp8Format::E4M3), e5m2 = table_of(Fp8Format::E5M2);
  return format == Fp8Format::E4M3 ? e4m3 : e5m2;
}

void fp8_encode_scaled(const float* x, int64_t count, float scale, uint8_t* codes, Fp8Format format) {
  for (int64_t i = 0; i < count; ++i) codes[i] = fp8_encode(x[i] * scale, format);
}

float fp8_scale(float amax, Fp8Format format) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return 1.0f;
  return fp8_max(format) / amax;
}

}  // namespace surogate::quant
