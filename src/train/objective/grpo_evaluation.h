// `surogate grpo`'s evaluation (TrainingObjective::evaluate, at step 0, every eval_steps and at
// the end): as TRL's GRPOTrainer evaluates, num_generations completions of every validation
// prompt are sampled with the training options (temperature, top_p, top_k: TRL samples in
// evaluation too) from the current weights, scored, and their group advantages computed; the
// record holds TRL's metrics with its eval_ prefix — eval_reward, eval_reward_std,
// eval_rewards/<f>/mean|std, eval_frac_reward_zero_std, eval_completions/*, eval_clip_ratio/*,
// eval_loss — over the whole validation set as one batch (TRL's numbers with
// per_device_eval_batch_size = every validation completion), and eval_prompts, eval_runtime.
//
// eval_loss: TRL's loss on those completions. With the policy that sampled them, the ratio is 1,
// so the loss is the loss_type's aggregate of −A over the completion tokens (no forward needed)
// and nothing is clipped; with beta > 0 TRL's eval_loss also holds the KL to the reference,
// which this does not compute: eval_loss is left out then.
//
// Every evaluation samples with the same seeds (eval_seed's RolloutSeeds): the steps' rewards
// differ by the weights only, and the training rollouts' seeds are not drawn from.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "data/prompt_rows.h"
#include "generate/next_token_model.h"
#include "rl/group_sampling.h"
#include "rl/reward_functions.h"
#include "tokenizer/tokenizer.h"

namespace surogate::train {

struct GrpoEvaluation {
  generate::NextTokenModel* model = nullptr;  // the rollouts' model (its slots are cleared first)
  const tokenizer::Tokenizer* tokenizer = nullptr;
  rl::RewardFunctions* rewards = nullptr;
  const rl::RolloutOptions* rollout = nullptr;  // the training rollouts' options
  const Config* config = nullptr;
  int32_t pad_id = 0;
  // With log_completions, the first num_completions_to_print completions as "completion" records
  // with "eval": true.
  std::function<void(const std::string& type, nlohmann::json record)> log;
};

// The eval_* record of `prompts`; an empty object when there is none.
nlohmann::json evaluate_grpo(const GrpoEvaluation& setup, const std::vector<data::PromptRow>& prompts);

// TRL's loss of completions sampled by the policy being scored (ratio 1, beta 0): with n_i
// completion i's masked tokens and A_i its advantage,
//   grpo     mean_i(−A_i · [n_i > 0])            bnpo, dapo   Σ_i −A_i·n_i / max(Σ_i n_i, 1)
//   dr_grpo  Σ_i −A_i·n_i / (B · max_completion_length)
double grpo_loss_at_ratio_one(const std::string& loss_type, const std::vector<double>& advantages,
                              const std::vector<int64_t>& masked_tokens, int64_t max_completion_length);

}  // namespace surogate::train
