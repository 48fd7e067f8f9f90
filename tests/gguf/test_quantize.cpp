// ggml's quantizers (gguf/quantize.h): hand-computed blocks, and round trips within each format's
// error on random data. gguf-py's own quantizer checks the bytes in tests/python/test_gguf_export.py.
#include <cmath>
#include <cstring>
#include <tuple>

#include <gtest/gtest.h>

#include "core/bfloat16.h"
#include "gguf/quantize.h"
#include "gguf/quantize_k.h"
#include "random_values.h"

namespace surogate::gguf {
namespace {

using surogate::testing::normal_values;

double relative_rms_error(const std::vector<float>& values, const std::vector<float>& decoded) {
  double error = 0, norm = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    error += (values[i] - decoded[i]) * (values[i] - decoded[i]);
    norm += values[i] * values[i];
  }
  return std::sqrt(error / norm);
}

TEST(Quantize, NearestIntRoundsHalfToEvenLikeGgml) {
  EXPECT_EQ(detail::nearest_int(2.5f), 2);
  EXPECT_EQ(detail::nearest_int(3.5f), 4);
  EXPECT_EQ(detail::nearest_int(-2.5f), -2);
  EXPECT_EQ(detail::nearest_int(-2.6f), -3);
  EXPECT_EQ(detail::nearest_int(62.49f), 62);
}

TEST(Quantize, Q8_0BlockIsScaleThenRoundedCodes) {
  std::vector<float> values(32);
  for (int i = 0; i < 32; ++i) values[i] = static_cast<float>(i) - 16.0f;  // amax 16
  const std::vector<std::byte> bytes = quantize(GgmlType::Q8_0, values);
  ASSERT_EQ(bytes.size(), 34u);
  uint16_t d;
  std::memcpy(&d, bytes.data(), 2);
  EXPECT_EQ(d, float_to_f16(16.0f / 127.0f));
  for (int i = 0; i < 32; ++i) {
    const int expected = static_cast<int>(std::roundf(values[i] * (1.0f / (16.0f / 127.0f))));
    EXPECT_EQ(static_cast<int8_t>(bytes[2 + i]), expected) << i;
  }
  EXPECT_EQ(static_cast<int8_t>(bytes[2]), -127);  // -16 is the largest magnitude
}

TEST(Quantize, ZeroBlocksDecodeToZero) {
  const std::vector<float> zeros(256, 0.0f);
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const std::vector<float> decoded = dequantize(type, quantize(type, zeros), 256);
    for (float value : decoded) ASSERT_EQ(value, 0.0f) << type_name(type);
  }
}

TEST(Quantize, SizesFollowTheBlockLayouts) {
  const std::vector<float> values = normal_values(512, 1);
  EXPECT_EQ(quantize(GgmlType::Q8_0, values).size(), 16u * 34);
  EXPECT_EQ(quantize(GgmlType::Q5_0, values).size(), 16u * 22);
  EXPECT_EQ(quantize(GgmlType::Q5_1, values).size(), 16u * 24);
  EXPECT_EQ(quantize(GgmlType::Q4_K, values).size(), 2u * 144);
  EXPECT_EQ(quantize(GgmlType::Q5_K, values).size(), 2u * 176);
  EXPECT_EQ(quantize(GgmlType::Q6_K, values).size(), 2u * 210);
  EXPECT_EQ(quantize(GgmlType::F16, values).size(), 1024u);
  EXPECT_EQ(quantize(GgmlType::BF16, values).size(), 1024u);
}

TEST(Quantize, BlockFormatsStayWithinOneStepOfTheirScale) {
  // Q8_0 (d = amax / 127): |error| ≤ d / 2 from rounding the code; Q5_0 (d = -max / 16, codes -16..15):
  // one whole d, since values near +16 d clamp to 15 when the largest magnitude was negative. Plus up
  // to `steps` times the fp16 rounding of d (2^-11 relative).
  const std::vector<float> values = normal_values(32 * 64, 7, 0.02f);
  for (auto [type, steps, rounding] : {std::tuple{GgmlType::Q8_0, 127.0f, 0.5f}, std::tuple{GgmlType::Q5_0, 16.0f, 1.0f}}) {
    const std::vector<float> decoded = dequantize(type, quantize(type, values), static_cast<int64_t>(values.size()));
    for (size_t block = 0; block < values.size() / 32; ++block) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(values[block * 32 + i]));
      const float bound = amax / steps * (rounding + steps / 2048.0f) * 1.001f;
      for (int i = 0; i < 32; ++i) {
        const size_t at = block * 32 + i;
        ASSERT_LE(std::fabs(values[at] - decoded[at]), bound) << type_name(type) << " value " << at;
      }
    }
  }
}

TEST(Quantize, RoundTripErrorsAreThoseOfEachFormat) {
  // Relative RMS errors on Gaussian weights: a uniform quantizer's step / sqrt(12) over each block's
  // range (Q4_K: 32 values span about 4.1 sigma in 15 steps → 0.079; measured 0.0718; Q5_0 0.0425,
  // Q5_1 0.0377, Q5_K 0.0360, Q6_K 0.0178, Q8_0 0.0053). Bounds sit 15 % above the measurements, so
  // a quantizer that loses a bit fails; F16 / BF16 round to nearest (2^-11, 2^-8 relative).
  const std::vector<float> values = normal_values(256 * 64, 11, 0.02f);
  const std::vector<std::pair<GgmlType, double>> bounds = {
      {GgmlType::F16, 3e-4}, {GgmlType::BF16, 2.5e-3}, {GgmlType::Q8_0, 0.0062}, {GgmlType::Q6_K, 0.0205},
      {GgmlType::Q5_K, 0.0415}, {GgmlType::Q5_1, 0.0435}, {GgmlType::Q5_0, 0.049}, {GgmlType::Q4_K, 0.083}};
  for (const auto& [type, bound] : bounds) {
    const std::vector<float> decoded = dequantize(type, quantize(type, values), static_cast<int64_t>(values.size()));
    EXPECT_LT(relative_rms_error(values, decoded), bound) << type_name(type);
  }
}

TEST(Quantize, KQuantsKeepOutliersAndSignsOfEachSubBlock) {
  // One large value per 32-value sub-block and mixed signs: every decoded value keeps its sign when it
  // is larger than the sub-block's step, and the outlier is reproduced within 2 %.
  std::vector<float> values = normal_values(256, 3, 0.01f);
  for (int sub = 0; sub < 8; ++sub) values[sub * 32 + 5] = (sub % 2 ? -1.0f : 1.0f) * 0.5f;
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const std::vector<float> decoded = dequantize(type, quantize(type, values), 256);
    for (int sub = 0; sub < 8; ++sub) {
      EXPECT_NEAR(decoded[sub * 32 + 5], values[sub * 32 + 5], 0.01) << type_name(type) << " sub-block " << sub;
    }
  }
}

}  // namespace
}  // namespace surogate::gguf
