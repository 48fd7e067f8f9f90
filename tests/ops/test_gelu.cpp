// GELU (erf, tanh and quick forms): values against torch's published values and the formulas,
// gradients against finite differences, float against double, the attribute's spellings.
#include <cmath>

#include "gradient_check.h"
#include "ops/gelu.h"

namespace surogate::ops {
namespace {

using testing::random_vector;

// torch.nn.functional.gelu(torch.tensor([-3., -1., -0.5, 0., 0.5, 1., 3.], dtype=torch.float64),
// approximate=...).tolist(), printed by Python's repr.
TEST(Gelu, ValuesMatchTorch) {
  const std::vector<double> x = {-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0};
  const std::vector<double> erf_expected = {-0.00404969409489031, -0.15865525393145702, -0.15426876936299344, 0.0,
                                            0.34573123063700656,   0.841344746068543,    2.99595030590511};
  const std::vector<double> tanh_expected = {-0.0036373920817729943, -0.15880800939172324, -0.15428599017485606, 0.0,
                                             0.34571400982514394,    0.8411919906082768,   2.996362607918227};
  std::vector<double> out(x.size());
  gelu_forward(x.data(), static_cast<int64_t>(x.size()), GeluApproximation::None, out.data());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(out[i], erf_expected[i], 1e-15) << x[i];
  gelu_forward(x.data(), static_cast<int64_t>(x.size()), GeluApproximation::Tanh, out.data());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(out[i], tanh_expected[i], 1e-15) << x[i];
  // transformers.activations.QuickGELUActivation()(x) in float64.
  const std::vector<double> quick_expected = {-0.01807130970778597, -0.1542042340671787, -0.1496115633936199, 0.0,
                                              0.35038843660638014,  0.8457957659328212,  2.981928690292214};
  gelu_forward(x.data(), static_cast<int64_t>(x.size()), GeluApproximation::Quick, out.data());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(out[i], quick_expected[i], 1e-15) << x[i];
}

TEST(Gelu, GradientsMatchFiniteDifferences) {
  for (GeluApproximation approximation :
       {GeluApproximation::None, GeluApproximation::Tanh, GeluApproximation::Quick}) {
    std::vector<double> x = random_vector(37, 1, -4, 4);
    const std::vector<double> weights = random_vector(x.size(), 2);
    std::vector<double> out(x.size());
    auto loss = [&] {
      gelu_forward(x.data(), static_cast<int64_t>(x.size()), approximation, out.data());
      return testing::weighted_sum(out, weights);
    };
    std::vector<double> d_x(x.size());
    gelu_backward(weights.data(), x.data(), static_cast<int64_t>(x.size()), approximation, d_x.data());
    testing::expect_gradient_matches(loss, x, d_x, 3, std::to_string(static_cast<int>(approximation)));
  }
}

TEST(Gelu, BackwardMayWriteIntoItsGradient) {
  const std::vector<double> x = random_vector(19, 4, -3, 3);
  std::vector<double> d_y = random_vector(x.size(), 5), d_x(x.size());
  gelu_backward(d_y.data(), x.data(), static_cast<int64_t>(x.size()), GeluApproximation::Tanh, d_x.data());
  gelu_backward(d_y.data(), x.data(), static_cast<int64_t>(x.size()), GeluApproximation::Tanh, d_y.data());
  EXPECT_EQ(d_y, d_x);
}

TEST(Gelu, FloatAgreesWithDouble) {
  const std::vector<double> x = random_vector(101, 6, -6, 6);
  const std::vector<float> x_float = testing::to_float(x);
  for (GeluApproximation approximation :
       {GeluApproximation::None, GeluApproximation::Tanh, GeluApproximation::Quick}) {
    std::vector<double> out(x.size());
    std::vector<float> out_float(x.size());
    gelu_forward(x.data(), static_cast<int64_t>(x.size()), approximation, out.data());
    gelu_forward(x_float.data(), static_cast<int64_t>(x.size()), approximation, out_float.data());
    EXPECT_LT(testing::max_relative_error(out_float, out), testing::kFloatTolerance);
  }
}

TEST(Gelu, AttributeSpellings) {
  EXPECT_EQ(gelu_approximation_from_name("none"), GeluApproximation::None);
  EXPECT_EQ(gelu_approximation_from_name("tanh"), GeluApproximation::Tanh);
  EXPECT_EQ(gelu_approximation_from_name("quick"), GeluApproximation::Quick);
  EXPECT_EQ(gelu_approximation_from_name("erf"), std::nullopt);
  EXPECT_EQ(gelu_approximation_from_name(""), std::nullopt);
}

}  // namespace
}  // namespace surogate::ops
