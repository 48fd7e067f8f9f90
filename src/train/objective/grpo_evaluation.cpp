// GRPO's evaluation; see grpo_evaluation.h.
#include "train/objective/grpo_evaluation.h"

#include <algorithm>
#include <chrono>

#include "rl/completion_batch.h"
#include "train/objective/grpo_metrics.h"

namespace surogate::train {

double grpo_loss_at_ratio_one(const std::string& loss_type, const std::vector<double>& advantages,
                              const std::vector<int64_t>& masked_tokens, int64_t max_completion_length) {
  const auto count = static_cast<double>(std::max<size_t>(advantages.size(), 1));
  double weighted = 0.0, per_sequence = 0.0;
  int64_t tokens = 0;
  for (size_t i = 0; i < advantages.size(); ++i) {
    weighted += -advantages[i] * static_cast<double>(masked_tokens[i]);
    if (masked_tokens[i] > 0) per_sequence += -advantages[i];
    tokens += masked_tokens[i];
  }
  if (loss_type == "grpo") return per_sequence / count;
  if (loss_type == "dr_grpo") return weighted / (count * static_cast<double>(std::max<int64_t>(max_completion_length, 1)));
  return weighted / static_cast<double>(std::max<int64_t>(tokens, 1));  // bnpo, dapo: one batch
}

nlohmann::json evaluate_grpo(const GrpoEvaluation& setup, const std::vector<data::PromptRow>& prompts) {
  if (prompts.empty()) return nlohmann::json::object();
  const auto start = std::chrono::steady_clock::now();
  const config::Grpo& grpo = setup.config->grpo;
  std::vector<const data::PromptRow*> rows;
  std::vector<std::vector<int32_t>> prompt_ids;
  for (const data::PromptRow& prompt : prompts) {
    rows.push_back(&prompt);
    prompt_ids.push_back(prompt.prompt_ids);
  }
  for (int64_t slot = 0; slot < setup.model->slots(); ++slot) setup.model->clear(slot);
  rl::RolloutSeeds seeds(static_cast<uint64_t>(setup.config->eval.eval_seed));
  const std::vector<rl::Rollout> rollouts =
      rl::generate_groups(*setup.model, prompt_ids, *setup.rollout, seeds, setup.tokenizer);
  const rl::GroupAdvantages advantages = score_rollouts(rows, rollouts, *setup.rewards, grpo);

  nlohmann::json metrics = nlohmann::json::object();
  add_reward_metrics(advantages, setup.rewards->specs(), metrics);
  add_length_metrics(rollouts, metrics);
  // The ratio is 1: no token is clipped (TRL logs the clip ratios in evaluation too).
  for (const char* name : {"clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean"}) metrics[name] = 0.0;
  if (grpo.beta == 0.0) {
    std::vector<std::vector<int32_t>> completion_ids;
    for (const rl::Rollout& rollout : rollouts) completion_ids.push_back(rollout.completion_ids);
    const rl::CompletionBatch laid_out =
        rl::completion_batch(completion_ids, setup.rollout->eos_ids, setup.pad_id, grpo.mask_truncated_completions);
    const auto width = static_cast<size_t>(laid_out.tokens);
    std::vector<int64_t> masked(static_cast<size_t>(laid_out.sequences), 0);
    for (size_t b = 0; b < masked.size(); ++b) {
      for (size_t t = 0; t < width; ++t) masked[b] += laid_out.mask[b * width + t] > 0.0f ? 1 : 0;
    }
    metrics["loss"] = grpo_loss_at_ratio_one(grpo.loss_type, advantages.advantages, masked, grpo.max_completion_length);
  }
  nlohmann::json record = nlohmann::json::object();
  for (auto& [key, value] : metrics.items()) record["eval_" + key] = value;
  null_non_finite(record);
  record["eval_prompts"] = prompts.size();
  record["eval_runtime"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (grpo.log_completions && setup.log) log_rollouts(setup.log, grpo, rows, rollouts, advantages, {{"eval", true}});
  return record;
}

}  // namespace surogate::train
