// GRPO's per-token log-probs and loss (src/ops/grpo_logprobs.h, grpo_loss.h): values worked by
// hand, each loss_type's normalisation, clipping and KL, gradients by finite differences in
// double (gradient_check.h's tolerance), float against double. TRL itself is the oracle in
// tests/python/test_grpo_trl.py.
#include <cmath>

#include "gradient_check.h"
#include "ops/grpo_logprobs.h"
#include "ops/grpo_loss.h"

namespace surogate::ops {
namespace {

using testing::random_vector;

constexpr int64_t kSequences = 3, kTokens = 4;
// Sequence 0 is whole, 1 ends after two tokens, 2 is masked out (a truncated completion).
const std::vector<double> kMask = {1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0};
const std::vector<double> kAdvantages = {1.5, -0.7, 0.3};

GrpoLossInputs<double> inputs(const std::vector<double>& logp, const std::vector<double>* old,
                              const std::vector<double>* ref) {
  return {logp.data(), old != nullptr ? old->data() : nullptr, ref != nullptr ? ref->data() : nullptr,
          kAdvantages.data(), kMask.data()};
}

TEST(GrpoLogprobs, LogSoftmaxOfTheLabelAtTheTemperature) {
  const int64_t rows = 3, vocab = 5;
  const std::vector<double> logits = random_vector(rows * vocab, 1, -3, 3);
  const std::vector<int32_t> labels = {4, kIgnoreIndex, 0};
  std::vector<double> logp(rows), lse(rows);
  token_logprobs_forward(TokenLogprobShape{rows, vocab, 0.7}, logits.data(), labels.data(), logp.data(), lse.data());
  for (int64_t n : {0, 2}) {
    double total = 0.0;
    for (int64_t v = 0; v < vocab; ++v) total += std::exp(logits[n * vocab + v] / 0.7);
    EXPECT_NEAR(logp[n], logits[n * vocab + labels[n]] / 0.7 - std::log(total), 1e-13);
  }
  EXPECT_EQ(logp[1], 0.0);
}

TEST(GrpoLogprobs, GradientMatchesFiniteDifferences) {
  const int64_t rows = 4, vocab = 7;
  const TokenLogprobShape shape{rows, vocab, 0.9};
  std::vector<double> logits = random_vector(rows * vocab, 2, -2, 2);
  const std::vector<int32_t> labels = {6, 0, kIgnoreIndex, 3};
  const std::vector<double> upstream = random_vector(rows, 3);
  std::vector<double> logp(rows), lse(rows), d_logits(rows * vocab);
  auto loss = [&] {
    token_logprobs_forward(shape, logits.data(), labels.data(), logp.data(), lse.data());
    return testing::weighted_sum(logp, upstream);
  };
  loss();
  token_logprobs_backward(shape, logits.data(), labels.data(), lse.data(), upstream.data(), d_logits.data());
  for (int64_t v = 0; v < vocab; ++v) EXPECT_EQ(d_logits[2 * vocab + v], 0.0);
  testing::expect_gradient_matches(loss, logits, d_logits, 4, "d_logits");
}

TEST(GrpoLoss, OnPolicyLossIsMinusTheWeightedAdvantages) {
  // old = logp: every ratio is 1, so each token's loss is −A and the loss_type only weighs them.
  const std::vector<double> logp = random_vector(kSequences * kTokens, 5, -3, -0.1);
  const GrpoLossShape shape{kSequences, kTokens};
  GrpoLossOptions options;
  options.loss_type = GrpoLossType::Grpo;
  options.accumulation_steps = 2;
  // grpo: mean over sequences of each one's token mean (the masked-out one counts 0 over max(0, 1)).
  EXPECT_NEAR(grpo_loss_forward(shape, options, inputs(logp, nullptr, nullptr)).loss, (-1.5 + 0.7 + 0.0) / 3 / 2,
              1e-15);
  options.loss_type = GrpoLossType::Bnpo;
  EXPECT_NEAR(grpo_loss_forward(shape, options, inputs(logp, nullptr, nullptr)).loss,
              (4 * -1.5 + 2 * 0.7) / 6 / 2, 1e-15);
  options.loss_type = GrpoLossType::DrGrpo;
  options.max_completion_length = 8;
  EXPECT_NEAR(grpo_loss_forward(shape, options, inputs(logp, nullptr, nullptr)).loss,
              (4 * -1.5 + 2 * 0.7) / (3 * 8) / 2, 1e-15);
  options.loss_type = GrpoLossType::Dapo;  // accumulation_steps is not dapo's
  EXPECT_NEAR(grpo_loss_forward(shape, options, inputs(logp, nullptr, nullptr)).loss, (4 * -1.5 + 2 * 0.7) / 6,
              1e-15);
  options.token_normalizer = 10;
  EXPECT_NEAR(grpo_loss_forward(shape, options, inputs(logp, nullptr, nullptr)).loss, (4 * -1.5 + 2 * 0.7) / 10,
              1e-15);
}

TEST(GrpoLoss, ClippingAndItsMetrics) {
  // Sequence 0 (A > 0): ratios 1.5 (clipped high), 1.0, 0.5, 1.1; sequence 1 (A < 0): 0.5 (clipped
  // low), 1.5 (unclipped: min picks r·A).
  const std::vector<double> ratios = {1.5, 1.0, 0.5, 1.1, 0.5, 1.5, 1, 1, 1, 1, 1, 1};
  std::vector<double> old = random_vector(kSequences * kTokens, 6, -3, -0.1), logp(old.size());
  for (size_t i = 0; i < old.size(); ++i) logp[i] = old[i] + std::log(ratios[i]);
  GrpoLossOptions options;
  options.loss_type = GrpoLossType::Bnpo;
  const GrpoLossResult result = grpo_loss_forward(GrpoLossShape{kSequences, kTokens}, options, inputs(logp, &old, nullptr));
  const double expected = -(1.2 * 1.5 + 1.0 * 1.5 + 0.5 * 1.5 + 1.1 * 1.5 + 0.8 * -0.7 + 1.5 * -0.7) / 6;
  EXPECT_NEAR(result.loss, expected, 1e-12);
  EXPECT_NEAR(result.metrics.clip_high_mean, 1.0 / 6, 1e-15);
  EXPECT_NEAR(result.metrics.clip_low_mean, 1.0 / 6, 1e-15);
  EXPECT_NEAR(result.metrics.clip_region_mean, 2.0 / 6, 1e-15);
  EXPECT_NEAR(result.metrics.clip_low_min, 0.0, 1e-15);   // sequence 0 has no low clip
  EXPECT_NEAR(result.metrics.clip_high_max, 0.25, 1e-15);  // one of sequence 0's four
  EXPECT_EQ(result.metrics.kl, 0.0);
}

TEST(GrpoLoss, KlIsTheK3EstimatorsMaskedMean) {
  const std::vector<double> logp = random_vector(kSequences * kTokens, 7, -3, -0.1);
  const std::vector<double> ref = random_vector(kSequences * kTokens, 8, -3, -0.1);
  GrpoLossOptions options;
  options.beta = 0.04;
  const GrpoLossResult result = grpo_loss_forward(GrpoLossShape{kSequences, kTokens}, options, inputs(logp, nullptr, &ref));
  double kl = 0.0, advantage_part = 0.0;
  for (int64_t b = 0; b < kSequences; ++b) {
    for (int64_t t = 0; t < kTokens; ++t) {
      const size_t i = static_cast<size_t>(b * kTokens + t);
      kl += kMask[i] * (std::exp(ref[i] - logp[i]) - (ref[i] - logp[i]) - 1);
      advantage_part += kMask[i] * -kAdvantages[static_cast<size_t>(b)];
    }
  }
  EXPECT_NEAR(result.metrics.kl, kl / 6, 1e-14);
  EXPECT_NEAR(result.loss, (advantage_part + 0.04 * kl) / 6, 1e-14);
}

// Every loss_type with clipping (asymmetric, and delta), KL and an old policy: the gradient of
// logp against finite differences.
TEST(GrpoLoss, GradientMatchesFiniteDifferencesForEveryLossType) {
  std::vector<double> logp = random_vector(kSequences * kTokens, 9, -2, -0.1);
  std::vector<double> old(logp.size()), ref = random_vector(logp.size(), 10, -2, -0.1);
  const std::vector<double> shift = random_vector(logp.size(), 11, -0.6, 0.6);  // ratios 0.55 .. 1.8
  for (size_t i = 0; i < logp.size(); ++i) old[i] = logp[i] + shift[i];
  const GrpoLossShape shape{kSequences, kTokens};
  for (GrpoLossType type : {GrpoLossType::Grpo, GrpoLossType::Bnpo, GrpoLossType::DrGrpo, GrpoLossType::Dapo}) {
    for (bool with_delta : {false, true}) {
      GrpoLossOptions options{type, 0.2, 0.28, std::nullopt, 0.05, 6, 2.0, 0.0};
      if (with_delta) options.delta = 1.4;
      std::vector<double> d_logp(logp.size());
      auto loss = [&] { return grpo_loss_forward(shape, options, inputs(logp, &old, &ref)).loss; };
      grpo_loss_backward(shape, options, inputs(logp, &old, &ref), 1.0, d_logp.data());
      for (size_t i = 0; i < d_logp.size(); ++i) {
        if (kMask[i] == 0.0) EXPECT_EQ(d_logp[i], 0.0);
      }
      testing::expect_gradient_matches(loss, logp, d_logp, 12, "d_logp", 4);
    }
  }
}

TEST(GrpoLoss, OnPolicyGradientIsTorchs) {
  // old = logp (num_iterations 1): r = 1 with dr/dlogp = 1, both sides of min() tie, each takes half:
  // the gradient is −A · weight, as exp(logp − logp.detach()) gives in torch.
  const std::vector<double> logp = random_vector(kSequences * kTokens, 13, -2, -0.1);
  GrpoLossOptions options;
  options.loss_type = GrpoLossType::Bnpo;
  std::vector<double> d_logp(logp.size());
  grpo_loss_backward(GrpoLossShape{kSequences, kTokens}, options, inputs(logp, nullptr, nullptr), 2.0, d_logp.data());
  EXPECT_NEAR(d_logp[0], 2.0 * -1.5 / 6, 1e-15);
  EXPECT_NEAR(d_logp[5], 2.0 * 0.7 / 6, 1e-15);
  EXPECT_EQ(d_logp[6], 0.0);
}

TEST(GrpoLoss, FloatAgreesWithDouble) {
  const std::vector<double> logp = random_vector(kSequences * kTokens, 14, -2, -0.1);
  const std::vector<double> old = random_vector(logp.size(), 15, -2, -0.1);
  const std::vector<float> logp_f = testing::to_float(logp), old_f = testing::to_float(old),
                           advantages_f = testing::to_float(kAdvantages), mask_f = testing::to_float(kMask);
  std::vector<double> logp_rounded(logp_f.begin(), logp_f.end()), old_rounded(old_f.begin(), old_f.end());
  GrpoLossOptions options;
  const GrpoLossShape shape{kSequences, kTokens};
  const GrpoLossInputs<float> in_f{logp_f.data(), old_f.data(), nullptr, advantages_f.data(), mask_f.data()};
  const double expected = grpo_loss_forward(shape, options, inputs(logp_rounded, &old_rounded, nullptr)).loss;
  EXPECT_NEAR(grpo_loss_forward(shape, options, in_f).loss, expected, 1e-7 * std::abs(expected));
}

}  // namespace
}  // namespace surogate::ops
