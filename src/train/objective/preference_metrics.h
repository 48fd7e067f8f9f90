// TRL's preference metrics summed over pairs and turned into its names: rewards/chosen,
// rewards/rejected, rewards/accuracies, rewards/margins (means over pairs), logps/chosen,
// logps/rejected (means over pairs), logits/chosen, logits/rejected (mean logit over the vocabulary,
// averaged over completion tokens), and, on evaluation, loss (the mean pair loss).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "ops/preference_loss.h"
#include "train/objective/kto_metrics.h"

namespace surogate::train {

class PreferenceMetrics {
public:
  explicit PreferenceMetrics(ops::PreferenceLossOptions options) : options_(options), kto_(options) {}
  // One micro-batch of `batch` rows: [2B] logps, logit sums, reference logps and lengths; [B] labels
  // (KTO's, whose metrics are KtoMetrics').
  void add(int64_t batch, const float* logps, const float* logit_sums, const float* reference, const float* lengths,
           const float* labels);
  // {prefix + name: value}; with_loss adds prefix + "loss". Clears the sums.
  nlohmann::json take(const std::string& prefix, bool with_loss);
  int64_t pairs() const { return options_.type == ops::PreferenceLossType::Kto ? kto_.rows() : pairs_; }

private:
  ops::PreferenceLossOptions options_;
  int64_t pairs_ = 0;
  double loss_ = 0, chosen_rewards_ = 0, rejected_rewards_ = 0, accuracies_ = 0, margins_ = 0;
  double chosen_logps_ = 0, rejected_logps_ = 0, chosen_logits_ = 0, rejected_logits_ = 0;
  double chosen_tokens_ = 0, rejected_tokens_ = 0;
  KtoMetrics kto_;
};

}  // namespace surogate::train
