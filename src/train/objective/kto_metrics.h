// KTOTrainer's metrics (TRL 1.16) over the micro-batches of a step or of an evaluation: per
// micro-batch, the mean over its desirable rows (rewards/chosen, logps/chosen, logits/chosen: the
// mean logit over the vocabulary averaged over their completion tokens), the same over its
// undesirable rows (…/rejected), rewards/margins (their difference, when a micro-batch has both) and
// kl (the batch's reference point, ops::kto_reference_point); each name is the mean of those
// per-micro-batch values and is left out when no micro-batch had it, as TRL logs them. With the loss,
// `loss` is the mean row loss. `rewards/accuracies` is not TRL's (KTOTrainer has none): the fraction
// of rows whose reward lies on their label's side of the reference point (a desirable row's
// β·(logp − logp₀) above β·kl, an undesirable row's below), what KTO's loss pushes towards.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "ops/preference_loss.h"

namespace surogate::train {

class KtoMetrics {
public:
  explicit KtoMetrics(ops::PreferenceLossOptions options) : options_(options) {}
  // One micro-batch of `batch` rows: [2B] logps, logit sums, reference logps and lengths (the rows,
  // then their KL sequences), [B] labels.
  void add(int64_t batch, const float* logps, const float* logit_sums, const float* reference, const float* lengths,
           const float* labels);
  // {prefix + name: value}; with_loss adds prefix + "loss". Clears the sums.
  nlohmann::json take(const std::string& prefix, bool with_loss);
  int64_t rows() const { return rows_; }

private:
  struct Mean {
    double sum = 0.0;
    int64_t count = 0;
    void add(double value) {
      sum += value;
      ++count;
    }
  };
  ops::PreferenceLossOptions options_;
  int64_t rows_ = 0;
  double loss_ = 0.0, accurate_ = 0.0;
  Mean kl_, chosen_rewards_, rejected_rewards_, margins_, chosen_logps_, rejected_logps_, chosen_logits_,
      rejected_logits_;
};

}  // namespace surogate::train
