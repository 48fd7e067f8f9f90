// Counter-based dropout: keep rate, inverted scaling, determinism per (seed, stream), and the
// gradient (the same mask applied to d_out) against finite differences.
#include <cmath>

#include "gradient_check.h"
#include "ops/dropout.h"

namespace surogate::ops {
namespace {

using testing::random_vector;

TEST(Dropout, KeepsAboutOneMinusPAndScalesKeptElements) {
  const int64_t count = 20000;
  const double p = 0.25;
  const std::vector<double> x = random_vector(count, 1, 0.5, 1.5);  // never zero
  std::vector<double> out(count);
  dropout_forward(x.data(), count, p, 42, 7, out.data());
  int64_t kept = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (out[i] != 0.0) {
      ++kept;
      EXPECT_DOUBLE_EQ(out[i], x[i] / (1.0 - p));
    }
  }
  // Binomial(20000, 0.75): standard deviation 61; 5 sigma.
  EXPECT_NEAR(static_cast<double>(kept), 0.75 * count, 310.0);
}

TEST(Dropout, MaskIsAFunctionOfSeedStreamAndIndex) {
  const int64_t count = 512;
  const std::vector<float> x(count, 1.0f);
  std::vector<float> a(count), b(count), other_seed(count), other_stream(count);
  dropout_forward(x.data(), count, 0.5, 3, 1, a.data());
  dropout_forward(x.data(), count, 0.5, 3, 1, b.data());
  dropout_forward(x.data(), count, 0.5, 4, 1, other_seed.data());
  dropout_forward(x.data(), count, 0.5, 3, 2, other_stream.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, other_seed);
  EXPECT_NE(a, other_stream);
  for (int64_t i = 0; i < count; ++i) EXPECT_EQ(a[i] != 0.0f, dropout_keeps(3, 1, static_cast<uint64_t>(i), 0.5));
}

TEST(Dropout, ZeroProbabilityIsTheIdentity) {
  const std::vector<double> x = random_vector(100, 2);
  std::vector<double> out(100);
  dropout_forward(x.data(), 100, 0.0, 9, 9, out.data());
  EXPECT_EQ(out, x);
}

TEST(Dropout, GradientIsTheSameMaskOnTheUpstreamGradient) {
  const int64_t count = 64;
  std::vector<double> x = random_vector(count, 3);
  const std::vector<double> weights = random_vector(count, 4);
  std::vector<double> out(count);
  auto loss = [&] {
    dropout_forward(x.data(), count, 0.3, 11, 5, out.data());
    return testing::weighted_sum(out, weights);
  };
  std::vector<double> d_x(count);
  dropout_forward(weights.data(), count, 0.3, 11, 5, d_x.data());
  testing::expect_gradient_matches(loss, x, d_x, 12, "d_x");
}

// The applied rate is p rounded to a multiple of 2^-16 and kept elements are scaled by its exact
// inverse, so the expectation of out is x; 0.05 -> 3277/65536.
TEST(Dropout, RateIsPRoundedToSixteenBitsAndScaleIsItsInverse) {
  EXPECT_EQ(dropout_threshold16(0.05), 3277u);
  EXPECT_EQ(dropout_threshold16(0.0), 0u);
  EXPECT_EQ(dropout_threshold16(0.999999), 65535u);
  EXPECT_DOUBLE_EQ(dropout_keep_scale(0.05), 65536.0 / (65536.0 - 3277.0));
  // Every one of the four 16-bit lanes of a hash is used: the keep rate holds for each lane.
  const int64_t count = 400000;
  int64_t kept[4] = {0, 0, 0, 0};
  for (int64_t i = 0; i < count; ++i) kept[i % 4] += dropout_keeps(5, 3, static_cast<uint64_t>(i), 0.3) ? 1 : 0;
  for (int lane = 0; lane < 4; ++lane) {
    // Binomial(100000, 0.7): standard deviation 145; 5 sigma.
    EXPECT_NEAR(static_cast<double>(kept[lane]), 0.7 * count / 4, 725.0) << "lane " << lane;
  }
}

// dropout_add (the gradient form that folds a pending sum) is addend + dropout(x), element for
// element, with the same mask.
TEST(Dropout, AddendFormAddsTheDroppedValues) {
  const int64_t count = 1000;
  const std::vector<double> x = random_vector(count, 5), addend = random_vector(count, 6);
  std::vector<double> dropped(count), summed(count);
  dropout_forward(x.data(), count, 0.2, 17, 4, dropped.data());
  dropout_forward(x.data(), count, 0.2, 17, 4, summed.data(), addend.data());
  for (int64_t i = 0; i < count; ++i) EXPECT_EQ(summed[i], addend[i] + dropped[i]) << i;
}

}  // namespace
}  // namespace surogate::ops
