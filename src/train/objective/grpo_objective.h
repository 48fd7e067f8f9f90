// `surogate grpo`'s training objective (training_objective.h): each optimizer step takes
// per_device_train_batch_size × gradient_accumulation_steps / num_generations prompts from the
// run's loader (the prompt token cache, grpo_prompts.h), samples num_generations completions of
// each with the weights being trained (generate/kv_cache_model.h's open_kv_cache_on_weights: no
// copy, the LoRA adapter live; the KV caches cleared before every step's rollouts), scores them
// with the reward functions (rl/reward_functions.h), computes group advantages
// (rl/advantages.h) and lays the completions out as the window's micro-batches, weighed so the LM
// head's weighted cross-entropy has the gradient of TRL's loss (grpo_window.h). The step record
// gets TRL's metric names (reward, reward_std, rewards/<f>/mean|std, completions/*, clip_ratio/*,
// frac_reward_zero_std) and the generation / reward / training time split; with log_completions,
// the first num_completions_to_print completions go to the log as "completions" records.
//
// With beta ≠ 0 or num_iterations > 1 the step trains through grpo_iterations.h (the importance
// ratio to the generation's log-probabilities, the KL term to the reference — the base without
// the adapter under LoRA, a frozen copy of the starting weights under full fine-tuning — each
// generation trained num_iterations times).
//
// The sampling seeds (rl/group_sampling.h's RolloutSeeds) are the objective's checkpoint state, so
// a resumed run samples exactly the completions an uninterrupted one would (and, with iterations,
// the buffered generation: grpo_iterations.h).
//
// On data-parallel ranks (ZeRO-1/2) each rank samples its share of the step's prompts with its own
// rollout model over its own replica's weights (grpo_rank_models.h); the rewards, advantages, loss
// normalisers and records are the whole step's, as TRL's with several processes. Over several
// processes (one update per generation, beta 0) every process gets every process's completions
// (grpo_process_rollouts.h), computes the same window and keeps its own ranks' micro-batches.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "config/config.h"
#include "generate/kv_cache_plans.h"
#include "generate/next_token_model.h"
#include "rl/group_sampling.h"
#include "rl/reward_functions.h"
#include "tokenizer/tokenizer.h"
#include "train/objective/grpo_iterations.h"
#include "train/objective/grpo_prompts.h"
#include "train/objective/grpo_rank_models.h"
#include "train/objective/training_objective.h"

namespace surogate::train {

class GrpoObjective final : public TrainingObjective {
public:
  explicit GrpoObjective(const Config& config);
  ~GrpoObjective() override;

  // The LM head's cross-entropy stays the loss (weighted per token: the plan has loss_weights),
  // its hidden input divided by the temperature (grpo_graph.h); with beta ≠ 0 or num_iterations
  // > 1, the per-token log-probabilities weighed by grpo_iterations.h's coefficients
  // (grpo_token_graph.h).
  ObjectiveGraph rewrite_loss(graph::Graph forward, graph::TensorId loss, const graph::OpRegistry& registry,
                              int64_t batch, int64_t sequence) const override;
  void prepare(const ObjectiveContext& context) override;
  void begin_window(std::span<const data::PackedBatch>, double loss_scale) override;
  std::vector<runtime::InputBinding> bind(size_t micro) override;
  void observe(TrainingDevice& device) override;
  nlohmann::json step_metrics() override;
  // The validation prompts' rollouts and rewards under TRL's eval_* names (grpo_evaluation.h).
  nlohmann::json evaluate() override;
  bool makes_window() const override { return true; }
  void make_window(data::DataLoader& loader, std::span<data::PackedBatch> batches) override;
  nlohmann::json checkpoint_state() const override;

private:
  // The iterations' settings and state (grpo_iterations.h), and with beta the reference model:
  // the KV-cache model on the trainer's weights without the adapter (LoRA), or on a copy of the
  // starting weights loaded from the model folder (full fine-tuning).
  void prepare_iterations(const generate::ModelOptions& options, const generate::WeightForms& forms);

  const Config& config_;
  ObjectiveContext context_;
  PromptSet prompts_;
  std::unique_ptr<rl::RewardFunctions> rewards_;
  std::unique_ptr<GrpoRankModels> models_;  // one rollout model per rank
  std::optional<tokenizer::Tokenizer> tokenizer_;
  rl::RolloutOptions rollout_;
  rl::RolloutSeeds seeds_;
  // beta ≠ 0 or num_iterations > 1 (grpo_iterations.h), else null; the reference model with beta.
  std::unique_ptr<GrpoIterations> iterations_;
  std::unique_ptr<GrpoRankModels> references_;
  nlohmann::json metrics_;  // the last window's, for step_metrics
  std::chrono::steady_clock::time_point window_made_;
};

}  // namespace surogate::train
