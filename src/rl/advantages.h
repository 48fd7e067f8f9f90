// Group-relative advantages as TRL's GRPOTrainer computes them (trl 1.16,
// multi_objective_aggregation "sum_then_normalize", the default), from the rewards of
// completions laid out group by group: completions [g·G, (g+1)·G) answer prompt g (G =
// num_generations).
//
//   reward_i    = Σ_f weight_f · reward_{i,f}, NaN rewards skipped (nansum); NaN when every
//                 function returned NaN (None in Python: "not applicable" — unscorable)
//   mean_i      = nanmean of reward over i's group
//   std_i       = scale_rewards group / none: the group's nanstd (Bessel-corrected); batch: the whole
//                 batch's nanstd; 0 when the group (batch) has one completion
//   advantage_i = reward_i − mean_i, divided by (std_i + 1e-4) unless scale_rewards is none;
//                 NaN (an unscorable completion) becomes 0
//   frac_reward_zero_std = the fraction of completions whose std_i is 0 (torch.isclose: |std| ≤ 1e-8)
// The logged reward / reward_std / rewards/<f> mean and std come with it (TRL's names). Sums run in
// double; TRL's float32 differs from it in the last bits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace surogate::rl {

// TRL's scale_rewards: "group" (true), "batch", "none" (false).
enum class ScaleRewards { Group, Batch, None };

// "group" / "batch" / "none" / "true" / "false"; UserError naming `key` otherwise.
ScaleRewards parse_scale_rewards(const std::string& value, const std::string& key = "scale_rewards");

struct RewardStatistics {
  double mean = 0.0, std = 0.0;  // over non-NaN values (std Bessel-corrected; NaN with < 2 values)
};

struct GroupAdvantages {
  std::vector<double> rewards;     // the weighted sum per completion (NaN: unscorable)
  std::vector<double> advantages;  // per completion
  double frac_reward_zero_std = 0.0;
  RewardStatistics reward;                       // TRL's reward / reward_std
  std::vector<RewardStatistics> per_function;    // TRL's rewards/<f>/mean and /std
};

// `rewards_per_function[f][i]`: function f's reward of completion i (NaN: not applicable).
// UserError when the counts disagree (a weight per function, equal lengths, whole groups).
GroupAdvantages group_advantages(const std::vector<std::vector<double>>& rewards_per_function,
                                 const std::vector<double>& reward_weights, int64_t num_generations,
                                 ScaleRewards scale);

// nanmean / Bessel-corrected nanstd of `values` (TRL's trl.trainer.utils.nanstd).
RewardStatistics nan_statistics(const std::vector<double>& values);

}  // namespace surogate::rl
