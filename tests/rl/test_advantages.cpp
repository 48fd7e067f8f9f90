// Group advantages (src/rl/advantages.h), worked by hand from TRL's formulas (TRL itself is the
// oracle in tests/python/test_grpo_trl.py).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "rl/advantages.h"

namespace surogate::rl {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double sample_std(std::vector<double> values) {
  double mean = 0.0;
  for (double v : values) mean += v / static_cast<double>(values.size());
  double squares = 0.0;
  for (double v : values) squares += (v - mean) * (v - mean);
  return std::sqrt(squares / static_cast<double>(values.size() - 1));
}

TEST(GroupAdvantages, WeightedRewardsNormalisedPerGroup) {
  // Two functions, weights 1 and 0.5; two groups of three.
  const std::vector<std::vector<double>> rewards = {{1, 0, 1, 0, 0, 0}, {1, 1, 0, 1, 1, 1}};
  const GroupAdvantages result = group_advantages(rewards, {1.0, 0.5}, 3, ScaleRewards::Group);
  EXPECT_EQ(result.rewards, (std::vector<double>{1.5, 0.5, 1.0, 0.5, 0.5, 0.5}));
  const double std0 = sample_std({1.5, 0.5, 1.0});
  EXPECT_NEAR(result.advantages[0], (1.5 - 1.0) / (std0 + 1e-4), 1e-15);
  EXPECT_NEAR(result.advantages[1], (0.5 - 1.0) / (std0 + 1e-4), 1e-15);
  EXPECT_EQ(result.advantages[2], 0.0);
  for (size_t i = 3; i < 6; ++i) EXPECT_EQ(result.advantages[i], 0.0);
  EXPECT_DOUBLE_EQ(result.frac_reward_zero_std, 0.5);  // the second group's three
  EXPECT_NEAR(result.reward.mean, 4.5 / 6, 1e-15);
  EXPECT_NEAR(result.reward.std, sample_std(result.rewards), 1e-15);
  ASSERT_EQ(result.per_function.size(), 2u);
  EXPECT_NEAR(result.per_function[1].mean, 5.0 / 6, 1e-15);
}

TEST(GroupAdvantages, BatchAndNoneScaling) {
  const std::vector<std::vector<double>> rewards = {{0.2, 0.9, 0.4, 0.4}};
  const GroupAdvantages batch = group_advantages(rewards, {1.0}, 2, ScaleRewards::Batch);
  const double std_all = sample_std({0.2, 0.9, 0.4, 0.4});
  EXPECT_NEAR(batch.advantages[0], (0.2 - 0.55) / (std_all + 1e-4), 1e-15);
  EXPECT_NEAR(batch.advantages[3], 0.0, 1e-15);
  EXPECT_EQ(batch.frac_reward_zero_std, 0.0);  // batch: the batch's std is not 0
  const GroupAdvantages none = group_advantages(rewards, {1.0}, 2, ScaleRewards::None);
  EXPECT_NEAR(none.advantages[0], 0.2 - 0.55, 1e-15);
  EXPECT_NEAR(none.advantages[1], 0.9 - 0.55, 1e-15);
  EXPECT_DOUBLE_EQ(none.frac_reward_zero_std, 0.5);  // none still counts the groups' zero std (TRL)
}

TEST(GroupAdvantages, NanRewardsAreSkippedAndUnscorableCompletionsGetZero) {
  // Completion 1: function 0 said None; completion 2: both did (unscorable).
  const std::vector<std::vector<double>> rewards = {{1, kNaN, kNaN, 0}, {1, 1, kNaN, 0}};
  const GroupAdvantages result = group_advantages(rewards, {1.0, 1.0}, 4, ScaleRewards::Group);
  EXPECT_EQ(result.rewards[1], 1.0);
  EXPECT_TRUE(std::isnan(result.rewards[2]));
  EXPECT_EQ(result.advantages[2], 0.0);
  const double mean = 3.0 / 3, deviation = sample_std({2, 1, 0});
  EXPECT_NEAR(result.advantages[0], (2 - mean) / (deviation + 1e-4), 1e-15);
  EXPECT_NEAR(result.per_function[0].mean, 0.5, 1e-15);
}

TEST(GroupAdvantages, OneGenerationHasZeroStd) {
  const GroupAdvantages result = group_advantages({{0.3, 0.7}}, {1.0}, 1, ScaleRewards::Group);
  EXPECT_EQ(result.advantages, (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(result.frac_reward_zero_std, 1.0);
}

TEST(GroupAdvantages, CountsThatDisagreeAreUserErrors) {
  EXPECT_THROW(group_advantages({{1, 0}}, {1.0, 2.0}, 2, ScaleRewards::Group), UserError);
  EXPECT_THROW(group_advantages({{1, 0, 1}}, {1.0}, 2, ScaleRewards::Group), UserError);
  EXPECT_THROW(group_advantages({}, {}, 2, ScaleRewards::Group), UserError);
}

TEST(GroupAdvantages, ScaleRewardsSpellings) {
  EXPECT_EQ(parse_scale_rewards("group"), ScaleRewards::Group);
  EXPECT_EQ(parse_scale_rewards("true"), ScaleRewards::Group);
  EXPECT_EQ(parse_scale_rewards("batch"), ScaleRewards::Batch);
  EXPECT_EQ(parse_scale_rewards("false"), ScaleRewards::None);
  try {
    parse_scale_rewards("sequence");
    FAIL();
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("scale_rewards: 'sequence' is not one of group, batch, none"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace surogate::rl
