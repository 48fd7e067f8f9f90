// TRL's preference metrics; see preference_metrics.h.
#include "train/objective/preference_metrics.h"

#include <vector>

namespace surogate::train {

void PreferenceMetrics::add(int64_t batch, const float* logps, const float* logit_sums, const float* reference,
                            const float* lengths, const float* kto_labels) {
  if (options_.type == ops::PreferenceLossType::Kto) {
    kto_.add(batch, logps, logit_sums, reference, lengths, kto_labels);
    return;
  }
  const size_t sequences = static_cast<size_t>(2 * batch);
  std::vector<double> policy(logps, logps + sequences), ref(reference, reference + sequences);
  std::vector<double> counts(lengths, lengths + sequences), labels(static_cast<size_t>(batch), 0.0);
  const double unit_scales[2] = {1.0, 0.0};
  std::vector<ops::PreferencePairValues> values;
  ops::preference_loss_forward(options_, batch, policy.data(), ref.data(), counts.data(), labels.data(), unit_scales,
                               &values);
  for (int64_t i = 0; i < batch; ++i) {
    const size_t c = static_cast<size_t>(i), r = static_cast<size_t>(batch + i);
    if (counts[c] <= 0.0) continue;  // a padding row
    const ops::PreferencePairValues& pair = values[c];
    ++pairs_;
    loss_ += pair.loss;
    chosen_rewards_ += pair.chosen_reward;
    rejected_rewards_ += pair.rejected_reward;
    accuracies_ += pair.chosen_reward > pair.rejected_reward ? 1.0 : 0.0;
    margins_ += pair.chosen_reward - pair.rejected_reward;
    chosen_logps_ += policy[c];
    rejected_logps_ += policy[r];
    chosen_logits_ += logit_sums[c];
    rejected_logits_ += logit_sums[r];
    chosen_tokens_ += counts[c];
    rejected_tokens_ += counts[r];
  }
}

nlohmann::json PreferenceMetrics::take(const std::string& prefix, bool with_loss) {
  if (options_.type == ops::PreferenceLossType::Kto) return kto_.take(prefix, with_loss);
  const double pairs = pairs_ > 0 ? static_cast<double>(pairs_) : 1.0;
  auto per_token = [](double sum, double tokens) { return tokens > 0.0 ? sum / tokens : 0.0; };
  nlohmann::json record{{prefix + "rewards/chosen", chosen_rewards_ / pairs},
                        {prefix + "rewards/rejected", rejected_rewards_ / pairs},
                        {prefix + "rewards/accuracies", accuracies_ / pairs},
                        {prefix + "rewards/margins", margins_ / pairs},
                        {prefix + "logps/chosen", chosen_logps_ / pairs},
                        {prefix + "logps/rejected", rejected_logps_ / pairs},
                        {prefix + "logits/chosen", per_token(chosen_logits_, chosen_tokens_)},
                        {prefix + "logits/rejected", per_token(rejected_logits_, rejected_tokens_)}};
  if (with_loss) {
    double loss = loss_ / pairs;
    // ORPO's NLL term: the token mean over the chosen completions (ops/preference_loss.h, scales[1]).
    if (options_.type == ops::PreferenceLossType::Orpo) loss -= per_token(chosen_logps_, chosen_tokens_);
    record[prefix + "loss"] = loss;
  }
  *this = PreferenceMetrics(options_);
  return record;
}

}  // namespace surogate::train
