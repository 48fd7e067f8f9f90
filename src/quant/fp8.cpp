// FP8 encoding and decoding; see fp8.h.
#include "quant/fp8.h"

#include <algorithm>
#include <cmath>

namespace surogate::quant {
namespace {

struct Layout {
  int mantissa_bits;
  int bias;
  uint8_t max_code;  // the largest finite magnitude's code
};

Layout layout(Fp8Format format) {
  return format == Fp8Format::E4M3 ? Layout{3, 7, 0x7E} : Layout{2, 15, 0x7B};
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
  const Layout l = layout(format);
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return static_cast<uint8_t>(sign | 0x7F);
  const double magnitude = std::fabs(static_cast<double>(x));
  if (magnitude >= fp8_max(format)) return static_cast<uint8_t>(sign | l.max_code);
  if (magnitude == 0.0) return sign;
  // The spacing of representable values around x: 2^(e − mantissa_bits) for x in [2^e, 2^(e+1)),
  // the subnormal spacing below the smallest normal exponent. x / spacing is exact in double, and
  // nearbyint rounds it to nearest, ties to even (the default rounding mode).
  const int min_exponent = 1 - l.bias;
  const int exponent = std::max(std::ilogb(magnitude), min_exponent);
  double steps = std::nearbyint(std::ldexp(magnitude, l.mantissa_bits - exponent));
  const int implicit = 1 << l.mantissa_bits;
  int biased = exponent + l.bias;
  if (steps < implicit) {  // subnormal (only reachable at the smallest exponent)
    return static_cast<uint8_t>(sign | static_cast<int>(steps));
  }
  if (steps == 2 * implicit) {  // rounded up into the next binade
    steps = implicit;
    ++biased;
  }
  const int code = (biased << l.mantissa_bits) | (static_cast<int>(steps) - implicit);
  return static_cast<uint8_t>(sign | std::min(code, static_cast<int>(l.max_code)));
}

float fp8_scale(float amax, Fp8Format format) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return 1.0f;
  return fp8_max(format) / amax;
}

}  // namespace surogate::quant
