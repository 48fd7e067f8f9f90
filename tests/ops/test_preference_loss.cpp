// The preference losses (ops/preference_loss.h) and per-sequence log-probabilities
// (ops/preference_logps.h) against formulas written out here from TRL's code (DPOTrainer's
// sigmoid / sigmoid_norm / ipo, CPOTrainer's simpo, ORPOTrainer's odds ratio, KTOTrainer's kto),
// and their gradients against central differences (step 1e-6, relative error < 1e-6).
// tests/python/test_preference_tuning.py compares the same losses with TRL itself.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/preference_logps.h"
#include "ops/preference_loss.h"

namespace surogate::ops {
namespace {

double log_sig(double x) { return -std::log1p(std::exp(-x)); }

// Two pairs: chosen log-probs, then rejected ones; completion lengths; the reference's log-probs.
const std::vector<double> kLogps{-12.5, -30.25, -14.0, -28.0};
const std::vector<double> kReference{-13.0, -29.5, -13.5, -29.0};
const std::vector<double> kLengths{5.0, 9.0, 7.0, 8.0};
const std::vector<double> kLabels{1.0, 0.0};
const double kScales[2] = {0.5, 1.0 / 14.0};

double forward(const PreferenceLossOptions& options, const std::vector<double>& logps) {
  return preference_loss_forward(options, 2, logps.data(), kReference.data(), kLengths.data(), kLabels.data(), kScales);
}

PreferenceLossOptions with_type(PreferenceLossType type) {
  PreferenceLossOptions options;
  options.type = type;
  return options;
}

TEST(PreferenceLoss, DpoIsTrlSigmoidAndIsLnTwoAtTheReference) {
  const PreferenceLossOptions options = with_type(PreferenceLossType::Dpo);
  double expected = 0.0;
  for (int i = 0; i < 2; ++i) {
    const double delta = (kLogps[i] - kReference[i]) - (kLogps[2 + i] - kReference[2 + i]);
    expected += -log_sig(options.beta * delta);
  }
  EXPECT_NEAR(forward(options, kLogps), 0.5 * expected, 1e-12);
  EXPECT_NEAR(forward(options, kReference), 0.5 * 2.0 * std::log(2.0), 1e-12);  // step 0: ln 2 per pair
}

TEST(PreferenceLoss, DpoOptions) {
  PreferenceLossOptions options = with_type(PreferenceLossType::Dpo);
  options.label_smoothing = 0.1;
  options.length_norm = true;
  options.target_margin = 0.05;
  double expected = 0.0;
  for (int i = 0; i < 2; ++i) {
    const double z = options.beta * ((kLogps[i] - kReference[i]) / kLengths[i] -
                                     (kLogps[2 + i] - kReference[2 + i]) / kLengths[2 + i]) - 0.05;
    expected += -0.9 * log_sig(z) - 0.1 * log_sig(-z);
  }
  EXPECT_NEAR(forward(options, kLogps), 0.5 * expected, 1e-12);
  options = with_type(PreferenceLossType::Dpo);
  options.reference_free = true;
  const double z0 = options.beta * (kLogps[0] - kLogps[2]), z1 = options.beta * (kLogps[1] - kLogps[3]);
  EXPECT_NEAR(forward(options, kLogps), 0.5 * (-log_sig(z0) - log_sig(z1)), 1e-12);
}

TEST(PreferenceLoss, IpoSimpoOrpoKto) {
  double ipo = 0.0, simpo = 0.0, orpo = 0.0;
  for (int i = 0; i < 2; ++i) {
    const double c = kLogps[i], r = kLogps[2 + i], lc = kLengths[i], lr = kLengths[2 + i];
    const double d = (c - kReference[i]) / lc - (r - kReference[2 + i]) / lr - 1.0 / (2.0 * 0.1);
    ipo += d * d;
    simpo += -log_sig(0.1 * (c / lc - r / lr) - 0.5);
    const double log_odds = (c / lc - r / lr) - (std::log(1.0 - std::exp(c / lc)) - std::log(1.0 - std::exp(r / lr)));
    orpo += -0.1 * log_sig(log_odds);
  }
  EXPECT_NEAR(forward(with_type(PreferenceLossType::Ipo), kLogps), 0.5 * ipo, 1e-10);
  EXPECT_NEAR(forward(with_type(PreferenceLossType::Simpo), kLogps), 0.5 * simpo, 1e-12);
  const double nll = -(kLogps[0] + kLogps[1]) / 14.0;
  EXPECT_NEAR(forward(with_type(PreferenceLossType::Orpo), kLogps), 0.5 * orpo + nll, 1e-12);
  // KTO: rows 0, 1 with labels 1, 0; rows 2, 3 their KL completions.
  const double kl = std::max(0.0, 0.5 * ((kLogps[2] - kReference[2]) + (kLogps[3] - kReference[3])));
  auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  const double kto = (1.0 - sig(0.1 * ((kLogps[0] - kReference[0]) - kl))) + (1.0 - sig(0.1 * (kl - (kLogps[1] - kReference[1]))));
  EXPECT_NEAR(forward(with_type(PreferenceLossType::Kto), kLogps), 0.5 * kto, 1e-12);
}

TEST(PreferenceLoss, PaddingPairAddsNothing) {
  const std::vector<double> logps{-3.0, 0.0, -4.0, 0.0}, reference{-3.5, 0.0, -3.0, 0.0}, lengths{2.0, 0.0, 3.0, 0.0};
  const double scales[2] = {1.0, 1.0};
  for (PreferenceLossType type : {PreferenceLossType::Dpo, PreferenceLossType::Ipo, PreferenceLossType::Simpo,
                                  PreferenceLossType::Orpo}) {
    const PreferenceLossOptions options = with_type(type);
    const double both = preference_loss_forward(options, 2, logps.data(), reference.data(), lengths.data(), kLabels.data(), scales);
    const std::vector<double> one_logps{-3.0, -4.0}, one_reference{-3.5, -3.0}, one_lengths{2.0, 3.0};
    const double one = preference_loss_forward(options, 1, one_logps.data(), one_reference.data(), one_lengths.data(),
                                               kLabels.data(), scales);
    EXPECT_NEAR(both, one, 1e-12) << preference_loss_type_name(type);
  }
}

TEST(PreferenceLoss, KtoReferencePointLeavesPaddingRowsOut) {
  // Row 0 (desirable) and a padding row; their KL sequences after them. The reference point is row 0's
  // KL log-ratio (1.0), not the mean with the padding row's 0.
  const std::vector<double> logps{-3.0, 0.0, -2.0, 0.0}, reference{-3.5, 0.0, -3.0, 0.0}, lengths{2.0, 0.0, 3.0, 0.0};
  EXPECT_DOUBLE_EQ(kto_reference_point(2, logps.data(), reference.data(), lengths.data()), 1.0);
  const double scales[2] = {1.0, 0.0};
  const PreferenceLossOptions options = with_type(PreferenceLossType::Kto);
  const double both = preference_loss_forward(options, 2, logps.data(), reference.data(), lengths.data(), kLabels.data(), scales);
  const std::vector<double> one_logps{-3.0, -2.0}, one_reference{-3.5, -3.0}, one_lengths{2.0, 3.0};
  const double one = preference_loss_forward(options, 1, one_logps.data(), one_reference.data(), one_lengths.data(),
                                             kLabels.data(), scales);
  EXPECT_NEAR(both, one, 1e-12);
  EXPECT_NEAR(one, 1.0 - 1.0 / (1.0 + std::exp(-0.1 * (0.5 - 1.0))), 1e-12);
  const std::vector<double> below{-3.0, 0.0, -4.0, 0.0};  // a negative mean log-ratio is clamped at 0
  EXPECT_EQ(kto_reference_point(2, below.data(), reference.data(), lengths.data()), 0.0);
}

TEST(PreferenceLoss, GradientsMatchCentralDifferences) {
  std::vector<PreferenceLossOptions> cases;
  for (PreferenceLossType type : {PreferenceLossType::Dpo, PreferenceLossType::Ipo, PreferenceLossType::Simpo,
                                  PreferenceLossType::Orpo, PreferenceLossType::Kto}) {
    cases.push_back(with_type(type));
  }
  PreferenceLossOptions smoothed = with_type(PreferenceLossType::Dpo);
  smoothed.label_smoothing = 0.2;
  smoothed.length_norm = true;
  smoothed.target_margin = 0.1;
  cases.push_back(smoothed);
  for (const PreferenceLossOptions& options : cases) {
    std::vector<double> gradient(4);
    preference_loss_backward(options, 2, kLogps.data(), kReference.data(), kLengths.data(), kLabels.data(), kScales, 1.5,
                             gradient.data());
    for (size_t i = 0; i < 4; ++i) {
      if (options.type == PreferenceLossType::Kto && i >= 2) {
        EXPECT_EQ(gradient[i], 0.0) << "KTO's KL rows are not differentiated";
        continue;
      }
      std::vector<double> up(kLogps), down(kLogps);
      up[i] += 1e-6;
      down[i] -= 1e-6;
      const double numeric = 1.5 * (forward(options, up) - forward(options, down)) / 2e-6;
      EXPECT_NEAR(gradient[i], numeric, 1e-6 * std::max(1.0, std::abs(numeric)))
          << preference_loss_type_name(options.type) << " logps[" << i << "]";
    }
  }
}

// Rows: 2 sequences over 5 rows; row 2 has no sequence, row 4 an ignored target.
struct LogpsCase {
  SequenceLogpsShape shape{5, 3, 4, 2};
  std::vector<double> hidden{0.3, -0.2, 0.5, 1.0, 0.1, -0.4, 0.7, 0.7, 0.2, -0.6, 0.3, 0.9, 0.05, -0.5, 0.25};
  std::vector<double> weight{0.2, -0.1, 0.4, -0.3, 0.8, 0.1, 0.5, 0.5, -0.2, 0.0, 0.3, -0.7};
  std::vector<int32_t> targets{1, 3, 2, 0, -100};
  std::vector<int32_t> sequence_ids{0, 0, -1, 1, 1};
};

TEST(SequenceLogps, SumsTheCompletionLogSoftmax) {
  LogpsCase c;
  std::vector<double> logps(2), logit_sums(2), lse(5);
  sequence_logps_forward(c.shape, c.hidden.data(), c.weight.data(), c.targets.data(), c.sequence_ids.data(), logps.data(),
                         logit_sums.data(), lse.data());
  std::vector<double> expected(2, 0.0), means(2, 0.0);
  for (int row : {0, 1, 3}) {
    std::vector<double> logits(4);
    double top = -1e300, total = 0.0;
    for (int v = 0; v < 4; ++v) {
      for (int d = 0; d < 3; ++d) logits[v] += c.hidden[row * 3 + d] * c.weight[v * 3 + d];
      top = std::max(top, logits[v]);
      total += logits[v];
    }
    double sum = 0.0;
    for (double l : logits) sum += std::exp(l - top);
    expected[c.sequence_ids[row]] += logits[c.targets[row]] - (top + std::log(sum));
    means[c.sequence_ids[row]] += total / 4.0;
  }
  for (int s = 0; s < 2; ++s) {
    EXPECT_NEAR(logps[s], expected[s], 1e-12);
    EXPECT_NEAR(logit_sums[s], means[s], 1e-12);
  }
}

TEST(SequenceLogps, GradientsMatchCentralDifferences) {
  LogpsCase c;
  const std::vector<double> upstream{0.7, -1.3};
  auto objective = [&](const std::vector<double>& hidden, const std::vector<double>& weight) {
    std::vector<double> logps(2), sums(2), lse(5);
    sequence_logps_forward(c.shape, hidden.data(), weight.data(), c.targets.data(), c.sequence_ids.data(), logps.data(),
                           sums.data(), lse.data());
    return upstream[0] * logps[0] + upstream[1] * logps[1];
  };
  std::vector<double> logps(2), sums(2), lse(5), d_hidden(15, 9.0), d_weight(12, 0.0);
  sequence_logps_forward(c.shape, c.hidden.data(), c.weight.data(), c.targets.data(), c.sequence_ids.data(), logps.data(),
                         sums.data(), lse.data());
  sequence_logps_backward(c.shape, c.hidden.data(), c.weight.data(), c.targets.data(), c.sequence_ids.data(), lse.data(),
                          upstream.data(), d_hidden.data(), d_weight.data());
  for (size_t i = 0; i < c.hidden.size(); ++i) {
    std::vector<double> up(c.hidden), down(c.hidden);
    up[i] += 1e-6;
    down[i] -= 1e-6;
    const double numeric = (objective(up, c.weight) - objective(down, c.weight)) / 2e-6;
    EXPECT_NEAR(d_hidden[i], numeric, 1e-7) << "hidden " << i;
  }
  for (size_t i = 0; i < c.weight.size(); ++i) {
    std::vector<double> up(c.weight), down(c.weight);
    up[i] += 1e-6;
    down[i] -= 1e-6;
    const double numeric = (objective(c.hidden, up) - objective(c.hidden, down)) / 2e-6;
    EXPECT_NEAR(d_weight[i], numeric, 1e-7) << "weight " << i;
  }
  for (int d = 0; d < 3; ++d) EXPECT_EQ(d_hidden[2 * 3 + d], 0.0) << "a row of no sequence gets no gradient";
}

}  // namespace
}  // namespace surogate::ops
