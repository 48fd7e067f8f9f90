#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "core/bfloat16.h"

namespace surogate {
namespace {

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 lies exactly between two bf16 values; ties go to the even mantissa (1.0).
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Float16, RoundTripsEveryHalfValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    uint16_t half = static_cast<uint16_t>(bits);
    float value = f16_to_float(half);
    if (std::isnan(value)) continue;
    EXPECT_EQ(float_to_f16(value), half) << "bits " << bits;
  }
}

TEST(Float16, RoundsRandomFloatsToNearest) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-70000.0f, 70000.0f);
  for (int i = 0; i < 10000; ++i) {
    float value = dist(rng) * std::ldexp(1.0f, -static_cast<int>(rng() % 30));
    float rounded = f16_to_float(float_to_f16(value));
    if (std::isinf(rounded)) {
      EXPECT_GE(std::fabs(value), 65520.0f);
      continue;
    }
    // No half value is closer than the one chosen.
    uint16_t half = float_to_f16(value);
    float below = f16_to_float(static_cast<uint16_t>(half - 1));
    float above = f16_to_float(static_cast<uint16_t>(half + 1));
    EXPECT_LE(std::fabs(rounded - value), std::fabs(below - value) + 1e-30f);
    if (!std::isinf(above)) EXPECT_LE(std::fabs(rounded - value), std::fabs(above - value) + 1e-30f);
  }
}

}  // namespace
}  // namespace surogate
