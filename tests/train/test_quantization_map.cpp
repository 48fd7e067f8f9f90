#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "train/optim/quantization_map.h"

namespace surogate::train {
namespace {

TEST(QuantizationMap, SignedAndUnsignedMapsAreSortedAndSpanTheirRange) {
  const auto& signed_map = dynamic_quantization_map(true);
  const auto& unsigned_map = dynamic_quantization_map(false);
  for (size_t i = 1; i < 256; ++i) {
    EXPECT_LT(signed_map[i - 1], signed_map[i]);
    EXPECT_LT(unsigned_map[i - 1], unsigned_map[i]);
  }
  EXPECT_FLOAT_EQ(signed_map[255], 1.0f);
  EXPECT_LT(signed_map[0], -0.99f);
  EXPECT_FLOAT_EQ(unsigned_map[0], 0.0f);
  EXPECT_FLOAT_EQ(unsigned_map[255], 1.0f);
  // Dense near zero: the smallest positive code is below 1e-6.
  EXPECT_LT(unsigned_map[1], 1e-6f);
}

TEST(QuantizationMap, BlockwiseRoundTripKeepsRelativePrecisionAcrossDecades) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(5000);
  // Values spanning several orders of magnitude, as Adam's moments do.
  for (auto& value : values) value = normal(rng) * std::pow(10.0f, -static_cast<float>(rng() % 4));
  std::vector<uint8_t> codes(values.size());
  std::vector<float> absmax(quantization_blocks(values.size()));
  std::vector<float> restored(values.size());
  const auto& code = dynamic_quantization_map(true);
  quantize_blockwise(values, code, codes, absmax);
  dequantize_blockwise(codes, absmax, code, restored);
  for (size_t i = 0; i < values.size(); ++i) {
    float block_max = absmax[i / kQuantizationBlockSize];
    // Error bounded by half the local code spacing: about 1/2 of a fraction step of the
    // value's own decade (worst at the coarsest exponent: 0.9/2 of that decade), plus the
    // 1e-7 floor of the map relative to the block maximum.
    float magnitude = std::fabs(values[i]);
    EXPECT_LE(std::fabs(restored[i] - values[i]), 0.5f * magnitude + 1e-6f * block_max) << i;
    if (magnitude > 0.05f * block_max) EXPECT_LE(std::fabs(restored[i] - values[i]), 0.06f * magnitude) << i;
  }
}

}  // namespace
}  // namespace surogate::train
