// RMSNorm and fused residual + RMSNorm: forward against the formula, gradients by finite
// differences, accumulation of d_weight, per-head use (Qwen3 q/k norm), float vs double.
#include <cmath>

#include "gradient_check.h"
#include "ops/rmsnorm.h"

namespace surogate::ops {
namespace {

using testing::random_vector;

TEST(RmsNorm, ForwardMatchesFormula) {
  const int64_t rows = 3, dim = 7;
  const double eps = 1e-6;
  const std::vector<double> x = random_vector(rows * dim, 1), weight = random_vector(dim, 2);
  std::vector<double> y(rows * dim), rstd(rows);
  rmsnorm_forward(x.data(), weight.data(), rows, dim, eps, y.data(), rstd.data());
  for (int64_t r = 0; r < rows; ++r) {
    double mean_square = 0.0;
    for (int64_t c = 0; c < dim; ++c) mean_square += x[r * dim + c] * x[r * dim + c] / dim;
    const double expected_rstd = 1.0 / std::sqrt(mean_square + eps);
    EXPECT_NEAR(rstd[r], expected_rstd, 1e-14 * expected_rstd);
    for (int64_t c = 0; c < dim; ++c) {
      EXPECT_NEAR(y[r * dim + c], weight[c] * x[r * dim + c] * expected_rstd, 1e-14);
    }
  }
}

TEST(RmsNorm, GradientsMatchFiniteDifferences) {
  for (int64_t dim : {1, 6, 13}) {
    const int64_t rows = 5;
    std::vector<double> x = random_vector(rows * dim, 10 + dim);
    std::vector<double> weight = random_vector(dim, 20 + dim, 0.5, 1.5);
    const std::vector<double> weights = random_vector(rows * dim, 30 + dim);
    std::vector<double> y(rows * dim), rstd(rows);
    auto loss = [&] {
      rmsnorm_forward(x.data(), weight.data(), rows, dim, 1e-5, y.data(), rstd.data());
      return testing::weighted_sum(y, weights);
    };
    loss();
    std::vector<double> d_x(x.size()), d_weight(dim, 0.0);
    rmsnorm_backward(weights.data(), x.data(), weight.data(), rstd.data(), rows, dim, d_x.data(),
                     d_weight.data());
    testing::expect_gradient_matches(loss, x, d_x, 40 + dim, "d_x");
    testing::expect_gradient_matches(loss, weight, d_weight, 50 + dim, "d_weight");

    const std::vector<double> once = d_weight;
    rmsnorm_backward(weights.data(), x.data(), weight.data(), rstd.data(), rows, dim, d_x.data(),
                     d_weight.data());
    for (int64_t c = 0; c < dim; ++c) EXPECT_NEAR(d_weight[c], 2.0 * once[c], 1e-14);
  }
}

TEST(RmsNorm, FusedResidualGradientsMatchFiniteDifferences) {
  const int64_t rows = 4, dim = 9;
  std::vector<double> residual = random_vector(rows * dim, 61), x = random_vector(rows * dim, 62);
  std::vector<double> weight = random_vector(dim, 63, 0.5, 1.5);
  const std::vector<double> weights_y = random_vector(rows * dim, 64);
  const std::vector<double> weights_residual = random_vector(rows * dim, 65);
  std::vector<double> residual_out(rows * dim), y(rows * dim), rstd(rows);
  auto loss = [&] {
    fused_residual_rmsnorm_forward(residual.data(), x.data(), weight.data(), rows, dim, 1e-6,
                                   residual_out.data(), y.data(), rstd.data());
    return testing::weighted_sum(y, weights_y) +
           testing::weighted_sum(residual_out, weights_residual);
  };
  loss();
  for (int64_t i = 0; i < rows * dim; ++i) EXPECT_EQ(residual_out[i], residual[i] + x[i]);
  std::vector<double> d_input(rows * dim), d_weight(dim, 0.0);
  fused_residual_rmsnorm_backward(weights_y.data(), weights_residual.data(), residual_out.data(),
                                  weight.data(), rstd.data(), rows, dim, d_input.data(),
                                  d_weight.data());
  testing::expect_gradient_matches(loss, residual, d_input, 66, "d_residual_in");
  testing::expect_gradient_matches(loss, x, d_input, 67, "d_x");
  testing::expect_gradient_matches(loss, weight, d_weight, 68, "d_weight");
}

TEST(RmsNorm, PerHeadNormIsRowsOfHeads) {
  // Qwen3 q_norm: x [N, H, D] normalized over D with one weight [D]: rows = N * H.
  const int64_t tokens = 3, heads = 4, head_dim = 8;
  const std::vector<double> x = random_vector(tokens * heads * head_dim, 70);
  const std::vector<double> weight = random_vector(head_dim, 71);
  std::vector<double> y(x.size()), rstd(tokens * heads);
  rmsnorm_forward(x.data(), weight.data(), tokens * heads, head_dim, 1e-6, y.data(), rstd.data());
  for (int64_t row = 0; row < tokens * heads; ++row) {
    std::vector<double> single(head_dim), single_rstd(1);
    rmsnorm_forward(x.data() + row * head_dim, weight.data(), 1, head_dim, 1e-6, single.data(),
                    single_rstd.data());
    for (int64_t c = 0; c < head_dim; ++c) EXPECT_EQ(y[row * head_dim + c], single[c]);
  }
}

TEST(RmsNorm, FloatAgreesWithDouble) {
  const int64_t rows = 7, dim = 33;
  const std::vector<double> x = random_vector(rows * dim, 80, -3, 3),
                            weight = random_vector(dim, 81);
  std::vector<double> y(rows * dim), rstd(rows);
  rmsnorm_forward(x.data(), weight.data(), rows, dim, 1e-6, y.data(), rstd.data());
  const std::vector<float> x_float = testing::to_float(x), weight_float = testing::to_float(weight);
  std::vector<float> y_float(rows * dim), rstd_float(rows);
  rmsnorm_forward(x_float.data(), weight_float.data(), rows, dim, 1e-6, y_float.data(),
                  rstd_float.data());
  EXPECT_LT(testing::max_relative_error(y_float, y), testing::kFloatTolerance);
}

}  // namespace
}  // namespace surogate::ops
