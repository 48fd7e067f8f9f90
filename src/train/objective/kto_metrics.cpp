// KTOTrainer's metrics; see kto_metrics.h.
#include "train/objective/kto_metrics.h"

#include <vector>

namespace surogate::train {
namespace {

// Sums over one micro-batch's desirable or undesirable rows.
struct KtoSide {
  int64_t rows = 0;
  double rewards = 0.0, logps = 0.0, logits = 0.0, tokens = 0.0;
};

}  // namespace

void KtoMetrics::add(int64_t batch, const float* logps, const float* logit_sums, const float* reference,
                     const float* lengths, const float* labels) {
  const size_t sequences = static_cast<size_t>(2 * batch);
  const std::vector<double> policy(logps, logps + sequences), ref(reference, reference + sequences);
  const std::vector<double> counts(lengths, lengths + sequences), flags(labels, labels + batch);
  const double unit_scales[2] = {1.0, 0.0};
  std::vector<ops::PreferencePairValues> values;
  ops::preference_loss_forward(options_, batch, policy.data(), ref.data(), counts.data(), flags.data(), unit_scales,
                               &values);
  const double kl = ops::kto_reference_point(batch, policy.data(), ref.data(), counts.data());
  KtoSide desirable, undesirable;
  for (int64_t i = 0; i < batch; ++i) {
    const size_t row = static_cast<size_t>(i);
    if (counts[row] <= 0.0) continue;  // a padding row
    const bool wanted = flags[row] > 0.5;
    const double reward = values[row].chosen_reward;
    KtoSide& side = wanted ? desirable : undesirable;
    ++side.rows;
    side.rewards += reward;
    side.logps += policy[row];
    side.logits += logit_sums[row];
    side.tokens += counts[row];
    ++rows_;
    loss_ += values[row].loss;
    accurate_ += (wanted ? reward > options_.beta * kl : reward < options_.beta * kl) ? 1.0 : 0.0;
  }
  if (desirable.rows + undesirable.rows == 0) return;
  kl_.add(kl);
  auto add_side = [](const KtoSide& side, Mean& rewards, Mean& logps_mean, Mean& logits) {
    if (side.rows == 0) return;
    rewards.add(side.rewards / static_cast<double>(side.rows));
    logps_mean.add(side.logps / static_cast<double>(side.rows));
    if (side.tokens > 0.0) logits.add(side.logits / side.tokens);
  };
  add_side(desirable, chosen_rewards_, chosen_logps_, chosen_logits_);
  add_side(undesirable, rejected_rewards_, rejected_logps_, rejected_logits_);
  if (desirable.rows > 0 && undesirable.rows > 0) {
    margins_.add(desirable.rewards / static_cast<double>(desirable.rows) -
                 undesirable.rewards / static_cast<double>(undesirable.rows));
  }
}

nlohmann::json KtoMetrics::take(const std::string& prefix, bool with_loss) {
  nlohmann::json record = nlohmann::json::object();
  const std::pair<const char*, const Mean*> means[] = {
      {"kl", &kl_},
      {"rewards/chosen", &chosen_rewards_},
      {"rewards/rejected", &rejected_rewards_},
      {"rewards/margins", &margins_},
      {"logps/chosen", &chosen_logps_},
      {"logps/rejected", &rejected_logps_},
      {"logits/chosen", &chosen_logits_},
      {"logits/rejected", &rejected_logits_}};
  for (const auto& [name, mean] : means) {
    if (mean->count > 0) record[prefix + name] = mean->sum / static_cast<double>(mean->count);
  }
  const double rows = rows_ > 0 ? static_cast<double>(rows_) : 1.0;
  record[prefix + "rewards/accuracies"] = accurate_ / rows;
  if (with_loss) record[prefix + "loss"] = loss_ / rows;
  *this = KtoMetrics(options_);
  return record;
}

}  // namespace surogate::train
