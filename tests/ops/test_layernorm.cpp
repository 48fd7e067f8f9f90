// LayerNorm (with and without bias): forward against torch's values and a direct evaluation,
// gradients of x, weight and bias against finite differences, accumulation into d_weight / d_bias,
// null parameter gradients, float against double.
#include <cmath>

#include "gradient_check.h"
#include "ops/layernorm.h"

namespace surogate::ops {
namespace {

using testing::random_vector;

// torch.nn.functional.layer_norm(x, (4,), w, b, eps=1e-5) in float64 for
// x = [[1, 2, 3, 5], [-1, 0.5, 0.25, 4]], w = [1, -2, 0.5, 3], b = [0.1, 0, -0.2, 1].
TEST(LayerNorm, ValuesMatchTorch) {
  const std::vector<double> x = {1, 2, 3, 5, -1, 0.5, 0.25, 4}, w = {1, -2, 0.5, 3}, b = {0.1, 0, -0.2, 1};
  const std::vector<double> expected = {-1.0832132521355804, 1.0141827875447833, -0.11548476770460141, 5.563822543951525,
                                        -0.9432315493397615, 0.47113682873408574, -0.385089468431248,   5.946936701707902};
  std::vector<double> y(8), mean(2), rstd(2);
  layernorm_forward(x.data(), w.data(), b.data(), 2, 4, 1e-5, y.data(), mean.data(), rstd.data());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], expected[i], 1e-14) << i;
  EXPECT_DOUBLE_EQ(mean[0], 2.75);
  EXPECT_DOUBLE_EQ(mean[1], 0.9375);
}

TEST(LayerNorm, WithoutBiasIsTheAffineMapWithoutShift) {
  const int64_t rows = 3, dim = 10;
  const std::vector<double> x = random_vector(rows * dim, 1, -3, 3), w = random_vector(dim, 2);
  std::vector<double> y(x.size()), mean(rows), rstd(rows);
  layernorm_forward(x.data(), w.data(), static_cast<const double*>(nullptr), rows, dim, 1e-6, y.data(), mean.data(), rstd.data());
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0, squares = 0;
    for (int64_t c = 0; c < dim; ++c) sum += x[r * dim + c];
    const double m = sum / dim;
    for (int64_t c = 0; c < dim; ++c) squares += (x[r * dim + c] - m) * (x[r * dim + c] - m);
    const double s = 1.0 / std::sqrt(squares / dim + 1e-6);
    EXPECT_NEAR(rstd[r], s, 1e-14 * s);
    for (int64_t c = 0; c < dim; ++c) EXPECT_NEAR(y[r * dim + c], (x[r * dim + c] - m) * s * w[c], 1e-13);
  }
}

TEST(LayerNorm, GradientsMatchFiniteDifferences) {
  const int64_t rows = 5, dim = 7;
  std::vector<double> x = random_vector(rows * dim, 3, -2, 2), w = random_vector(dim, 4), b = random_vector(dim, 5);
  const std::vector<double> weights = random_vector(rows * dim, 6);
  std::vector<double> y(x.size()), mean(rows), rstd(rows);
  auto loss = [&] {
    layernorm_forward(x.data(), w.data(), b.data(), rows, dim, 1e-5, y.data(), mean.data(), rstd.data());
    return testing::weighted_sum(y, weights);
  };
  loss();
  std::vector<double> d_x(x.size()), d_w(dim, 0.0), d_b(dim, 0.0);
  layernorm_backward(weights.data(), x.data(), w.data(), mean.data(), rstd.data(), rows, dim, d_x.data(), d_w.data(),
                     d_b.data());
  testing::expect_gradient_matches(loss, x, d_x, 7, "d_x");
  testing::expect_gradient_matches(loss, w, d_w, 8, "d_weight");
  testing::expect_gradient_matches(loss, b, d_b, 9, "d_bias");
}

TEST(LayerNorm, ParameterGradientsAccumulateAndMayBeSkipped) {
  const int64_t rows = 4, dim = 6;
  const std::vector<double> x = random_vector(rows * dim, 10), w = random_vector(dim, 11);
  const std::vector<double> d_y = random_vector(rows * dim, 12);
  std::vector<double> y(x.size()), mean(rows), rstd(rows);
  layernorm_forward(x.data(), w.data(), static_cast<const double*>(nullptr), rows, dim, 1e-5, y.data(), mean.data(), rstd.data());
  std::vector<double> d_x(x.size()), d_w(dim, 0.0), d_b(dim, 0.0);
  layernorm_backward(d_y.data(), x.data(), w.data(), mean.data(), rstd.data(), rows, dim, d_x.data(), d_w.data(),
                     d_b.data());
  std::vector<double> d_x_again(x.size()), d_w_twice = d_w, d_b_twice = d_b;
  layernorm_backward(d_y.data(), x.data(), w.data(), mean.data(), rstd.data(), rows, dim, d_x_again.data(),
                     d_w_twice.data(), d_b_twice.data());
  for (int64_t c = 0; c < dim; ++c) {
    EXPECT_DOUBLE_EQ(d_w_twice[c], 2 * d_w[c]);
    EXPECT_DOUBLE_EQ(d_b_twice[c], 2 * d_b[c]);
  }
  std::vector<double> d_x_only(x.size());
  layernorm_backward(d_y.data(), x.data(), w.data(), mean.data(), rstd.data(), rows, dim, d_x_only.data(),
                     static_cast<double*>(nullptr), static_cast<double*>(nullptr));
  EXPECT_EQ(d_x_only, d_x);
  std::vector<double> in_place = d_y;  // d_x may be d_y
  layernorm_backward(in_place.data(), x.data(), w.data(), mean.data(), rstd.data(), rows, dim, in_place.data(),
                     static_cast<double*>(nullptr), static_cast<double*>(nullptr));
  EXPECT_EQ(in_place, d_x);
}

TEST(LayerNorm, FloatAgreesWithDouble) {
  const int64_t rows = 6, dim = 33;
  const std::vector<double> x = random_vector(rows * dim, 13, -4, 4), w = random_vector(dim, 14),
                            b = random_vector(dim, 15);
  std::vector<double> y(x.size()), mean(rows), rstd(rows);
  layernorm_forward(x.data(), w.data(), b.data(), rows, dim, 1e-5, y.data(), mean.data(), rstd.data());
  const std::vector<float> xf = testing::to_float(x), wf = testing::to_float(w), bf = testing::to_float(b);
  std::vector<float> yf(x.size()), meanf(rows), rstdf(rows);
  layernorm_forward(xf.data(), wf.data(), bf.data(), rows, dim, 1e-5, yf.data(), meanf.data(), rstdf.data());
  EXPECT_LT(testing::max_relative_error(yf, y), testing::kFloatTolerance);
}

}  // namespace
}  // namespace surogate::ops
