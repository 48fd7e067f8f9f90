// Group-relative advantages (see advantages.h).
#include "rl/advantages.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace surogate::rl {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// TRL adds it to the standard deviation before dividing.
constexpr double kStdEpsilon = 1e-4;
// torch.isclose(std, 0)'s default atol (rtol times 0 is 0).
constexpr double kZeroStd = 1e-8;

std::vector<double> slice(const std::vector<double>& values, size_t begin, size_t count) {
  return {values.begin() + static_cast<std::ptrdiff_t>(begin),
          values.begin() + static_cast<std::ptrdiff_t>(begin + count)};
}

void check_reward_counts(const std::vector<std::vector<double>>& rewards, const std::vector<double>& weights,
                         int64_t num_generations) {
  if (rewards.empty()) fail_user("GRPO needs at least one reward function (reward_functions)");
  if (weights.size() != rewards.size()) {
    fail_user("reward_weights has {} values for {} reward functions; give one weight per function", weights.size(),
              rewards.size());
  }
  if (num_generations < 1) fail_user("num_generations must be at least 1 (got {})", num_generations);
  for (const std::vector<double>& column : rewards) {
    SUROGATE_CHECK(column.size() == rewards.front().size(), "reward functions scored {} and {} completions",
                   column.size(), rewards.front().size());
  }
  if (rewards.front().size() % static_cast<size_t>(num_generations) != 0) {
    fail_user("{} completions do not make whole groups of num_generations = {}", rewards.front().size(),
              num_generations);
  }
}

}  // namespace

ScaleRewards parse_scale_rewards(const std::string& value, const std::string& key) {
  if (value == "group" || value == "true") return ScaleRewards::Group;
  if (value == "batch") return ScaleRewards::Batch;
  if (value == "none" || value == "false") return ScaleRewards::None;
  fail_user("{}: '{}' is not one of group, batch, none (or true = group, false = none)", key, value);
}

RewardStatistics nan_statistics(const std::vector<double>& values) {
  double sum = 0.0;
  int64_t count = 0;
  for (double value : values) {
    if (std::isnan(value)) continue;
    sum += value;
    ++count;
  }
  RewardStatistics statistics;
  statistics.mean = count > 0 ? sum / static_cast<double>(count) : kNaN;
  double squares = 0.0;
  for (double value : values) {
    if (!std::isnan(value)) squares += (value - statistics.mean) * (value - statistics.mean);
  }
  // TRL: nanmean of the squares times count / (count − 1).
  statistics.std = count > 1 ? std::sqrt(squares / static_cast<double>(count - 1)) : kNaN;
  return statistics;
}

GroupAdvantages group_advantages(const std::vector<std::vector<double>>& rewards_per_function,
                                 const std::vector<double>& reward_weights, int64_t num_generations,
                                 ScaleRewards scale) {
  check_reward_counts(rewards_per_function, reward_weights, num_generations);
  const size_t completions = rewards_per_function.front().size(), group = static_cast<size_t>(num_generations);
  GroupAdvantages result;
  result.rewards.assign(completions, 0.0);
  for (size_t i = 0; i < completions; ++i) {
    bool scored = false;
    for (size_t f = 0; f < rewards_per_function.size(); ++f) {
      const double value = rewards_per_function[f][i];
      if (std::isnan(value)) continue;
      result.rewards[i] += reward_weights[f] * value;
      scored = true;
    }
    if (!scored) result.rewards[i] = kNaN;
  }
  const RewardStatistics batch = nan_statistics(result.rewards);
  result.advantages.assign(completions, 0.0);
  int64_t zero_std = 0;
  for (size_t begin = 0; begin < completions; begin += group) {
    const RewardStatistics local = nan_statistics(slice(result.rewards, begin, group));
    double deviation = scale == ScaleRewards::Batch ? batch.std : local.std;
    const bool single = scale == ScaleRewards::Batch ? completions < 2 : group < 2;
    if (single) deviation = 0.0;
    for (size_t i = begin; i < begin + group; ++i) {
      double advantage = result.rewards[i] - local.mean;
      if (scale != ScaleRewards::None) advantage /= deviation + kStdEpsilon;
      result.advantages[i] = std::isnan(advantage) ? 0.0 : advantage;
      if (std::abs(deviation) <= kZeroStd) ++zero_std;
    }
  }
  result.frac_reward_zero_std = completions > 0 ? static_cast<double>(zero_std) / static_cast<double>(completions) : 0.0;
  result.reward = batch;
  for (const std::vector<double>& column : rewards_per_function) result.per_function.push_back(nan_statistics(column));
  return result;
}

}  // namespace surogate::rl
