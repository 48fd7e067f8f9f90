// What a GRPO step and a GRPO evaluation share (grpo_objective.h, grpo_evaluation.h): scoring a
// batch of rollouts with the reward functions into group advantages, the metrics TRL logs of it —
// reward, reward_std, frac_reward_zero_std, rewards/<f>/mean|std and completions/* — and the
// sampled completions the log shows.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "data/prompt_rows.h"
#include "rl/advantages.h"
#include "rl/group_sampling.h"
#include "rl/reward_functions.h"

namespace surogate::train {

// The rewards of `rollouts` (rollout.prompt indexes `rows`) and their group advantages, with the
// run's reward_weights (none: all 1), num_generations and scale_rewards. UserError as the reward
// functions raise it (naming the function and the row).
rl::GroupAdvantages score_rollouts(const std::vector<const data::PromptRow*>& rows,
                                   const std::vector<rl::Rollout>& rollouts, rl::RewardFunctions& rewards,
                                   const config::Grpo& grpo);

// reward, reward_std, frac_reward_zero_std, rewards/<name>/mean and /std into `metrics`.
void add_reward_metrics(const rl::GroupAdvantages& advantages, const std::vector<rl::RewardFunctionSpec>& specs,
                        nlohmann::json& metrics);

// TRL's completions/* metrics: lengths of all completions (mean, min, max), clipped_ratio (the
// share that ended without an EOS) and the mean length of those that ended with one.
void add_length_metrics(const std::vector<rl::Rollout>& rollouts, nlohmann::json& metrics);

// The first num_completions_to_print rollouts as "completion" records of the run's log: step_completion
// (the index), prompt (rendered), prompt_ids, completion, completion_ids, finish_reason, reward
// (null when unscorable), advantage, and the fields of `extra`.
void log_rollouts(const std::function<void(const std::string&, nlohmann::json)>& log, const config::Grpo& grpo,
                  const std::vector<const data::PromptRow*>& rows, const std::vector<rl::Rollout>& rollouts,
                  const rl::GroupAdvantages& advantages, const nlohmann::json& extra);

// JSON has no NaN: a statistic of fewer than two values is null, as TRL's logs print nan.
void null_non_finite(nlohmann::json& metrics);

}  // namespace surogate::train
