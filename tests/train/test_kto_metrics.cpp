// KTOTrainer's metrics (train/objective/kto_metrics.h), written out here from TRL 1.16's
// _compute_loss: per micro-batch means over the desirable and the undesirable rows, averaged over
// the micro-batches that had such rows; the batch's KL reference point; padding rows left out.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "train/objective/kto_metrics.h"

namespace surogate::train {
namespace {

double kto_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(KtoMetrics, TrlNamesAndMeansOverMicroBatches) {
  ops::PreferenceLossOptions options;
  options.type = ops::PreferenceLossType::Kto;
  KtoMetrics metrics(options);
  // Four rows (desirable, undesirable, desirable, padding), then their KL sequences.
  const std::vector<float> logps{-2.0f, -5.0f, -3.0f, 0.0f, -4.0f, -6.0f, -1.0f, 0.0f};
  const std::vector<float> reference{-2.5f, -4.0f, -3.5f, 0.0f, -5.0f, -6.5f, -2.0f, 0.0f};
  const std::vector<float> lengths{2.0f, 4.0f, 3.0f, 0.0f, 3.0f, 3.0f, 3.0f, 0.0f};
  const std::vector<float> labels{1.0f, 0.0f, 1.0f, 0.0f};
  const std::vector<float> logit_sums{4.0f, 8.0f, 9.0f, 0.0f, 1.0f, 1.0f, 1.0f, 0.0f};
  metrics.add(4, logps.data(), logit_sums.data(), reference.data(), lengths.data(), labels.data());
  // A second micro-batch of two undesirable rows (log-ratios 0 and 1) whose KL log-ratios are 0.
  const std::vector<float> logps2{-1.0f, -1.0f, -1.0f, -1.0f}, reference2{-1.0f, -2.0f, -1.0f, -1.0f};
  const std::vector<float> lengths2{1.0f, 1.0f, 1.0f, 1.0f}, labels2{0.0f, 0.0f}, logit_sums2{3.0f, 5.0f, 0.0f, 0.0f};
  metrics.add(2, logps2.data(), logit_sums2.data(), reference2.data(), lengths2.data(), labels2.data());
  EXPECT_EQ(metrics.rows(), 5);
  const nlohmann::json record = metrics.take("eval_", true);
  const double kl = (1.0 + 0.5 + 1.0) / 3.0;
  EXPECT_NEAR(record["eval_kl"].get<double>(), 0.5 * (kl + 0.0), 1e-6);
  EXPECT_NEAR(record["eval_rewards/chosen"].get<double>(), 0.05, 1e-6);
  EXPECT_NEAR(record["eval_rewards/rejected"].get<double>(), 0.5 * (-0.1 + 0.05), 1e-6);
  EXPECT_NEAR(record["eval_rewards/margins"].get<double>(), 0.05 - -0.1, 1e-6);  // only the batch with both
  EXPECT_NEAR(record["eval_logps/chosen"].get<double>(), -2.5, 1e-6);
  EXPECT_NEAR(record["eval_logps/rejected"].get<double>(), 0.5 * (-5.0 + -1.0), 1e-6);
  EXPECT_NEAR(record["eval_logits/chosen"].get<double>(), (4.0 + 9.0) / (2.0 + 3.0), 1e-6);
  EXPECT_NEAR(record["eval_logits/rejected"].get<double>(), 0.5 * (8.0 / 4.0 + 8.0 / 2.0), 1e-6);
  // Rows on their label's side of β·kl: the first batch's undesirable row, the second batch's first
  // (reward 0 is not below β·0) is not, its second (0.1) is not.
  EXPECT_NEAR(record["eval_rewards/accuracies"].get<double>(), 1.0 / 5.0, 1e-12);
  const double loss = 2.0 * (1.0 - kto_sigmoid(0.1 * (0.5 - kl))) + (1.0 - kto_sigmoid(0.1 * (kl + 1.0))) +
                      (1.0 - kto_sigmoid(0.0)) + (1.0 - kto_sigmoid(0.1 * (0.0 - 1.0)));
  EXPECT_NEAR(record["eval_loss"].get<double>(), loss / 5.0, 1e-6);
  EXPECT_EQ(metrics.rows(), 0);  // take cleared the sums
}

TEST(KtoMetrics, NamesWithoutRowsAreLeftOut) {
  ops::PreferenceLossOptions options;
  options.type = ops::PreferenceLossType::Kto;
  KtoMetrics metrics(options);
  const std::vector<float> logps{-1.0f, -2.0f, -1.0f, -2.0f}, lengths{1.0f, 1.0f, 1.0f, 1.0f}, labels{1.0f, 1.0f};
  metrics.add(2, logps.data(), logps.data(), logps.data(), lengths.data(), labels.data());
  const nlohmann::json record = metrics.take("", false);
  EXPECT_TRUE(record.contains("rewards/chosen"));
  EXPECT_FALSE(record.contains("rewards/rejected"));
  EXPECT_FALSE(record.contains("rewards/margins"));  // TRL logs it only for batches with both labels
  EXPECT_FALSE(record.contains("loss"));
}

}  // namespace
}  // namespace surogate::train
