// FP8 E4M3 / E5M2 encoding (quant/fp8.h): every finite code round-trips; values between two
// neighbours go to the nearer one and ties to the even code; magnitudes at or past the largest
// finite value saturate to it (infinity included); subnormals; the scale rule. (The CUDA
// conversion is compared with this one bit for bit in tests/runtime_cuda/test_fp8_cuda.cpp.)
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "quant/fp8.h"

namespace surogate::quant {
namespace {

bool is_finite_code(uint8_t code, Fp8Format format) { return std::isfinite(fp8_decode(code, format)); }

class Fp8Formats : public ::testing::TestWithParam<Fp8Format> {};

TEST_P(Fp8Formats, EveryFiniteCodeRoundTrips) {
  const Fp8Format format = GetParam();
  int finite = 0;
  for (int code = 0; code < 256; ++code) {
    const auto c = static_cast<uint8_t>(code);
    if (!is_finite_code(c, format)) continue;
    ++finite;
    EXPECT_EQ(fp8_encode(fp8_decode(c, format), format), c) << "code " << code;
  }
  EXPECT_EQ(finite, format == Fp8Format::E4M3 ? 254 : 248);
}

TEST_P(Fp8Formats, DecodesTheFormatsLandmarks) {
  const Fp8Format format = GetParam();
  const bool e4m3 = format == Fp8Format::E4M3;
  EXPECT_EQ(fp8_decode(e4m3 ? 0x7E : 0x7B, format), e4m3 ? 448.0f : 57344.0f);
  EXPECT_EQ(fp8_decode(0x01, format), e4m3 ? std::ldexp(1.0f, -9) : std::ldexp(1.0f, -16));
  EXPECT_EQ(fp8_decode(e4m3 ? 0x08 : 0x04, format), e4m3 ? std::ldexp(1.0f, -6) : std::ldexp(1.0f, -14));
  EXPECT_EQ(fp8_decode(e4m3 ? 0x38 : 0x3C, format), 1.0f);
  EXPECT_EQ(fp8_decode(e4m3 ? 0xB8 : 0xBC, format), -1.0f);
  EXPECT_TRUE(std::isnan(fp8_decode(0x7F, format)));
  if (!e4m3) EXPECT_EQ(fp8_decode(0x7C, format), std::numeric_limits<float>::infinity());
}

// Between neighbouring positive codes c and c+1: a value just below the midpoint encodes to c,
// just above to c+1, the midpoint itself to the even one; and negatives mirror it.
TEST_P(Fp8Formats, RoundsToNearestTiesToEven) {
  const Fp8Format format = GetParam();
  const uint8_t last = format == Fp8Format::E4M3 ? 0x7E : 0x7B;
  for (uint8_t code = 0; code < last; ++code) {
    const float low = fp8_decode(code, format), high = fp8_decode(static_cast<uint8_t>(code + 1), format);
    const float mid = (low + high) / 2;  // exact: both are short binary fractions
    EXPECT_EQ(fp8_encode(std::nextafter(mid, low), format), code);
    EXPECT_EQ(fp8_encode(std::nextafter(mid, high), format), code + 1);
    EXPECT_EQ(fp8_encode(mid, format), code % 2 == 0 ? code : code + 1) << "tie after code " << int(code);
    EXPECT_EQ(fp8_encode(-std::nextafter(mid, high), format), 0x80 | (code + 1));
  }
}

TEST_P(Fp8Formats, SaturatesAndKeepsSignsOfZeroAndNaN) {
  const Fp8Format format = GetParam();
  const uint8_t max_code = format == Fp8Format::E4M3 ? 0x7E : 0x7B;
  const float max = fp8_max(format);
  EXPECT_EQ(fp8_encode(max, format), max_code);
  EXPECT_EQ(fp8_encode(max * 1.01f, format), max_code);
  EXPECT_EQ(fp8_encode(1e30f, format), max_code);
  EXPECT_EQ(fp8_encode(std::numeric_limits<float>::infinity(), format), max_code);
  EXPECT_EQ(fp8_encode(-std::numeric_limits<float>::infinity(), format), 0x80 | max_code);
  EXPECT_EQ(fp8_encode(0.0f, format), 0x00);
  EXPECT_EQ(fp8_encode(-0.0f, format), 0x80);
  EXPECT_EQ(fp8_encode(std::numeric_limits<float>::quiet_NaN(), format), 0x7F);
  // Below half the smallest subnormal: zero; just above: the smallest subnormal.
  const float tiny = fp8_decode(0x01, format);
  EXPECT_EQ(fp8_encode(tiny / 2, format), 0x00);  // a tie, to the even code 0
  EXPECT_EQ(fp8_encode(std::nextafter(tiny / 2, 1.0f), format), 0x01);
}

INSTANTIATE_TEST_SUITE_P(Fp8, Fp8Formats, ::testing::Values(Fp8Format::E4M3, Fp8Format::E5M2),
                         [](const auto& info) { return info.param == Fp8Format::E4M3 ? "E4M3" : "E5M2"; });

TEST(Fp8Scale, IsMaxOverAmaxOrOne) {
  EXPECT_EQ(fp8_scale(2.0f, Fp8Format::E4M3), 224.0f);
  EXPECT_EQ(fp8_scale(57344.0f, Fp8Format::E5M2), 1.0f);
  EXPECT_EQ(fp8_scale(0.0f, Fp8Format::E4M3), 1.0f);
  EXPECT_EQ(fp8_scale(std::numeric_limits<float>::infinity(), Fp8Format::E4M3), 1.0f);
  EXPECT_EQ(fp8_scale(std::numeric_limits<float>::quiet_NaN(), Fp8Format::E5M2), 1.0f);
  // The scaled amax lands on the largest finite value (or within its rounding).
  const float amax = 3.7f;
  EXPECT_EQ(fp8_encode(amax * fp8_scale(amax, Fp8Format::E4M3), Fp8Format::E4M3), 0x7E);
}

}  // namespace
}  // namespace surogate::quant

namespace surogate::quant {
namespace {

// The encoder against a plain definition (nearest representable value by search over every finite
// code, ties to the even code, saturating) on a sweep of floats: every exponent, mantissas near
// the rounding boundaries, and random bit patterns.
uint8_t encode_by_search(float x, Fp8Format format) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= fp8_max(format)) return static_cast<uint8_t>(sign | (format == Fp8Format::E4M3 ? 0x7E : 0x7B));
  int best = 0;
  double best_distance = INFINITY;
  for (int code = 0; code < 0x80; ++code) {
    const float value = fp8_decode(static_cast<uint8_t>(code), format);
    if (!std::isfinite(value)) continue;
    const double distance = std::fabs(a - value);
    if (distance < best_distance || (distance == best_distance && code % 2 == 0)) {
      best = code;
      best_distance = distance;
    }
  }
  return static_cast<uint8_t>(sign | best);
}

TEST_P(Fp8Formats, EncoderEqualsNearestBySearch) {
  const Fp8Format format = GetParam();
  uint32_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 1664525u + 1013904223u;
    // Exponents from 2^-30 to 2^20 (beyond both formats' ranges), any mantissa.
    const uint32_t exponent = 97 + (state >> 8) % 51;
    const uint32_t bits = ((state & 1u) << 31) | (exponent << 23) | ((state * 2654435761u) & 0x7FFFFFu);
    const float x = std::bit_cast<float>(bits);
    ASSERT_EQ(fp8_encode(x, format), encode_by_search(x, format)) << x;
  }
}

}  // namespace
}  // namespace surogate::quant
