// RoPE: inverse frequencies of every type against values computed from transformers'
// formulas (numpy, float64, embedded below), the rotation against complex multiplication,
// partial rotary, gradients by finite differences, and float vs double tables.
#include <cmath>
#include <complex>
#include <numbers>

#include "gradient_check.h"
#include "ops/rope.h"

namespace surogate::ops {
namespace {

using testing::random_vector;

io::RopeConfig config_of(io::RopeType type, int64_t rotary_dim) {
  io::RopeConfig config;
  config.type = type;
  config.rotary_dim = rotary_dim;
  switch (type) {
    case io::RopeType::Default:
      break;
    case io::RopeType::Linear:
      config.factor = 2.5;
      break;
    case io::RopeType::Dynamic:
      config.factor = 2.0;
      config.original_max_position_embeddings = 64;
      break;
    case io::RopeType::Yarn:
      config.factor = 4.0;
      config.original_max_position_embeddings = 2048;
      config.attention_factor = 0.1 * std::log(4.0) + 1.0;
      break;
    case io::RopeType::Llama3:
      config.theta = 500000.0;
      config.factor = 8.0;
      config.original_max_position_embeddings = 8192;
      break;
  }
  return config;
}

void expect_frequencies(const std::vector<double>& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], 1e-13 * expected[i]) << "frequency " << i;
  }
}

TEST(Rope, DefaultAndLinearFrequencies) {
  const RopeFrequencies<double> base =
      rope_frequencies<double>(config_of(io::RopeType::Default, 16), 0);
  const RopeFrequencies<double> linear =
      rope_frequencies<double>(config_of(io::RopeType::Linear, 16), 0);
  for (int64_t i = 0; i < 8; ++i) {
    const double expected = 1.0 / std::pow(10000.0, 2.0 * i / 16.0);
    EXPECT_NEAR(base.inverse_frequency[i], expected, 1e-15 * expected);
    EXPECT_NEAR(linear.inverse_frequency[i], expected / 2.5, 1e-15 * expected);
  }
  EXPECT_EQ(base.attention_scaling, 1.0);
}

TEST(Rope, DynamicFrequenciesDependOnSequenceLength) {
  const io::RopeConfig config = config_of(io::RopeType::Dynamic, 16);
  // numpy: theta' = 10000 * (2 * 100 / 64 - 1) ** (16 / 14); 1 / theta' ** (arange(0, 16, 2) / 16)
  expect_frequencies(
      rope_frequencies<double>(config, 100).inverse_frequency,
      {1.0, 0.2839451388482507, 0.08062484187555236, 0.02289303192097197, 0.0065003651274578205,
       0.0018457470786803376, 0.0005240909105346416, 0.0001488130663608649});
  // Below the original context the default frequencies are used.
  const RopeFrequencies<double> short_sequence = rope_frequencies<double>(config, 50);
  const RopeFrequencies<double> base =
      rope_frequencies<double>(config_of(io::RopeType::Default, 16), 0);
  EXPECT_EQ(short_sequence.inverse_frequency, base.inverse_frequency);
  const std::vector<int32_t> positions = {0, 1, 2, 0, 1, 99, 3};
  EXPECT_EQ(rope_dynamic_sequence_length(positions.data(), 7), 100);
}

TEST(Rope, YarnFrequenciesAndAttentionFactor) {
  // numpy, transformers' _compute_yarn_parameters: dim 16, theta 1e4, factor 4,
  // original_max_position_embeddings 2048, beta 32 / 1 → correction range [2, 6].
  const RopeFrequencies<double> yarn =
      rope_frequencies<double>(config_of(io::RopeType::Yarn, 16), 0);
  expect_frequencies(yarn.inverse_frequency,
                     {1.0, 0.31622776601683794, 0.1, 0.02569350598886808, 0.00625,
                      0.0013834964763236657, 0.00025, 7.905694150420948e-05});
  EXPECT_NEAR(yarn.attention_scaling, 0.1 * std::log(4.0) + 1.0, 1e-15);
  // The attention factor multiplies the tables.
  const std::vector<int32_t> positions = {0, 5};
  std::vector<double> cos(16), sin(16);
  rope_tables(yarn, positions.data(), 2, cos.data(), sin.data());
  EXPECT_NEAR(cos[0], yarn.attention_scaling, 1e-15);
  EXPECT_NEAR(sin[8 + 1], std::sin(5.0 * yarn.inverse_frequency[1]) * yarn.attention_scaling,
              1e-15);
}

TEST(Rope, Llama3FrequenciesCoverAllThreeBands) {
  // numpy, transformers' _compute_llama3_parameters: dim 16, theta 5e5, factor 8,
  // low/high_freq_factor 1 / 4, original 8192 (index 4 is in the smoothed band).
  expect_frequencies(
      rope_frequencies<double>(config_of(io::RopeType::Llama3, 16), 0).inverse_frequency,
      {1.0, 0.19392274474868576, 0.03760603093086393, 0.0072926647372171085, 0.0005248461609929547,
       3.428102195952591e-05, 6.647869871181236e-06, 1.2891731721515574e-06});
}

TEST(Rope, RotationEqualsComplexMultiplicationWithPartialRotary) {
  const int64_t tokens = 5, heads = 3, head_dim = 10, rotary_dim = 6, half = 3;
  io::RopeConfig config = config_of(io::RopeType::Default, rotary_dim);
  const RopeFrequencies<double> frequencies = rope_frequencies<double>(config, 0);
  const std::vector<int32_t> positions = {0, 1, 2, 0, 7};  // two packed documents
  std::vector<double> cos(tokens * half), sin(tokens * half);
  rope_tables(frequencies, positions.data(), tokens, cos.data(), sin.data());
  const std::vector<double> x = random_vector(tokens * heads * head_dim, 1);
  std::vector<double> out(x.size());
  rope_forward(x.data(), cos.data(), sin.data(), tokens, heads, head_dim, rotary_dim, out.data());
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const double* in_head = x.data() + (t * heads + h) * head_dim;
      const double* out_head = out.data() + (t * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const std::complex<double> value(in_head[i], in_head[i + half]);
        const std::complex<double> rotated =
            value * std::polar(1.0, positions[t] * frequencies.inverse_frequency[i]);
        EXPECT_NEAR(out_head[i], rotated.real(), 1e-14);
        EXPECT_NEAR(out_head[i + half], rotated.imag(), 1e-14);
      }
      for (int64_t j = rotary_dim; j < head_dim; ++j) EXPECT_EQ(out_head[j], in_head[j]);
    }
  }
}

TEST(Rope, GradientsMatchFiniteDifferencesForEveryType) {
  const io::RopeType types[] = {io::RopeType::Default, io::RopeType::Linear, io::RopeType::Dynamic,
                                io::RopeType::Yarn, io::RopeType::Llama3};
  uint64_t seed = 100;
  for (io::RopeType type : types) {
    for (int64_t rotary_dim : {8, 4}) {  // full and partial rotary (head_dim 8)
      const int64_t tokens = 6, heads = 3, head_dim = 8, half = rotary_dim / 2;
      const io::RopeConfig config = config_of(type, rotary_dim);
      const std::vector<int32_t> positions = {0, 1, 2, 3, 0, 70};
      const RopeFrequencies<double> frequencies =
          rope_frequencies<double>(config, rope_dynamic_sequence_length(positions.data(), tokens));
      std::vector<double> cos(tokens * half), sin(tokens * half);
      rope_tables(frequencies, positions.data(), tokens, cos.data(), sin.data());
      std::vector<double> x = random_vector(tokens * heads * head_dim, ++seed);
      const std::vector<double> weights = random_vector(x.size(), ++seed);
      std::vector<double> out(x.size());
      auto loss = [&] {
        rope_forward(x.data(), cos.data(), sin.data(), tokens, heads, head_dim, rotary_dim,
                     out.data());
        return testing::weighted_sum(out, weights);
      };
      std::vector<double> d_x = weights;  // in place
      rope_backward(d_x.data(), cos.data(), sin.data(), tokens, heads, head_dim, rotary_dim,
                    d_x.data());
      testing::expect_gradient_matches(loss, x, d_x, ++seed,
                                       std::string(io::rope_type_name(type)) + " d_x");
    }
  }
}

TEST(Rope, FloatTablesAgreeWithDouble) {
  const int64_t tokens = 4, half = 32;
  const std::vector<int32_t> positions = {0, 17, 1023, 4095};
  for (io::RopeType type : {io::RopeType::Default, io::RopeType::Yarn, io::RopeType::Llama3}) {
    const io::RopeConfig config = config_of(type, 2 * half);
    std::vector<double> cos(tokens * half), sin(tokens * half);
    rope_tables(rope_frequencies<double>(config, 0), positions.data(), tokens, cos.data(),
                sin.data());
    std::vector<float> cos_float(tokens * half), sin_float(tokens * half);
    rope_tables(rope_frequencies<float>(config, 0), positions.data(), tokens, cos_float.data(),
                sin_float.data());
    // fp32 angles at position 4095 carry ~4095 · 6e-8 of rounding, as they do in transformers.
    for (size_t i = 0; i < cos.size(); ++i) {
      EXPECT_NEAR(cos_float[i], cos[i], 2e-4) << io::rope_type_name(type);
      EXPECT_NEAR(sin_float[i], sin[i], 2e-4) << io::rope_type_name(type);
    }
    for (size_t i = 0; i < 2 * half; ++i) {  // positions 0 and 17: small angles
      EXPECT_NEAR(cos_float[i], cos[i], 1e-5);
      EXPECT_NEAR(sin_float[i], sin[i], 1e-5);
    }
  }
}

}  // namespace
}  // namespace surogate::ops
