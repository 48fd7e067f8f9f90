// Preference losses over per-sequence completion log-probabilities (ops/preference_logps.h), as
// TRL computes them (the test tests/python/test_preference_tuning.py compares each with TRL's own
// code). The CPU reference, in double; the CUDA kernel (cuda/kernels/preference_loss.cu) runs the
// same formulas on one thread block (S is the micro-batch's sequence count: tiny).
//
// Layout, P pairs: logps / reference_logps / lengths are [2P], the chosen sequences first, then the
// rejected ones (TRL's concatenated batch). KTO: P rows, then their P mismatched "KL" completions;
// labels [P] (1 desirable, 0 undesirable). lengths are completion token counts.
// scales[0] multiplies Σ over pairs (rows) of the per-pair loss: 1 / pairs of the optimizer step's
// window, so accumulated micro-batches give the window's mean. scales[1] (ORPO only) multiplies
// −Σ chosen log-probs: 1 / chosen completion tokens of the window (TRL's token-mean NLL term).
// Per pair, with c, r the policy's chosen / rejected log-probs, c₀, r₀ the reference's, l_c, l_r the
// lengths, β = beta, ε = label_smoothing, σ the logistic function:
//   dpo    z = β·(s_c − s_r) − target_margin, s = c − c₀ (s = c when reference_free; divided by the
//          length when length_norm: TRL's "sigmoid_norm"); loss = −(1−ε)·ln σ(z) − ε·ln σ(−z)
//          (TRL's "sigmoid" when ε = 0 and target_margin = 0)
//   ipo    (s_c/l_c − s_r/l_r − 1/(2β))²  (TRL's "ipo": always per token)
//   simpo  z = β·(c/l_c − r/l_r) − simpo_gamma; loss as dpo's (TRL's CPOTrainer loss_type "simpo",
//          cpo_alpha 0)
//   orpo   −orpo_beta · ln σ(log_odds), log_odds = (a_c − a_r) − (ln(1 − e^{a_c}) − ln(1 − e^{a_r})),
//          a = logp / length; plus the NLL term −scales[1]·Σ c (TRL's ORPOTrainer)
//   kto    w_y · (1 − σ(β·(c − c₀ − kl))) for a desirable row, w_y · (1 − σ(β·(kl − (c − c₀)))) for an
//          undesirable one, kl = max(0, mean over the rows' KL sequences of (logp − logp₀)), not
//          differentiated (kto_reference_point)
//          (TRL's KTOTrainer, loss_type "kto")
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace surogate::ops {

enum class PreferenceLossType { Dpo, Ipo, Simpo, Orpo, Kto };

struct PreferenceLossOptions {
  PreferenceLossType type = PreferenceLossType::Dpo;
  double beta = 0.1;
  double label_smoothing = 0.0;
  bool length_norm = false;
  bool reference_free = false;
  double target_margin = 0.0;
  double simpo_gamma = 0.5;
  double orpo_beta = 0.1;
  double desirable_weight = 1.0;
  double undesirable_weight = 1.0;
};

// "dpo", "ipo", "simpo", "orpo", "kto"; nullopt-like false for anything else.
bool parse_preference_loss_type(const std::string& name, PreferenceLossType& type);
const char* preference_loss_type_name(PreferenceLossType type);
// Whether the loss reads reference log-probabilities (dpo unless reference_free, ipo, kto).
bool preference_loss_uses_reference(const PreferenceLossOptions& options);

// KTO's reference point: the mean over the rows that hold one (lengths[i] > 0; not the padding rows
// of an epoch's last batch) of their KL sequences' log-ratio logps[P + i] − reference_logps[P + i],
// at least 0 (TRL's `kl`, not differentiated).
double kto_reference_point(int64_t rows, const double* logps, const double* reference_logps, const double* lengths);

// The per-pair values the metrics are made of (TRL's names: rewards/chosen, rewards/rejected, ...).
struct PreferencePairValues {
  double loss = 0.0;            // this pair's (row's) loss before scales[0]
  double chosen_reward = 0.0;   // KTO: the row's reward
  double rejected_reward = 0.0; // KTO: 0
};

// Σ-scaled loss over the micro-batch; `pairs` = P. `labels` only for KTO (else may be null).
// `values` (optional, P entries) receives each pair's values.
double preference_loss_forward(const PreferenceLossOptions& options, int64_t pairs, const double* logps,
                               const double* reference_logps, const double* lengths, const double* labels,
                               const double scales[2], std::vector<PreferencePairValues>* values = nullptr);

// d_logps [2P] (WRITTEN) = d_loss · ∂loss/∂logps.
void preference_loss_backward(const PreferenceLossOptions& options, int64_t pairs, const double* logps,
                              const double* reference_logps, const double* lengths, const double* labels,
                              const double scales[2], double d_loss, double* d_logps);

}  // namespace surogate::ops
