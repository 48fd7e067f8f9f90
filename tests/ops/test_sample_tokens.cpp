// ops/sample_tokens.h and core/token_draw.h: Philox's published answers, the integer weights
// against exp, the codes (NaN / +inf, nothing to draw, skipped), greedy rows, the draw as the
// documented inverse CDF over kept_weights, its frequencies (a chi-square bound over many
// counters), and reproducibility. tests/generate/test_sampling.cpp compares the filters with the
// host's process_logits; tests/runtime_cuda/test_sample_tokens_cuda.cpp the CUDA kernel with this op.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "core/token_draw.h"
#include "ops/greedy_tokens.h"
#include "ops/sample_tokens.h"

namespace surogate::ops {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

int32_t sample_one(const std::vector<float>& logits, const RowSampling& params, const std::vector<int32_t>& context = {}) {
  int32_t token = 99;
  sample_tokens(logits.data(), 1, static_cast<int64_t>(logits.size()), &params, context.data(),
                static_cast<int64_t>(context.size()), &token);
  return token;
}

RowSampling temperature(float t, uint32_t draw = 0, uint64_t seed = 1) {
  return RowSampling{.temperature = t, .draw = draw, .seed = seed};
}

// Random123's known-answer vectors for philox4x32_10 (kat_vectors).
TEST(TokenDraw, PhiloxGivesThePublishedAnswers) {
  const auto check = [](Philox4x32 counter, uint32_t k0, uint32_t k1, Philox4x32 expected) {
    const Philox4x32 out = philox4x32_10(counter, k0, k1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out.v[i], expected.v[i]) << i;
  };
  check({{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}});
  check({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu,
        {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}});
  check({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u,
        {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}});
}

// 2^40 exp(y) to 2e-7 relative (plus the truncation's unit), never increasing as y falls, 0 past e^-28.
TEST(TokenDraw, WeightsAreExpInUnitsOfTwoToTheMinus40) {
  EXPECT_EQ(sampling_weight(0.0f), uint64_t{1} << 40);
  EXPECT_EQ(sampling_weight(-kInf), 0u);
  EXPECT_EQ(sampling_weight(std::nanf("")), 0u);
  EXPECT_EQ(sampling_weight(-28.5f), 0u);
  uint64_t previous = sampling_weight(0.0f);
  for (float y = -1e-6f; y > -28.0f; y = y * 1.01f - 1e-4f) {
    const uint64_t weight = sampling_weight(y);
    const double expected = std::ldexp(std::exp(static_cast<double>(y)), 40);
    EXPECT_NEAR(static_cast<double>(weight), expected, expected * 2e-7 + 1.0) << y;
    EXPECT_LE(weight, previous) << y;
    previous = weight;
  }
}

TEST(SampleTokens, CodesForUnusableEmptyAndSkippedRows) {
  EXPECT_EQ(sample_one({1, std::nanf(""), 2}, temperature(1)), kUnusableRow);
  EXPECT_EQ(sample_one({1, kInf, 2}, temperature(0)), kUnusableRow);
  EXPECT_EQ(sample_one({-kInf, -kInf}, temperature(1)), kNothingToDraw);
  EXPECT_EQ(sample_one({-kInf, -kInf}, temperature(0)), 0);  // greedy_tokens' rule
  EXPECT_EQ(sample_one({1, 2}, temperature(-1)), kSkippedRow);
}

TEST(SampleTokens, GreedyRowsAreGreedyTokensAfterThePenalty) {
  const std::vector<float> logits{1, 3, 3, 2, -kInf};
  int32_t expected = 0;
  greedy_tokens(logits.data(), 1, 5, &expected);
  EXPECT_EQ(sample_one(logits, temperature(0)), expected);
  EXPECT_EQ(expected, 1);
  RowSampling penalised = temperature(0);
  penalised.repetition_penalty = 2.0f;
  EXPECT_EQ(sample_one(logits, penalised, {1, 2, -1, 9}), 3);  // 3 / 2 < 2; -1 and 9 ignored
}

// Step 7 as written: floor(bits × T / 2^64), then the first id whose inclusive prefix exceeds it.
TEST(SampleTokens, TheDrawIsTheDocumentedInverseCdf) {
  std::vector<float> logits;
  for (int i = 0; i < 300; ++i) logits.push_back(std::sin(static_cast<float>(i)) * 4.0f);
  logits[17] = -kInf;
  RowSampling params = temperature(0.8f, 0, 0x1234567890abcdefull);
  params.top_k = 100;
  params.top_p = 0.9f;
  params.log_min_p = std::log(0.01f);
  std::vector<float> processed = logits;
  for (float& x : processed) x /= 0.8f;
  const std::vector<uint64_t> weights = kept_weights(processed, params);
  uint64_t total = 0;
  for (uint64_t w : weights) total += w;
  for (uint32_t draw = 0; draw < 500; ++draw) {
    params.draw = draw;
    const uint64_t target = scale_draw(token_draw_bits(params.seed, draw), total);
    int32_t expected = 0;
    for (uint64_t prefix = weights[0]; !(prefix > target);) prefix += weights[static_cast<size_t>(++expected)];
    ASSERT_EQ(sample_one(logits, params), expected) << draw;
  }
}

// Pearson's statistic over 8 tokens and 80000 counters: 7 degrees of freedom, whose 1 - 1e-6
// quantile is 38.9; the draw's quantisation (2^-40) is far below a count's resolution.
TEST(SampleTokens, FrequenciesPassAChiSquareBound) {
  const std::vector<double> probabilities{0.02, 0.05, 0.08, 0.1, 0.15, 0.18, 0.2, 0.22};
  std::vector<float> logits;
  for (double p : probabilities) logits.push_back(static_cast<float>(std::log(p)));
  std::vector<int64_t> counts(probabilities.size(), 0);
  const int draws = 80000;
  for (int draw = 0; draw < draws; ++draw) ++counts[static_cast<size_t>(sample_one(logits, temperature(1, draw, 42)))];
  double chi_square = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double expected = probabilities[i] * draws;
    chi_square += (static_cast<double>(counts[i]) - expected) * (static_cast<double>(counts[i]) - expected) / expected;
  }
  EXPECT_LT(chi_square, 38.9);
}

TEST(SampleTokens, TheSameSeedAndDrawGiveTheSameToken) {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::cos(static_cast<float>(i) * 0.37f);
  std::vector<int32_t> first, again, other;
  for (uint32_t draw = 0; draw < 64; ++draw) {
    first.push_back(sample_one(logits, temperature(1.3f, draw, 7)));
    again.push_back(sample_one(logits, temperature(1.3f, draw, 7)));
    other.push_back(sample_one(logits, temperature(1.3f, draw, 8)));
  }
  EXPECT_EQ(first, again);
  EXPECT_NE(first, other);
  EXPECT_GT(std::set<int32_t>(first.begin(), first.end()).size(), 30u);  // the draws move along the stream
}

// Rows are independent: a batch gives each row what it gives alone.
TEST(SampleTokens, RowsOfABatchAreChosenAlone) {
  const int64_t vocab = 64, rows = 5;
  std::vector<float> logits(static_cast<size_t>(rows * vocab));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i) * 1.7f);
  std::vector<RowSampling> params;
  std::vector<int32_t> context(static_cast<size_t>(rows * 3), -1);
  for (int64_t r = 0; r < rows; ++r) {
    params.push_back(temperature(0.5f + 0.25f * static_cast<float>(r), static_cast<uint32_t>(r), 100 + r));
    params.back().repetition_penalty = 1.5f;
    context[static_cast<size_t>(r * 3)] = static_cast<int32_t>(r * 7);
  }
  params[2].top_k = 5;
  params[3].top_p = 0.5f;
  std::vector<int32_t> tokens(rows);
  sample_tokens(logits.data(), rows, vocab, params.data(), context.data(), 3, tokens.data());
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> row(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab);
    const std::vector<int32_t> row_context(context.begin() + r * 3, context.begin() + (r + 1) * 3);
    EXPECT_EQ(tokens[static_cast<size_t>(r)], sample_one(row, params[static_cast<size_t>(r)], row_context)) << r;
  }
}

}  // namespace
}  // namespace surogate::ops
