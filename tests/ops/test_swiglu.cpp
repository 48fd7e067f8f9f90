// SwiGLU (split and fused gate_up layouts) and residual add: formula, gradients, agreement.
#include <cmath>

#include "gradient_check.h"
#include "ops/residual.h"
#include "ops/swiglu.h"

namespace surogate::ops {
namespace {

using testing::random_vector;

TEST(Swiglu, ForwardMatchesFormulaAndFusedLayoutAgrees) {
  const int64_t rows = 3, intermediate = 7;
  const std::vector<double> gate = random_vector(rows * intermediate, 1, -4, 4);
  const std::vector<double> up = random_vector(rows * intermediate, 2);
  std::vector<double> out(rows * intermediate), fused_out(rows * intermediate);
  swiglu_forward(gate.data(), up.data(), rows, intermediate, out.data());
  std::vector<double> gate_up(rows * 2 * intermediate);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < intermediate; ++c) {
      gate_up[r * 2 * intermediate + c] = gate[r * intermediate + c];
      gate_up[r * 2 * intermediate + intermediate + c] = up[r * intermediate + c];
    }
  }
  swiglu_fused_forward(gate_up.data(), rows, intermediate, fused_out.data());
  for (size_t i = 0; i < out.size(); ++i) {
    const double expected = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
    EXPECT_NEAR(out[i], expected, 1e-15 * std::max(1.0, std::abs(expected)));
    EXPECT_EQ(fused_out[i], out[i]);
  }
}

TEST(Swiglu, GradientsMatchFiniteDifferences) {
  const int64_t rows = 5, intermediate = 9;
  std::vector<double> gate = random_vector(rows * intermediate, 3, -3, 3);
  std::vector<double> up = random_vector(rows * intermediate, 4);
  const std::vector<double> weights = random_vector(rows * intermediate, 5);
  std::vector<double> out(rows * intermediate);
  auto loss = [&] {
    swiglu_forward(gate.data(), up.data(), rows, intermediate, out.data());
    return testing::weighted_sum(out, weights);
  };
  std::vector<double> d_gate(gate.size()), d_up(up.size());
  swiglu_backward(weights.data(), gate.data(), up.data(), rows, intermediate, d_gate.data(),
                  d_up.data());
  testing::expect_gradient_matches(loss, gate, d_gate, 6, "d_gate");
  testing::expect_gradient_matches(loss, up, d_up, 7, "d_up");
}

TEST(Swiglu, FusedGradientsMatchFiniteDifferences) {
  const int64_t rows = 4, intermediate = 5;
  std::vector<double> gate_up = random_vector(rows * 2 * intermediate, 8, -3, 3);
  const std::vector<double> weights = random_vector(rows * intermediate, 9);
  std::vector<double> out(rows * intermediate);
  auto loss = [&] {
    swiglu_fused_forward(gate_up.data(), rows, intermediate, out.data());
    return testing::weighted_sum(out, weights);
  };
  std::vector<double> d_gate_up(gate_up.size());
  swiglu_fused_backward(weights.data(), gate_up.data(), rows, intermediate, d_gate_up.data());
  testing::expect_gradient_matches(loss, gate_up, d_gate_up, 10, "d_gate_up");
}

TEST(Swiglu, FloatAgreesWithDouble) {
  const int64_t rows = 6, intermediate = 11;
  const std::vector<double> gate = random_vector(rows * intermediate, 11, -5, 5);
  const std::vector<double> up = random_vector(rows * intermediate, 12);
  std::vector<double> out(rows * intermediate);
  std::vector<float> out_float(rows * intermediate);
  swiglu_forward(gate.data(), up.data(), rows, intermediate, out.data());
  const std::vector<float> gate_float = testing::to_float(gate), up_float = testing::to_float(up);
  swiglu_forward(gate_float.data(), up_float.data(), rows, intermediate, out_float.data());
  EXPECT_LT(testing::max_relative_error(out_float, out), testing::kFloatTolerance);
}

TEST(Residual, AddsAndPassesGradientThrough) {
  const std::vector<double> a = {1.0, 2.0}, b = {0.5, -4.0}, d_out = {3.0, -1.0};
  std::vector<double> out(2), d_a(2), d_b(2);
  residual_add_forward(a.data(), b.data(), 2, out.data());
  EXPECT_EQ(out, (std::vector<double>{1.5, -2.0}));
  residual_add_backward(d_out.data(), 2, d_a.data(), d_b.data());
  EXPECT_EQ(d_a, d_out);
  EXPECT_EQ(d_b, d_out);
}

}  // namespace
}  // namespace surogate::ops
