// Runs GRPO's pieces on JSON from stdin and prints the results as JSON, for
// tests/python/test_grpo_trl.py, which compares them with TRL's own code:
//   {"op": "loss", "sequences": B, "tokens": T, "vocab": V, "logits": [B·T·V], "labels": [B·T],
//    "temperature": t, "old_logp": [B·T] | null, "ref_logp": [B·T] | null, "advantages": [B],
//    "mask": [B·T], "loss_type": "grpo", "epsilon": e, "epsilon_high": e, "delta": d | null,
//    "beta": b, "max_completion_length": n, "accumulation_steps": a, "token_normalizer": n}
//     -> {"logp": [...], "loss": x, "metrics": {...}, "d_logits": [...]}   (fp32, d_loss = 1)
//   {"op": "advantages", "rewards": [[F][N]] (null = None), "weights": [F], "num_generations": G,
//    "scale_rewards": "group"}
//     -> {"advantages": [...], "rewards": [...], "frac_reward_zero_std": x, "reward": x, "reward_std": x}
#include <cmath>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ops/grpo_logprobs.h"
#include "ops/grpo_loss.h"
#include "rl/advantages.h"

namespace {

using nlohmann::json;
using namespace surogate;

std::vector<float> floats(const json& value) {
  std::vector<float> result;
  for (const json& item : value) result.push_back(item.is_null() ? std::nanf("") : item.get<float>());
  return result;
}

ops::GrpoLossType loss_type(const std::string& name) {
  if (name == "grpo") return ops::GrpoLossType::Grpo;
  if (name == "bnpo") return ops::GrpoLossType::Bnpo;
  if (name == "dr_grpo") return ops::GrpoLossType::DrGrpo;
  return ops::GrpoLossType::Dapo;
}

json run_loss(const json& in) {
  const int64_t sequences = in["sequences"], tokens = in["tokens"], vocab = in["vocab"];
  const int64_t rows = sequences * tokens;
  const std::vector<float> logits = floats(in["logits"]), advantages = floats(in["advantages"]), mask = floats(in["mask"]);
  const std::vector<int32_t> labels = in["labels"].get<std::vector<int32_t>>();
  const ops::TokenLogprobShape shape{rows, vocab, in["temperature"].get<double>()};
  std::vector<float> logp(static_cast<size_t>(rows)), lse(static_cast<size_t>(rows));
  ops::token_logprobs_forward(shape, logits.data(), labels.data(), logp.data(), lse.data());
  std::vector<float> old_logp, ref_logp;
  if (!in["old_logp"].is_null()) old_logp = floats(in["old_logp"]);
  if (!in["ref_logp"].is_null()) ref_logp = floats(in["ref_logp"]);
  ops::GrpoLossOptions options;
  options.loss_type = loss_type(in["loss_type"]);
  options.epsilon_low = in["epsilon"];
  options.epsilon_high = in["epsilon_high"];
  if (!in["delta"].is_null()) options.delta = in["delta"].get<double>();
  options.beta = in["beta"];
  options.max_completion_length = in["max_completion_length"];
  options.accumulation_steps = in["accumulation_steps"];
  options.token_normalizer = in["token_normalizer"];
  const ops::GrpoLossInputs<float> inputs{logp.data(), old_logp.empty() ? nullptr : old_logp.data(),
                                          ref_logp.empty() ? nullptr : ref_logp.data(), advantages.data(), mask.data()};
  const ops::GrpoLossShape loss_shape{sequences, tokens};
  const ops::GrpoLossResult result = ops::grpo_loss_forward(loss_shape, options, inputs);
  std::vector<float> d_logp(static_cast<size_t>(rows)), d_logits(logits.size());
  ops::grpo_loss_backward(loss_shape, options, inputs, 1.0f, d_logp.data());
  ops::token_logprobs_backward(shape, logits.data(), labels.data(), lse.data(), d_logp.data(), d_logits.data());
  const ops::GrpoLossMetrics& m = result.metrics;
  return {{"logp", logp},
          {"loss", result.loss},
          {"d_logits", d_logits},
          {"metrics",
           {{"kl", m.kl},
            {"clip_ratio/low_mean", m.clip_low_mean},
            {"clip_ratio/high_mean", m.clip_high_mean},
            {"clip_ratio/region_mean", m.clip_region_mean},
            {"clip_ratio/low_min", m.clip_low_min},
            {"clip_ratio/high_max", m.clip_high_max}}}};
}

json run_advantages(const json& in) {
  std::vector<std::vector<double>> rewards;
  for (const json& column : in["rewards"]) {
    rewards.emplace_back();
    for (const json& value : column) {
      rewards.back().push_back(value.is_null() ? std::numeric_limits<double>::quiet_NaN() : value.get<double>());
    }
  }
  const rl::GroupAdvantages result = rl::group_advantages(rewards, in["weights"].get<std::vector<double>>(),
                                                          in["num_generations"], rl::parse_scale_rewards(in["scale_rewards"]));
  return {{"advantages", result.advantages},
          {"rewards", result.rewards},
          {"frac_reward_zero_std", result.frac_reward_zero_std},
          {"reward", result.reward.mean},
          {"reward_std", result.reward.std}};
}

}  // namespace

int main() {
  const json in = json::parse(std::cin);
  std::cout.precision(17);
  std::cout << (in["op"] == "loss" ? run_loss(in) : run_advantages(in)).dump() << "\n";
  return 0;
}
