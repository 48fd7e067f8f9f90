// sampling.h: each processor on hand-computed cases, their order, greedy ties, the draw (its
// definition, its frequencies, reproducibility), the option checks and log_softmax.
// tests/python/test_generate_sampling.py compares the processors with transformers' own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "generate/sampling.h"
#include "ops/sample_tokens.h"
#include "user_error_of.h"

namespace surogate::generate {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

SamplingOptions sampling() {
  SamplingOptions options;
  options.do_sample = true;
  options.top_k = 0;
  return options;
}

std::vector<float> processed(const SamplingOptions& options, std::vector<float> logits,
                             const std::vector<int32_t>& context = {}) {
  process_logits(options, logits, context);
  return logits;
}

std::vector<float> logs(const std::vector<double>& probabilities) {
  std::vector<float> result;
  for (double probability : probabilities)
    result.push_back(static_cast<float>(std::log(probability)));
  return result;
}

TEST(Sampling, RepetitionPenaltyDividesPositiveAndMultipliesNegativeOncePerDistinctToken) {
  SamplingOptions options;  // greedy: the penalty still applies, as in transformers
  options.repetition_penalty = 2.0;
  // Token 1 appears twice but is penalised once; 7 and -1 are outside the vocabulary: ignored.
  EXPECT_EQ(processed(options, {2, -2, 1, 0.5}, {0, 1, 1, 7, -1}),
            (std::vector<float>{1, -4, 1, 0.5}));
  options.repetition_penalty = 0.5;  // < 1 rewards repetition
  EXPECT_EQ(processed(options, {2, -2, 1}, {0, 1}), (std::vector<float>{4, -1, 1}));
}

TEST(Sampling, GreedyAppliesNoWarper) {
  SamplingOptions options;
  options.temperature = 0.5;
  options.top_k = 1;
  options.top_p = 0.1;
  options.min_p = 0.9;
  EXPECT_EQ(processed(options, {1, 2, 3}), (std::vector<float>{1, 2, 3}));
  options.do_sample = true;
  options.temperature = 0.0;  // our convention: temperature 0 is greedy
  EXPECT_EQ(processed(options, {1, 2, 3}), (std::vector<float>{1, 2, 3}));
}

TEST(Sampling, TemperatureDividesTheLogits) {
  SamplingOptions options = sampling();
  options.temperature = 2.0;
  EXPECT_EQ(processed(options, {1, 2, -3}), (std::vector<float>{0.5, 1, -1.5}));
}

TEST(Sampling, TopKKeepsTheKLargestAndTiesAtTheBoundary) {
  SamplingOptions options = sampling();
  options.top_k = 2;
  EXPECT_EQ(processed(options, {1, 3, 3, 2, 0}), (std::vector<float>{-kInf, 3, 3, -kInf, -kInf}));
  EXPECT_EQ(processed(options, {1, 3, 2, 2}), (std::vector<float>{-kInf, 3, 2, 2}));
  options.top_k = 10;  // larger than the vocabulary: nothing filtered
  EXPECT_EQ(processed(options, {1, 3}), (std::vector<float>{1, 3}));
}

TEST(Sampling, TopKOnALargerVocabularyCountsTies) {
  SamplingOptions options = sampling();
  std::vector<float> logits(100);
  for (size_t id = 0; id < logits.size(); ++id)
    logits[id] = static_cast<float>(id % 10);  // ten of each
  const auto kept = [&](int64_t k) {
    options.top_k = k;
    const std::vector<float> result = processed(options, logits);
    return std::count_if(result.begin(), result.end(), [](float logit) { return logit != -kInf; });
  };
  EXPECT_EQ(kept(3), 10);  // the 3rd largest is a 9: the ten 9s stay (the heap path, k <= 100 / 16)
  EXPECT_EQ(kept(15), 20);  // the 15th largest is an 8 (nth_element)
}

TEST(Sampling, TopPKeepsTheSmallestSetReachingP) {
  SamplingOptions options = sampling();
  const std::vector<float> logits = logs({0.1, 0.2, 0.3, 0.4});
  options.top_p = 0.5;  // ascending cumulative 0.1, 0.3, 0.6, 1.0: the first two are <= 0.5
  EXPECT_EQ(processed(options, logits), (std::vector<float>{-kInf, -kInf, logits[2], logits[3]}));
  options.top_p = 0.75;  // <= 0.25: only the first
  EXPECT_EQ(processed(options, logits),
            (std::vector<float>{-kInf, logits[1], logits[2], logits[3]}));
  options.top_p = 0.01;  // the most likely token always stays
  EXPECT_EQ(processed(options, logits), (std::vector<float>{-kInf, -kInf, -kInf, logits[3]}));
}

TEST(Sampling, TopPOnAFlatDistributionDropsTheLowerIdsOfATie) {
  SamplingOptions options = sampling();
  options.top_p = 0.5005;  // 1000 equal tokens: ascending (lower ids first) 0.001, 0.002, ...
  const std::vector<float> result = processed(options, std::vector<float>(1000, 0.0f));
  // Cumulative <= 0.4995 for the first 499: ids 0..498 dropped, 501 kept (beyond the first
  // partial sort of 64 and its growth to 256 and 1024).
  for (size_t id = 0; id < result.size(); ++id) EXPECT_EQ(result[id] == -kInf, id < 499) << id;
}

TEST(Sampling, MinPDropsTokensBelowAFractionOfTheMostLikely) {
  SamplingOptions options = sampling();
  const std::vector<float> logits = logs({0.5, 0.3, 0.15, 0.05});
  options.min_p = 0.2;  // threshold 0.1
  EXPECT_EQ(processed(options, logits),
            (std::vector<float>{logits[0], logits[1], logits[2], -kInf}));
  options.min_p = 1.0;  // only the most likely and its equals
  EXPECT_EQ(processed(options, {1, 3, 3}), (std::vector<float>{-kInf, 3, 3}));
}

TEST(Sampling, RepetitionPenaltyComesBeforeTheWarpers) {
  SamplingOptions options = sampling();
  options.repetition_penalty = 2.0;
  options.top_k = 1;
  // Penalised first, token 0 falls from 2 to 1 below token 1's 1.5: top_k keeps token 1.
  EXPECT_EQ(processed(options, {2, 1.5}, {0}), (std::vector<float>{-kInf, 1.5}));
}

TEST(Sampling, TemperatureComesBeforeTopPAndMinP) {
  SamplingOptions options = sampling();
  options.top_p = 0.6;
  // Without temperature the probabilities are .09, .24, .67: top_p keeps only token 2.
  EXPECT_EQ(processed(options, {0, 1, 2})[1], -kInf);
  options.temperature = 10.0;  // flattened first to about .30, .33, .37: token 1 stays
  EXPECT_FLOAT_EQ(processed(options, {0, 1, 2})[1], 0.1f);
  options.top_p = 1.0;
  options.temperature = 1.0;
  options.min_p = 0.5;  // .24 < .5 × .67: token 1 dropped
  EXPECT_EQ(processed(options, {0, 1, 2})[1], -kInf);
  options.temperature = 10.0;  // .33 >= .5 × .37: kept
  EXPECT_FLOAT_EQ(processed(options, {0, 1, 2})[1], 0.1f);
}

TEST(Sampling, GreedyTakesTheFirstMaximum) {
  TokenSampler sampler(SamplingOptions{}, 0);
  std::vector<float> logits{1, 3, 3, -kInf};
  EXPECT_EQ(sampler.choose(logits, {}), 1);
  SamplingOptions penalised;
  penalised.repetition_penalty = 3.0;
  TokenSampler penalising(penalised, 0);
  logits = {1, 3, 2};
  EXPECT_EQ(penalising.choose(logits, std::vector<int32_t>{1}), 2);  // 3 / 3 = 1 < 2
  EXPECT_EQ(argmax(std::vector<float>{std::nanf(""), 1, 2, 2}), 2);
  // Rows longer than the vectorised lanes: the first maximum wherever it falls, the tail included.
  for (size_t size : {17u, 151936u}) {
    std::vector<float> row(size, -1.0f);
    row[size - 1] = 5.0f;
    EXPECT_EQ(argmax(row), static_cast<int32_t>(size - 1)) << size;
    row[size / 3] = 5.0f;
    row[size / 2] = std::nanf("");
    EXPECT_EQ(argmax(row), static_cast<int32_t>(size / 3)) << size;
  }
}

// greedy_choice (the rule a model applies on its device, NextTokenModel::feed_greedy) is what
// choose() of a plain greedy sampler returns, and -1 where choose() refuses the logits.
TEST(Sampling, GreedyChoiceIsChooseOfAPlainGreedySampler) {
  std::mt19937 random(5);
  std::uniform_int_distribution<int> level(0, 6);  // few distinct values: many ties at the maximum
  TokenSampler sampler(SamplingOptions{}, 0);
  for (size_t size : {1u, 5u, 17u, 1000u, 151936u}) {
    for (int trial = 0; trial < 4; ++trial) {
      std::vector<float> row(size);
      for (float& value : row) value = level(random) == 0 ? -kInf : static_cast<float>(level(random));
      const int32_t chosen = greedy_choice(row);
      EXPECT_EQ(chosen, sampler.choose(row, {})) << size;
      EXPECT_EQ(chosen, argmax(row)) << size;
    }
  }
  EXPECT_EQ(greedy_choice(std::vector<float>{-kInf, -kInf, -kInf}), 0);
  const std::string refused = error_of([] { fail_unusable_logits(); });
  EXPECT_NE(refused.find("NaN or +inf"), std::string::npos);
  for (float bad : {std::nanf(""), kInf}) {
    std::vector<float> row(40, 1.0f);
    row[37] = bad;
    EXPECT_EQ(greedy_choice(row), -1);
    EXPECT_EQ(error_of([&] { sampler.choose(row, {}); }), refused);
  }
  SamplingOptions options;
  EXPECT_TRUE(options.plain_greedy());
  options.repetition_penalty = 1.1;
  EXPECT_FALSE(options.plain_greedy());
  options.repetition_penalty = 1.0;
  options.do_sample = true;
  EXPECT_FALSE(options.plain_greedy());
  options.temperature = 0.0;
  EXPECT_TRUE(options.plain_greedy());
}

// The draw as sampling.h defines it: ops::sample_tokens with row_sampling(options, seed, n) for
// the n-th draw (the op's own test pins the inverse CDF over its integer weights).
TEST(Sampling, TheDrawIsTheOpsDrawOfTheSeededStream) {
  const std::vector<float> given{std::log(0.1f), -kInf, std::log(0.2f), std::log(0.3f),
                                 std::log(0.4f)};
  TokenSampler sampler(sampling(), 1234);
  for (uint32_t draw = 0; draw < 200; ++draw) {
    const RowSampling row = row_sampling(sampling(), 1234, draw);
    int32_t expected = -5;
    ops::sample_tokens(given.data(), 1, 5, &row, nullptr, 0, &expected);
    std::vector<float> logits = given;
    ASSERT_EQ(sampler.choose(logits, {}), expected) << "draw " << draw;
    EXPECT_EQ(logits, given);  // left as they are
    EXPECT_EQ(sampler.draws(), draw + 1);
  }
}

// The op's filters keep what process_logits keeps (tokens below 2^-40 of the most likely one's
// probability aside: the op gives them weight 0), and its weights are process_logits'
// probabilities to 1e-6.
TEST(Sampling, TheOpsFiltersKeepWhatProcessLogitsKeeps) {
  std::mt19937 random(17);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  struct Case {
    double temperature;
    int64_t top_k;
    double top_p, min_p, penalty;
  };
  const std::vector<Case> cases = {{1.0, 0, 1.0, 0.0, 1.0},   {0.7, 200, 1.0, 0.0, 1.0}, {1.3, 0, 0.9, 0.0, 1.0},
                                   {1.0, 0, 1.0, 0.05, 1.0},  {0.8, 50, 0.8, 0.02, 1.3}, {2.0, 3000, 0.5, 0.0, 0.7},
                                   {0.5, 1, 1.0, 0.0, 1.0},   {1.0, 0, 0.01, 0.0, 1.0},  {1.0, 0, 1.0, 1.0, 1.0}};
  for (size_t c = 0; c < cases.size(); ++c) {
    SamplingOptions options = sampling();
    options.temperature = cases[c].temperature;
    options.top_k = cases[c].top_k;
    options.top_p = cases[c].top_p;
    options.min_p = cases[c].min_p;
    options.repetition_penalty = cases[c].penalty;
    std::vector<float> logits(3000);
    for (float& logit : logits) logit = normal(random);
    logits[11] = -kInf;
    const std::vector<int32_t> context{5, 9, 9, 2999, 40};
    const std::vector<float> host = processed(options, logits, context);
    const std::vector<double> probabilities = softmax_probabilities(host);
    const RowSampling row = row_sampling(options, 0, 0);
    std::vector<float> values(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) {
      const bool in_context = std::find(context.begin(), context.end(), static_cast<int32_t>(i)) != context.end();
      values[i] = processed_logit(logits[i], in_context, row.repetition_penalty, row.temperature);
    }
    const std::vector<uint64_t> weights = ops::kept_weights(values, row);
    double total = 0.0;
    for (uint64_t weight : weights) total += static_cast<double>(weight);
    const double largest = *std::max_element(values.begin(), values.end());
    for (size_t i = 0; i < logits.size(); ++i) {
      if (std::exp(static_cast<double>(values[i]) - largest) < 0x1.01p-40) continue;  // below the op's unit
      EXPECT_EQ(weights[i] > 0, host[i] != -kInf) << "case " << c << ", token " << i;
      EXPECT_NEAR(static_cast<double>(weights[i]) / total, probabilities[i], 1e-6) << "case " << c << ", token " << i;
    }
  }
}

TEST(Sampling, FrequenciesFollowTheFilteredDistribution) {
  SamplingOptions options = sampling();
  options.top_k = 3;  // drops token 0 (0.1); the rest renormalised: 2/9, 3/9, 4/9
  TokenSampler sampler(options, 7);
  std::vector<int> counts(4, 0);
  const int draws = 20000;
  for (int draw = 0; draw < draws; ++draw) {
    std::vector<float> logits = logs({0.1, 0.2, 0.3, 0.4});
    ++counts[static_cast<size_t>(sampler.choose(logits, {}))];
  }
  EXPECT_EQ(counts[0], 0);
  // Binomial standard deviation <= 0.0036 at 20000 draws: 0.015 is over 4 of them.
  for (size_t token = 1; token < 4; ++token) {
    EXPECT_NEAR(counts[token] / double(draws), static_cast<double>(token + 1) / 9.0, 0.015)
        << token;
  }
}

TEST(Sampling, TheSameSeedGivesTheSameTokens) {
  const auto tokens = [](uint64_t seed) {
    SamplingOptions options = sampling();
    options.temperature = 1.5;
    options.top_p = 0.95;
    TokenSampler sampler(options, seed);
    std::vector<int32_t> chosen;
    for (int step = 0; step < 64; ++step) {
      std::vector<float> logits(50);
      for (size_t id = 0; id < logits.size(); ++id) logits[id] = std::sin(float(id * 7 + step));
      chosen.push_back(sampler.choose(logits, chosen));
    }
    return chosen;
  };
  EXPECT_EQ(tokens(42), tokens(42));
  EXPECT_NE(tokens(42), tokens(43));
}

TEST(Sampling, NaNOrNothingLeftIsAUserError) {
  TokenSampler sampler(sampling(), 0);
  std::vector<float> logits{1, std::nanf(""), 2};
  EXPECT_NE(error_of([&] { sampler.choose(logits, {}); }).find("NaN"), std::string::npos);
  logits.assign(40, 0.0f);
  logits[37] = kInf;  // past the first 16 lanes
  EXPECT_NE(error_of([&] { sampler.choose(logits, {}); }).find("+inf"), std::string::npos);
  logits = {-kInf, -kInf};
  EXPECT_NE(error_of([&] { sampler.choose(logits, {}); }).find("every logit is -inf"),
            std::string::npos);
}

TEST(Sampling, OptionsOutOfRangeNameTheOption) {
  struct Case {
    SamplingOptions options;
    std::string message;
  };
  // {do_sample, temperature, top_k, top_p, min_p, repetition_penalty}
  const std::vector<Case> cases = {
      {{true, 1.0, 50, 1.0, 0.0, 1.0}, ""},
      {{true, -0.5, 50, 1.0, 0.0, 1.0}, "temperature must be >= 0 (0 = greedy), got -0.5"},
      {{true, 1.0, -1, 1.0, 0.0, 1.0}, "top_k must be >= 0 (0 = off), got -1"},
      {{true, 1.0, 50, 0.0, 0.0, 1.0}, "top_p must be in (0, 1] (1 = off), got 0"},
      {{true, 1.0, 50, 1.5, 0.0, 1.0}, "top_p must be in (0, 1] (1 = off), got 1.5"},
      {{true, 1.0, 50, 1.0, -0.1, 1.0}, "min_p must be in [0, 1] (0 = off), got -0.1"},
      {{true, 1.0, 50, 1.0, 2.0, 1.0}, "min_p must be in [0, 1] (0 = off), got 2"},
      {{true, 1.0, 50, 1.0, 0.0, 0.0}, "repetition_penalty must be > 0 (1 = off), got 0"},
      {{true, std::nan(""), 50, 1.0, 0.0, 1.0}, "temperature must be a finite number, got nan"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(error_of([&] { TokenSampler(c.options, 0); }), c.message);
  }
}

TEST(Sampling, LogSoftmaxOfTheUnprocessedLogits) {
  const std::vector<float> logits{1, 2, 2, -kInf};
  const double normalizer = 2.0 + std::log(1.0 + 1.0 + std::exp(-1.0));
  const Logprobs result = log_softmax(logits, 0, 3);
  EXPECT_NEAR(result.chosen, 1.0 - normalizer, 1e-12);
  ASSERT_EQ(result.top.size(), 3u);
  EXPECT_EQ(result.top[0].token, 1);  // the tie 1 / 2: lower id first
  EXPECT_EQ(result.top[1].token, 2);
  EXPECT_EQ(result.top[2].token, 0);
  EXPECT_NEAR(result.top[0].logprob, 2.0 - normalizer, 1e-12);
  EXPECT_NEAR(result.top[2].logprob, result.chosen, 1e-12);
  EXPECT_EQ(log_softmax(logits, 3, 0).chosen, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(log_softmax(logits, 0, 10).top.size(), 4u);  // clamped to the vocabulary
  EXPECT_NE(error_of([&] { log_softmax(logits, 4, 1); }).find("outside the vocabulary"),
            std::string::npos);
  EXPECT_NE(error_of([&] { log_softmax(logits, 0, -1); }).find(">= 0"), std::string::npos);
}

}  // namespace
}  // namespace surogate::generate
