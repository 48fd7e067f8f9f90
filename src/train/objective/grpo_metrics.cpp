// GRPO's scoring and metrics; see grpo_metrics.h.
#include "train/objective/grpo_metrics.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include <fmt/format.h>

namespace surogate::train {

rl::GroupAdvantages score_rollouts(const std::vector<const data::PromptRow*>& rows,
                                   const std::vector<rl::Rollout>& rollouts, rl::RewardFunctions& rewards,
                                   const config::Grpo& grpo) {
  rl::RewardBatch batch;
  for (const rl::Rollout& rollout : rollouts) {
    const data::PromptRow& row = *rows.at(rollout.prompt);
    batch.add(row.prompt, row.columns, rollout.completion, rollout.completion_ids, row.origin.describe());
  }
  const std::vector<std::vector<double>> scores = rewards.score(batch);
  std::vector<double> weights = grpo.reward_weights;
  if (weights.empty()) weights.assign(scores.size(), 1.0);
  return rl::group_advantages(scores, weights, grpo.num_generations, rl::parse_scale_rewards(grpo.scale_rewards));
}

void add_reward_metrics(const rl::GroupAdvantages& advantages, const std::vector<rl::RewardFunctionSpec>& specs,
                        nlohmann::json& metrics) {
  metrics["reward"] = advantages.reward.mean;
  metrics["reward_std"] = advantages.reward.std;
  metrics["frac_reward_zero_std"] = advantages.frac_reward_zero_std;
  for (size_t f = 0; f < specs.size(); ++f) {
    metrics[fmt::format("rewards/{}/mean", specs[f].name)] = advantages.per_function[f].mean;
    metrics[fmt::format("rewards/{}/std", specs[f].name)] = advantages.per_function[f].std;
  }
}

void add_length_metrics(const std::vector<rl::Rollout>& rollouts, nlohmann::json& metrics) {
  double sum = 0.0, terminated_sum = 0.0;
  int64_t least = INT64_MAX, most = 0, terminated = 0;
  for (const rl::Rollout& rollout : rollouts) {
    const auto length = static_cast<int64_t>(rollout.completion_ids.size());
    sum += static_cast<double>(length);
    least = std::min(least, length);
    most = std::max(most, length);
    if (rollout.finish_reason == "stop") {
      terminated_sum += static_cast<double>(length);
      ++terminated;
    }
  }
  const double count = static_cast<double>(std::max<size_t>(rollouts.size(), 1));
  metrics["completions/mean_length"] = sum / count;
  metrics["completions/min_length"] = rollouts.empty() ? 0 : least;
  metrics["completions/max_length"] = most;
  metrics["completions/clipped_ratio"] = 1.0 - static_cast<double>(terminated) / count;
  metrics["completions/mean_terminated_length"] = terminated > 0 ? terminated_sum / static_cast<double>(terminated) : 0.0;
}

void log_rollouts(const std::function<void(const std::string&, nlohmann::json)>& log, const config::Grpo& grpo,
                  const std::vector<const data::PromptRow*>& rows, const std::vector<rl::Rollout>& rollouts,
                  const rl::GroupAdvantages& advantages, const nlohmann::json& extra) {
  const auto shown = std::min<size_t>(static_cast<size_t>(std::max<int64_t>(grpo.num_completions_to_print, 0)),
                                      rollouts.size());
  for (size_t i = 0; i < shown; ++i) {
    const data::PromptRow& row = *rows.at(rollouts[i].prompt);
    nlohmann::json record{{"step_completion", i}, {"prompt", row.text}, {"prompt_ids", row.prompt_ids},
                          {"completion", rollouts[i].completion}, {"completion_ids", rollouts[i].completion_ids},
                          {"finish_reason", rollouts[i].finish_reason},
                          {"reward", std::isfinite(advantages.rewards[i]) ? nlohmann::json(advantages.rewards[i])
                                                                          : nlohmann::json()},
                          {"advantage", advantages.advantages[i]}};
    if (extra.is_object()) record.update(extra);
    log("completion", std::move(record));
  }
}

void null_non_finite(nlohmann::json& metrics) {
  for (auto& [key, value] : metrics.items()) {
    if (value.is_number_float() && !std::isfinite(value.get<double>())) value = nullptr;
  }
}

}  // namespace surogate::train
