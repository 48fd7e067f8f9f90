// bf16 stochastic rounding (core/stochastic_rounding.h), the write of `master_dtype: bf16`:
// exact values pass unchanged, every result is one of the two bf16 neighbours, the mean over many
// random draws is the fp32 value (unbiased), and the counter-based bits are a pure function of
// (seed, step, parameter, element).
//
// Tolerances: the mean of 2^16 roundings of a value 0.3 of the way between two neighbours a
// bf16 ulp apart is within 0.01 ulp of it (the binomial standard deviation is 0.0018 ulp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "core/bfloat16.h"
#include "core/stochastic_rounding.h"

namespace surogate {
namespace {

TEST(StochasticRounding, ExactValuesAreUnchangedForEveryRandomDraw) {
  for (float value : {0.0f, -0.0f, 1.0f, -2.5f, 0.15625f, 3.0e38f, 1.0e-38f}) {
    const uint16_t exact = float_to_bf16(value);
    if (bf16_to_float(exact) != value) continue;
    for (uint32_t random : {0u, 1u, 0x7fffu, 0xffffu}) EXPECT_EQ(stochastic_round_bf16(value, random), exact) << value;
  }
  const float infinity = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bf16_to_float(stochastic_round_bf16(infinity, 0xffffu)), infinity);
  EXPECT_EQ(bf16_to_float(stochastic_round_bf16(-infinity, 0xffffu)), -infinity);
  EXPECT_TRUE(std::isnan(bf16_to_float(stochastic_round_bf16(std::nanf(""), 0xffffu))));
}

TEST(StochasticRounding, RoundsToANeighbourWithoutBias) {
  // Powers of two, so one bf16 ulp above |low| is |low| · 2^-7.
  for (float low : {1.0f, -1.0f, 0.0078125f, -256.0f}) {
    const float ulp = std::abs(low) * 0x1p-7f;
    const float value = low + std::copysign(0.3f * ulp, low);
    const float high = low + std::copysign(ulp, low);
    double sum = 0.0;
    for (uint32_t random = 0; random < 65536; ++random) {
      const float rounded = bf16_to_float(stochastic_round_bf16(value, random));
      ASSERT_TRUE(rounded == low || rounded == high) << value << " -> " << rounded;
      sum += rounded;
    }
    EXPECT_NEAR((sum / 65536.0 - value) / ulp, 0.0, 0.01) << value;
  }
}

TEST(StochasticRounding, BitsArePureFunctionsOfSeedStepParameterAndElement) {
  const uint64_t key = rounding_parameter_key(rounding_step_key(1234, 7), 3);
  EXPECT_EQ(key, rounding_parameter_key(rounding_step_key(1234, 7), 3));
  EXPECT_NE(key, rounding_parameter_key(rounding_step_key(1234, 8), 3));
  EXPECT_NE(key, rounding_parameter_key(rounding_step_key(1235, 7), 3));
  EXPECT_NE(key, rounding_parameter_key(rounding_step_key(1234, 7), 4));
  std::set<uint32_t> seen;
  double sum = 0.0;
  for (uint64_t element = 0; element < 4096; ++element) {
    const uint32_t bits = rounding_bits(key, element);
    ASSERT_LT(bits, 65536u);
    seen.insert(bits);
    sum += bits;
  }
  EXPECT_GT(seen.size(), 3900u);                // 16-bit draws: few collisions among 4096
  EXPECT_NEAR(sum / 4096.0, 32767.5, 32767.5 * 0.05);  // uniform mean (σ of the mean ≈ 0.9%)
}

}  // namespace
}  // namespace surogate
