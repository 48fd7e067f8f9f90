// Linear and LoRA-linear: forward against naive loops, gradients by finite differences,
// accumulation of parameter gradients, float vs double; linear_add / linear_input_gradient_add
// against the product plus the addend.
#include <array>

#include "gradient_check.h"
#include "ops/linear.h"

namespace surogate::ops {
namespace {

using testing::random_vector;

TEST(Linear, ForwardMatchesNaiveLoops) {
  const int64_t rows = 5, in = 7, out = 3;
  const std::vector<double> x = random_vector(rows * in, 1), weight = random_vector(out * in, 2);
  const std::vector<double> bias = random_vector(out, 3);
  std::vector<double> y(rows * out);
  linear_forward(x.data(), weight.data(), bias.data(), rows, in, out, y.data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double expected = bias[o];
      for (int64_t i = 0; i < in; ++i) expected += x[r * in + i] * weight[o * in + i];
      EXPECT_NEAR(y[r * out + o], expected, 1e-14);
    }
  }
}

TEST(Linear, GradientsMatchFiniteDifferencesAndAccumulate) {
  const int64_t rows = 6, in = 5, out = 9;
  std::vector<double> x = random_vector(rows * in, 10), weight = random_vector(out * in, 11);
  std::vector<double> bias = random_vector(out, 12);
  const std::vector<double> weights = random_vector(rows * out, 13);
  std::vector<double> y(rows * out);
  auto loss = [&] {
    linear_forward(x.data(), weight.data(), bias.data(), rows, in, out, y.data());
    return testing::weighted_sum(y, weights);
  };
  std::vector<double> d_x(x.size()), d_weight(weight.size(), 0.0), d_bias(out, 0.0);
  linear_backward(weights.data(), x.data(), weight.data(), rows, in, out, d_x.data(),
                  d_weight.data(), d_bias.data());
  testing::expect_gradient_matches(loss, x, d_x, 14, "d_x");
  testing::expect_gradient_matches(loss, weight, d_weight, 15, "d_weight");
  testing::expect_gradient_matches(loss, bias, d_bias, 16, "d_bias");

  const std::vector<double> weight_once = d_weight, bias_once = d_bias, x_once = d_x;
  linear_backward(weights.data(), x.data(), weight.data(), rows, in, out, d_x.data(),
                  d_weight.data(), d_bias.data());
  for (size_t i = 0; i < d_weight.size(); ++i) EXPECT_NEAR(d_weight[i], 2 * weight_once[i], 1e-14);
  for (size_t i = 0; i < d_bias.size(); ++i) EXPECT_NEAR(d_bias[i], 2 * bias_once[i], 1e-14);
  EXPECT_EQ(d_x, x_once);  // d_x is written, not accumulated
}

TEST(LoraLinear, GradientsMatchFiniteDifferences) {
  const int64_t rows = 7, in = 6, rank = 3, out = 5;
  const double scale = 2.0;  // alpha / r
  std::vector<double> x = random_vector(rows * in, 20), weight = random_vector(out * in, 21);
  std::vector<double> lora_a = random_vector(rank * in, 22), lora_b = random_vector(out * rank, 23);
  const std::vector<double> weights = random_vector(rows * out, 24);
  std::vector<double> y(rows * out), hidden(rows * rank);
  auto loss = [&] {
    linear_forward(x.data(), weight.data(), static_cast<const double*>(nullptr), rows, in, out,
                   y.data());
    lora_linear_forward(x.data(), lora_a.data(), lora_b.data(), rows, in, rank, out, scale,
                        hidden.data(), y.data());
    return testing::weighted_sum(y, weights);
  };
  loss();
  // Forward: y = x Wᵀ + scale · x Aᵀ Bᵀ, against naive loops.
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double expected = 0.0;
      for (int64_t i = 0; i < in; ++i) expected += x[r * in + i] * weight[o * in + i];
      for (int64_t k = 0; k < rank; ++k) {
        double projected = 0.0;
        for (int64_t i = 0; i < in; ++i) projected += x[r * in + i] * lora_a[k * in + i];
        expected += scale * projected * lora_b[o * rank + k];
      }
      EXPECT_NEAR(y[r * out + o], expected, 1e-13);
    }
  }
  std::vector<double> d_x(x.size()), d_a(lora_a.size(), 0.0), d_b(lora_b.size(), 0.0);
  linear_backward(weights.data(), x.data(), weight.data(), rows, in, out, d_x.data(),
                  static_cast<double*>(nullptr), static_cast<double*>(nullptr));
  lora_linear_backward(weights.data(), x.data(), lora_a.data(), lora_b.data(), hidden.data(), rows,
                       in, rank, out, scale, d_x.data(), d_a.data(), d_b.data());
  testing::expect_gradient_matches(loss, x, d_x, 25, "d_x");
  testing::expect_gradient_matches(loss, lora_a, d_a, 26, "d_a");
  testing::expect_gradient_matches(loss, lora_b, d_b, 27, "d_b");
}

TEST(Linear, FloatAgreesWithDouble) {
  const int64_t rows = 9, in = 31, out = 17;
  const std::vector<double> x = random_vector(rows * in, 30), weight = random_vector(out * in, 31);
  std::vector<double> y(rows * out);
  linear_forward(x.data(), weight.data(), static_cast<const double*>(nullptr), rows, in, out,
                 y.data());
  const std::vector<float> x_float = testing::to_float(x), weight_float = testing::to_float(weight);
  std::vector<float> y_float(rows * out);
  linear_forward(x_float.data(), weight_float.data(), static_cast<const float*>(nullptr), rows, in,
                 out, y_float.data());
  EXPECT_LT(testing::max_relative_error(y_float, y), testing::kFloatTolerance);
}

// y = x·Wᵀ + addend and d_x = d_y·W + addend equal the plain product plus the addend (the same
// double sums, only the order of the final addition differs: 1e-14), addend left untouched.
TEST(LinearAdd, ProductsWithAnAddendEqualProductPlusAddend) {
  for (auto [rows, in, out] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {5, 7, 3}, {13, 4, 22}}) {
    const std::vector<double> x = random_vector(rows * in, 40), weight = random_vector(out * in, 41);
    const std::vector<double> addend_out = random_vector(rows * out, 42), addend_in = random_vector(rows * in, 43);
    const std::vector<double> d_y = random_vector(rows * out, 44);
    std::vector<double> y(rows * out), product(rows * out), d_x(rows * in), d_x_plain(rows * in);
    linear_add_forward(x.data(), weight.data(), addend_out.data(), rows, in, out, y.data());
    linear_forward(x.data(), weight.data(), static_cast<const double*>(nullptr), rows, in, out, product.data());
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], product[i] + addend_out[i], 1e-14) << rows << "x" << in;
    linear_input_gradient_add(d_y.data(), weight.data(), addend_in.data(), rows, in, out, d_x.data());
    linear_backward(d_y.data(), static_cast<const double*>(nullptr), weight.data(), rows, in, out, d_x_plain.data(),
                    static_cast<double*>(nullptr), static_cast<double*>(nullptr));
    for (size_t i = 0; i < d_x.size(); ++i) EXPECT_NEAR(d_x[i], d_x_plain[i] + addend_in[i], 1e-14) << rows << "x" << in;
    EXPECT_EQ(addend_out, random_vector(rows * out, 42));
  }
}

TEST(LinearAdd, GradientsMatchFiniteDifferences) {
  const int64_t rows = 6, in = 5, out = 4;
  std::vector<double> x = random_vector(rows * in, 50), weight = random_vector(out * in, 51);
  std::vector<double> addend = random_vector(rows * out, 52);
  const std::vector<double> weights = random_vector(rows * out, 53);
  std::vector<double> y(rows * out);
  auto loss = [&] {
    linear_add_forward(x.data(), weight.data(), addend.data(), rows, in, out, y.data());
    return testing::weighted_sum(y, weights);
  };
  std::vector<double> d_x(x.size()), d_weight(weight.size(), 0.0);
  linear_backward(weights.data(), x.data(), weight.data(), rows, in, out, d_x.data(), d_weight.data(),
                  static_cast<double*>(nullptr));
  testing::expect_gradient_matches(loss, x, d_x, 54, "d_x");
  testing::expect_gradient_matches(loss, weight, d_weight, 55, "d_weight");
  testing::expect_gradient_matches(loss, addend, weights, 56, "d_addend");  // d_addend = d_y
}

}  // namespace
}  // namespace surogate::ops
