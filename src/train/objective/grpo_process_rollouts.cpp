// Every process's GRPO rollouts on every process; see grpo_process_rollouts.h.
#include "train/objective/grpo_process_rollouts.h"

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace surogate::train {
namespace {

// The text as its bytes: a decoded completion may end inside a UTF-8 character, which a JSON
// string cannot carry.
nlohmann::json text_bytes(const std::string& text) { return std::vector<uint8_t>(text.begin(), text.end()); }

std::string text_of(const nlohmann::json& bytes) {
  const auto values = bytes.get<std::vector<uint8_t>>();
  return {values.begin(), values.end()};
}

nlohmann::json rollouts_json(const std::vector<rl::Rollout>& rollouts, const generate::GenerationStats& stats) {
  nlohmann::json list = nlohmann::json::array();
  for (const rl::Rollout& rollout : rollouts) {
    list.push_back({{"prompt", rollout.prompt}, {"ids", rollout.completion_ids}, {"text", text_bytes(rollout.completion)},
                    {"finish", rollout.finish_reason}});
  }
  return {{"rollouts", std::move(list)},
          {"stats", {stats.prompt_tokens, stats.generated_tokens, stats.prefill_seconds, stats.decode_seconds,
                     stats.decode_steps, stats.shared_prompt_tokens}}};
}

}  // namespace

std::vector<rl::Rollout> gather_process_rollouts(distributed::ProcessWorld& world, std::vector<rl::Rollout> mine,
                                                 generate::GenerationStats& stats) {
  if (world.alone()) return mine;
  const std::vector<std::string> pieces = world.gather(rollouts_json(mine, stats).dump());
  nlohmann::json all = nlohmann::json::array();
  for (const std::string& piece : pieces) all.push_back(nlohmann::json::parse(piece));
  // The leader's list on every process: the others parse the very bytes it does.
  const nlohmann::json gathered = nlohmann::json::parse(world.broadcast(all.dump()));
  std::vector<rl::Rollout> rollouts;
  stats = {};
  for (const nlohmann::json& process : gathered) {
    for (const nlohmann::json& rollout : process["rollouts"]) {
      rollouts.push_back({rollout["prompt"].get<size_t>(), rollout["ids"].get<std::vector<int32_t>>(),
                          text_of(rollout["text"]), rollout["finish"].get<std::string>()});
    }
    const nlohmann::json& counts = process["stats"];
    stats.prompt_tokens += counts[0].get<int64_t>();
    stats.generated_tokens += counts[1].get<int64_t>();
    stats.prefill_seconds += counts[2].get<double>();
    stats.decode_seconds += counts[3].get<double>();
    stats.decode_steps += counts[4].get<int64_t>();
    stats.shared_prompt_tokens += counts[5].get<int64_t>();
  }
  return rollouts;
}

}  // namespace surogate::train
