// Shared helpers for the op tests: seeded random buffers, a scalar probe loss
// L = Σ out · weights (so ∂L/∂out = weights is the upstream gradient fed to a backward), and
// central finite-difference checks of an analytic gradient in double precision:
//  - a directional derivative (L(x + h·u) − L(x − h·u)) / 2h against ⟨grad, u⟩, and
//  - a few single elements against their own differences.
// Tolerance: relative error < 1e-6, where the elementwise denominator has a floor of
// 1e-3 · max|grad| so exact zeros (masked / ignored entries) are judged against noise.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace surogate::ops::testing {

inline constexpr double kFiniteDifferenceStep = 1e-5;
inline constexpr double kGradientTolerance = 1e-6;

inline std::vector<double> random_vector(size_t count, uint64_t seed, double low = -1.0,
                                         double high = 1.0) {
  std::mt19937_64 generator(seed);
  std::uniform_real_distribution<double> distribution(low, high);
  std::vector<double> values(count);
  for (double& value : values) value = distribution(generator);
  return values;
}

inline std::vector<float> to_float(const std::vector<double>& values) {
  return std::vector<float>(values.begin(), values.end());
}

inline double weighted_sum(const std::vector<double>& values, const std::vector<double>& weights) {
  double sum = 0.0;
  for (size_t i = 0; i < values.size(); ++i) sum += values[i] * weights[i];
  return sum;
}

inline double relative_difference(double a, double b, double floor = 1e-12) {
  return std::abs(a - b) / std::max({std::abs(a), std::abs(b), floor});
}

// `loss` recomputes the probe loss from the current contents of `x`; x is restored after and
// `loss` is run once more, so buffers the forward saves match the unperturbed inputs again.
inline void expect_gradient_matches(const std::function<double()>& loss, std::vector<double>& x,
                                    const std::vector<double>& gradient, uint64_t seed,
                                    const std::string& name, int spot_elements = 6) {
  ASSERT_EQ(x.size(), gradient.size()) << name;
  const double step = kFiniteDifferenceStep;
  const std::vector<double> original = x;

  const std::vector<double> direction = random_vector(x.size(), seed ^ 0x9e3779b97f4a7c15ull);
  for (size_t i = 0; i < x.size(); ++i) x[i] = original[i] + step * direction[i];
  const double plus = loss();
  for (size_t i = 0; i < x.size(); ++i) x[i] = original[i] - step * direction[i];
  const double minus = loss();
  x = original;
  const double numeric = (plus - minus) / (2.0 * step);
  const double analytic = weighted_sum(gradient, direction);
  EXPECT_LT(relative_difference(numeric, analytic), kGradientTolerance)
      << name << " directional derivative: numeric " << numeric << " analytic " << analytic;

  double largest = 0.0;
  for (double value : gradient) largest = std::max(largest, std::abs(value));
  std::mt19937_64 generator(seed + 17);
  std::uniform_int_distribution<size_t> pick(0, x.size() - 1);
  for (int spot = 0; spot < spot_elements; ++spot) {
    const size_t index = pick(generator);
    x[index] = original[index] + step;
    const double element_plus = loss();
    x[index] = original[index] - step;
    const double element_minus = loss();
    x[index] = original[index];
    const double element_numeric = (element_plus - element_minus) / (2.0 * step);
    EXPECT_LT(relative_difference(element_numeric, gradient[index], 1e-3 * largest + 1e-12),
              kGradientTolerance)
        << name << "[" << index << "]: numeric " << element_numeric << " analytic "
        << gradient[index];
  }
  loss();  // leave the forward's saved state (rstd, logsumexp, ...) as it was for x
}

// Float forward agrees with double within this relative tolerance (on the max-norm).
inline constexpr double kFloatTolerance = 1e-5;

inline double max_relative_error(const std::vector<float>& single,
                                 const std::vector<double>& reference) {
  double largest = 0.0, error = 0.0;
  for (size_t i = 0; i < reference.size(); ++i) {
    largest = std::max(largest, std::abs(reference[i]));
    error = std::max(error, std::abs(static_cast<double>(single[i]) - reference[i]));
  }
  return error / std::max(largest, 1e-30);
}

}  // namespace surogate::ops::testing
