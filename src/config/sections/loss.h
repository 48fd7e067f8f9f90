// Configuration section: the `loss` mapping of preference tuning (`surogate dpo`, docs/preference-tuning.md).
// Fields are named exactly as their options in docs/configuration.md, with TRL's defaults where the
// original Surogate names none (config/config_fields.cpp maps each option to its field).
#pragma once

#include <string>

namespace surogate::config {

struct Loss {
  std::string type = "dpo";        // dpo, ipo, simpo, orpo, kto (ops/preference_loss.h)
  double dpo_beta = 0.1;           // β of dpo / ipo / simpo / kto
  double label_smoothing = 0.0;    // dpo / simpo: conservative DPO's ε, in [0, 0.5)
  bool length_norm = false;        // dpo: log-ratios per completion token (TRL's sigmoid_norm)
  bool reference_free = false;     // dpo / ipo: the reference's log-probs taken as 0
  double target_margin = 0.0;      // dpo: subtracted from β·(chosen − rejected) inside the sigmoid
  double simpo_gamma = 0.5;        // simpo: the target reward margin γ
  double beta = 0.1;               // orpo: the odds-ratio term's weight (TRL ORPOConfig.beta)
  double desirable_weight = 1.0;   // kto
  double undesirable_weight = 1.0; // kto
  // Each pair's prompt computed once, its two completions attending to it (data/prompt_sharing.h);
  // the same log-probabilities, fewer tokens through every projection.
  bool share_prompts = true;
  // Not an option: set by `surogate dpo` (the preference objective, train/objective/).
  bool preference = false;
};

}  // namespace surogate::config
