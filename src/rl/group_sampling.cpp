// Group rollouts and their seeds (see group_sampling.h).
#include "rl/group_sampling.h"

#include "core/error.h"

namespace surogate::rl {

uint64_t RolloutSeeds::mix(uint64_t value) {
  value += 0x9e3779b97f4a7c15ull;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ull;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebull;
  return value ^ (value >> 31);
}

nlohmann::json RolloutSeeds::to_json() const { return {{"seed", seed_}, {"drawn", drawn_}}; }

RolloutSeeds RolloutSeeds::from_json(const nlohmann::json& state, const std::string& source) {
  const bool valid = state.is_object() && state.contains("seed") && state.contains("drawn") &&
                     state["seed"].is_number_unsigned() && state["drawn"].is_number_unsigned();
  if (!valid) fail_user("{}: the rollout sampling state is not {{\"seed\": N, \"drawn\": N}} (got {})", source, state.dump());
  RolloutSeeds seeds(state["seed"].get<uint64_t>());
  seeds.drawn_ = state["drawn"].get<uint64_t>();
  return seeds;
}

std::vector<Rollout> generate_groups(generate::NextTokenModel& model, const std::vector<std::vector<int32_t>>& prompts,
                                     const RolloutOptions& options, RolloutSeeds& seeds,
                                     const tokenizer::Tokenizer* tokenizer, generate::GenerationStats* stats) {
  if (options.num_generations < 1) fail_user("num_generations must be at least 1 (got {})", options.num_generations);
  std::vector<generate::GenerationRequest> requests;
  for (const std::vector<int32_t>& prompt : prompts) {
    for (int64_t k = 0; k < options.num_generations; ++k) {
      generate::GenerationRequest request;
      request.prompt = prompt;
      request.sampling = options.sampling;
      request.seed = seeds.next();
      request.max_new_tokens = options.max_completion_length;
      request.eos_ids = options.eos_ids;
      requests.push_back(std::move(request));
    }
  }
  std::vector<generate::GenerationResult> results = generate::generate(model, requests, tokenizer, {}, stats);
  std::vector<Rollout> rollouts;
  for (size_t i = 0; i < results.size(); ++i) {
    rollouts.push_back({i / static_cast<size_t>(options.num_generations), std::move(results[i].completion_ids),
                        std::move(results[i].completion), std::move(results[i].finish_reason)});
  }
  return rollouts;
}

}  // namespace surogate::rl
