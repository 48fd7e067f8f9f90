// Global norm and clipping helpers against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/gradient_norm.h"

namespace surogate::ops {
namespace {

TEST(GradientNorm, GlobalNormOverBuffers) {
  const std::vector<float> first = {3.0f, 4.0f};
  const std::vector<float> second = {12.0f};
  const std::vector<std::span<const float>> buffers = {first, second};
  EXPECT_DOUBLE_EQ(sum_of_squares(first.data(), 2), 25.0);
  EXPECT_DOUBLE_EQ(global_norm<float>(buffers), 13.0);
}

TEST(GradientNorm, ClipCoefficientAndScale) {
  EXPECT_DOUBLE_EQ(clip_coefficient(0.5, 1.0), 1.0);
  EXPECT_NEAR(clip_coefficient(13.0, 1.0), 1.0 / (13.0 + 1e-6), 1e-15);
  std::vector<double> values = {1.0, -2.0, 4.0};
  scale(values.data(), 3, 0.5);
  EXPECT_EQ(values, (std::vector<double>{0.5, -1.0, 2.0}));
}

}  // namespace
}  // namespace surogate::ops
