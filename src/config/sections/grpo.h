// Configuration section: the `grpo` mapping of `surogate grpo` (docs/grpo.md), each option under
// TRL's GRPOConfig name with TRL's default (trl 1.16). config/config_fields.cpp maps the options;
// config/grpo_rules.cpp checks their ranges; config/feature_support_grpo.cpp refuses what this
// version does not run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace surogate::config {

struct Grpo {
  int64_t num_generations = 8;          // completions per prompt (the group)
  int64_t max_prompt_length = 512;      // a longer prompt keeps its last tokens
  int64_t max_completion_length = 256;  // tokens per completion at most
  double temperature = 1.0;             // sampling; TRL scores the completions at it too
  double top_p = 1.0;                   // 1: off
  int64_t top_k = 0;                    // 0: off
  double beta = 0.0;                    // KL to the reference; 0: no reference kept
  double epsilon = 0.2;                 // clipping: 1 − epsilon
  std::optional<double> epsilon_high;   // clipping: 1 + epsilon_high (default epsilon)
  std::string loss_type = "dapo";       // grpo, dr_grpo, dapo, bnpo
  std::string scale_rewards = "group";  // group (true), batch, none (false)
  int64_t num_iterations = 1;           // policy updates per generation batch
  bool mask_truncated_completions = false;
  std::vector<std::string> reward_functions;  // "FILE.py:FUNCTION" or a built-in (rl/reward_functions.h)
  std::vector<double> reward_weights;         // one per function; empty: all 1
  bool log_completions = false;               // a few sampled completions per step to the log
  int64_t num_completions_to_print = 2;       // how many, with log_completions
  // Completions generated at once (the rollout model's KV cache slots); unset: the step's
  // completions, at most 64. A step with more completions runs them in waves.
  std::optional<int64_t> generation_batch_size;
  // Not an option: set by `surogate grpo` (the GRPO objective, train/objective/grpo_objective.h).
  bool enabled = false;
  std::string config_dir;  // not an option: the config file's folder (relative reward files start there)
};

}  // namespace surogate::config
