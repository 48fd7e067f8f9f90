// The `grpo` mapping's ranges; see grpo_rules.h.
#include "config/grpo_rules.h"

#include <cmath>
#include <string>

#include <fmt/format.h>

#include "core/error.h"

namespace surogate {
namespace {

void require_grpo(bool ok, const Config& config, const std::string& option, const std::string& message) {
  const std::string key = "grpo." + option;
  if (!ok) fail_user("{}: option '{}' {}", config.sources.of(key), key, message);
}

}  // namespace

void validate_grpo(const Config& config) {
  const config::Grpo& g = config.grpo;
  require_grpo(g.num_generations >= 2, config, "num_generations",
               fmt::format("must be at least 2: advantages compare completions of one prompt (got {})", g.num_generations));
  require_grpo(g.max_prompt_length >= 1, config, "max_prompt_length", "must be at least 1");
  require_grpo(g.max_completion_length >= 1, config, "max_completion_length", "must be at least 1");
  require_grpo(std::isfinite(g.temperature) && g.temperature > 0.0, config, "temperature",
               fmt::format("must be positive: GRPO samples its completions (got {})", g.temperature));
  require_grpo(g.top_p > 0.0 && g.top_p <= 1.0, config, "top_p", fmt::format("must be in (0, 1] (got {})", g.top_p));
  require_grpo(g.top_k >= 0, config, "top_k", "must be 0 (off) or positive");
  require_grpo(g.beta >= 0.0, config, "beta", "must be 0 (no reference) or positive");
  require_grpo(g.epsilon >= 0.0 && g.epsilon < 1.0, config, "epsilon", "must be in [0, 1)");
  require_grpo(!g.epsilon_high || *g.epsilon_high >= 0.0, config, "epsilon_high", "must be 0 or positive");
  const bool known = g.loss_type == "grpo" || g.loss_type == "dr_grpo" || g.loss_type == "dapo" || g.loss_type == "bnpo";
  require_grpo(known, config, "loss_type", fmt::format("must be grpo, dr_grpo, dapo or bnpo (got '{}')", g.loss_type));
  const bool scale = g.scale_rewards == "group" || g.scale_rewards == "batch" || g.scale_rewards == "none" ||
                     g.scale_rewards == "true" || g.scale_rewards == "false";
  require_grpo(scale, config, "scale_rewards",
               fmt::format("must be group, batch or none (true / false) (got '{}')", g.scale_rewards));
  require_grpo(g.num_iterations >= 1, config, "num_iterations", "must be at least 1");
  require_grpo(g.reward_weights.empty() || g.reward_weights.size() == g.reward_functions.size(), config,
               "reward_weights",
               fmt::format("has {} weights for {} reward_functions: give one per function (or none: all 1)",
                           g.reward_weights.size(), g.reward_functions.size()));
  require_grpo(g.num_completions_to_print >= 0, config, "num_completions_to_print", "must be 0 or positive");
  require_grpo(!g.generation_batch_size || *g.generation_batch_size >= 1, config, "generation_batch_size",
               fmt::format("must be at least 1: the completions generated at once (got {})",
                           g.generation_batch_size.value_or(0)));
}

}  // namespace surogate
