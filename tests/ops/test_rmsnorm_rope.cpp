// Per-head RMSNorm + RoPE (Qwen3's fused q/k norm): forward and backward bit-identical (==) to
// the unfused composition rmsnorm → rope_tables → rope (float, full and partial rotary, yarn's
// attention scaling, packed positions), gradients by finite differences (double, relative error
// < 1e-6), d_weight accumulated (+=).
#include "gradient_check.h"
#include "ops/rmsnorm.h"
#include "ops/rmsnorm_rope.h"

namespace surogate::ops {
namespace {

using testing::random_vector;

template <typename T>
RopeFrequencies<T> frequencies_of(int64_t rotary_dim, double scaling) {
  io::RopeConfig config;
  config.rotary_dim = rotary_dim;
  RopeFrequencies<T> frequencies = rope_frequencies<T>(config, 0);
  frequencies.attention_scaling = static_cast<T>(scaling);
  return frequencies;
}

TEST(RmsnormRope, ForwardAndBackwardEqualTheUnfusedOps) {
  const int64_t tokens = 7, heads = 3, head_dim = 16;
  const std::vector<int32_t> positions = {0, 1, 2, 0, 1, 2, 3};  // two packed documents
  for (int64_t rotary_dim : {16, 8}) {
    const RopeFrequencies<float> frequencies = frequencies_of<float>(rotary_dim, 1.3);
    const RmsnormRopeShape shape{tokens, heads, head_dim};
    const int64_t rows = tokens * heads, count = rows * head_dim, half = rotary_dim / 2;
    const std::vector<float> x = testing::to_float(random_vector(count, 1, -2, 2));
    const std::vector<float> weight = testing::to_float(random_vector(head_dim, 2, 0.5, 1.5));
    const std::vector<float> d_y = testing::to_float(random_vector(count, 3));

    // Unfused: the decoder's former q_norm → rope_cos_sin → q_rope.
    std::vector<float> normed(count), y_ref(count), rstd_ref(rows), cos(tokens * half), sin(tokens * half);
    rmsnorm_forward(x.data(), weight.data(), rows, head_dim, 1e-6, normed.data(), rstd_ref.data());
    rope_tables(frequencies, positions.data(), tokens, cos.data(), sin.data());
    rope_forward(normed.data(), cos.data(), sin.data(), tokens, heads, head_dim, rotary_dim, y_ref.data());
    std::vector<float> d_normed(count), d_x_ref(count), d_weight_ref(head_dim, 0.25f);
    rope_backward(d_y.data(), cos.data(), sin.data(), tokens, heads, head_dim, rotary_dim, d_normed.data());
    rmsnorm_backward(d_normed.data(), x.data(), weight.data(), rstd_ref.data(), rows, head_dim, d_x_ref.data(),
                     d_weight_ref.data());

    std::vector<float> y(count), rstd(rows), d_x(count), d_weight(head_dim, 0.25f);
    rmsnorm_rope_forward(x.data(), weight.data(), frequencies, positions.data(), shape, 1e-6, y.data(), rstd.data());
    rmsnorm_rope_backward(d_y.data(), x.data(), weight.data(), rstd.data(), frequencies, positions.data(), shape,
                          d_x.data(), d_weight.data());
    EXPECT_EQ(y, y_ref) << "rotary_dim " << rotary_dim;
    EXPECT_EQ(rstd, rstd_ref) << "rotary_dim " << rotary_dim;
    EXPECT_EQ(d_x, d_x_ref) << "rotary_dim " << rotary_dim;
    EXPECT_EQ(d_weight, d_weight_ref) << "rotary_dim " << rotary_dim;  // both accumulated onto 0.25
  }
}

TEST(RmsnormRope, GradientsMatchFiniteDifferences) {
  const int64_t tokens = 5, heads = 2, head_dim = 8;
  const std::vector<int32_t> positions = {0, 3, 1, 0, 9};
  uint64_t seed = 20;
  for (int64_t rotary_dim : {8, 4}) {
    const RopeFrequencies<double> frequencies = frequencies_of<double>(rotary_dim, 0.9);
    const RmsnormRopeShape shape{tokens, heads, head_dim};
    const int64_t count = tokens * heads * head_dim;
    std::vector<double> x = random_vector(count, ++seed), weight = random_vector(head_dim, ++seed, 0.5, 1.5);
    const std::vector<double> weights = random_vector(count, ++seed);
    std::vector<double> y(count), rstd(tokens * heads);
    auto loss = [&] {
      rmsnorm_rope_forward(x.data(), weight.data(), frequencies, positions.data(), shape, 1e-5, y.data(), rstd.data());
      return testing::weighted_sum(y, weights);
    };
    loss();
    std::vector<double> d_x(count), d_weight(head_dim, 0.0);
    rmsnorm_rope_backward(weights.data(), x.data(), weight.data(), rstd.data(), frequencies, positions.data(), shape,
                          d_x.data(), d_weight.data());
    testing::expect_gradient_matches(loss, x, d_x, ++seed, "d_x rotary " + std::to_string(rotary_dim));
    testing::expect_gradient_matches(loss, weight, d_weight, ++seed, "d_weight rotary " + std::to_string(rotary_dim));

    const std::vector<double> once = d_weight;
    rmsnorm_rope_backward(weights.data(), x.data(), weight.data(), rstd.data(), frequencies, positions.data(), shape,
                          d_x.data(), d_weight.data());
    for (int64_t c = 0; c < head_dim; ++c) EXPECT_NEAR(d_weight[c], 2.0 * once[c], 1e-14 * std::abs(once[c]) + 1e-15);
  }
}

}  // namespace
}  // namespace surogate::ops
