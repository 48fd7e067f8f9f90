// Preference losses and their gradients; see preference_loss.h.
#include "ops/preference_loss.h"

#include <algorithm>
#include <cmath>

namespace surogate::ops {
namespace {

double logistic(double x) { return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)); }
double log_sigmoid(double x) { return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }

// One pair's loss and its derivatives with respect to the chosen and rejected log-probs.
struct PairTerms {
  double loss = 0.0, d_chosen = 0.0, d_rejected = 0.0;
  double chosen_reward = 0.0, rejected_reward = 0.0;
};

// −(1−ε)·ln σ(z) − ε·ln σ(−z) and its derivative in z.
void smoothed_sigmoid_loss(double z, double smoothing, double& loss, double& d_z) {
  loss = -(1.0 - smoothing) * log_sigmoid(z) - smoothing * log_sigmoid(-z);
  d_z = -(1.0 - smoothing) * logistic(-z) + smoothing * logistic(z);
}

PairTerms pair_terms(const PreferenceLossOptions& o, double c, double r, double c0, double r0, double lc, double lr) {
  PairTerms t;
  const double ref_c = o.reference_free ? 0.0 : c0, ref_r = o.reference_free ? 0.0 : r0;
  lc = std::max(lc, 1.0);
  lr = std::max(lr, 1.0);
  switch (o.type) {
    case PreferenceLossType::Dpo: {
      const double nc = o.length_norm ? 1.0 / lc : 1.0, nr = o.length_norm ? 1.0 / lr : 1.0;
      const double z = o.beta * ((c - ref_c) * nc - (r - ref_r) * nr) - o.target_margin;
      double d_z = 0.0;
      smoothed_sigmoid_loss(z, o.label_smoothing, t.loss, d_z);
      t.d_chosen = d_z * o.beta * nc;
      t.d_rejected = -d_z * o.beta * nr;
      t.chosen_reward = o.beta * (c - ref_c);
      t.rejected_reward = o.beta * (r - ref_r);
      break;
    }
    case PreferenceLossType::Ipo: {
      const double delta = (c - ref_c) / lc - (r - ref_r) / lr - 1.0 / (2.0 * o.beta);
      t.loss = delta * delta;
      t.d_chosen = 2.0 * delta / lc;
      t.d_rejected = -2.0 * delta / lr;
      t.chosen_reward = o.beta * (c - ref_c);
      t.rejected_reward = o.beta * (r - ref_r);
      break;
    }
    case PreferenceLossType::Simpo: {
      const double z = o.beta * (c / lc - r / lr) - o.simpo_gamma;
      double d_z = 0.0;
      smoothed_sigmoid_loss(z, o.label_smoothing, t.loss, d_z);
      t.d_chosen = d_z * o.beta / lc;
      t.d_rejected = -d_z * o.beta / lr;
      t.chosen_reward = o.beta * c / lc;
      t.rejected_reward = o.beta * r / lr;
      break;
    }
    case PreferenceLossType::Orpo: {
      const double ac = c / lc, ar = r / lr;
      // ln(1 − e^a) for a < 0, written to stay accurate near 0 (log1p(−expm1… ) as torch's log1p(−exp)).
      const double log_odds = (ac - ar) - (std::log1p(-std::exp(ac)) - std::log1p(-std::exp(ar)));
      t.loss = -o.orpo_beta * log_sigmoid(log_odds);
      const double d_odds = -o.orpo_beta * logistic(-log_odds);
      t.d_chosen = d_odds / (1.0 - std::exp(ac)) / lc;
      t.d_rejected = -d_odds / (1.0 - std::exp(ar)) / lr;
      t.chosen_reward = o.orpo_beta * ac;
      t.rejected_reward = o.orpo_beta * ar;
      break;
    }
    case PreferenceLossType::Kto: break;  // per row, in kto_terms
  }
  return t;
}

PairTerms kto_terms(const PreferenceLossOptions& o, double c, double c0, double label, double kl) {
  PairTerms t;
  const double ratio = c - (o.reference_free ? 0.0 : c0);
  const bool desirable = label > 0.5;
  const double weight = desirable ? o.desirable_weight : o.undesirable_weight;
  const double z = desirable ? o.beta * (ratio - kl) : o.beta * (kl - ratio);
  const double s = logistic(z);
  t.loss = weight * (1.0 - s);
  t.d_chosen = -weight * s * (1.0 - s) * o.beta * (desirable ? 1.0 : -1.0);
  t.chosen_reward = o.beta * ratio;
  return t;
}

PairTerms terms_of(const PreferenceLossOptions& o, int64_t pairs, int64_t i, const double* logps, const double* ref,
                   const double* lengths, const double* labels, double kl) {
  if (lengths[i] <= 0.0) return {};  // a padding row (the last batch of an epoch): no pair
  if (o.type == PreferenceLossType::Kto) return kto_terms(o, logps[i], ref[i], labels[i], kl);
  return pair_terms(o, logps[i], logps[pairs + i], ref[i], ref[pairs + i], lengths[i], lengths[pairs + i]);
}

}  // namespace

double kto_reference_point(int64_t rows, const double* logps, const double* reference_logps, const double* lengths) {
  double sum = 0.0;
  int64_t counted = 0;
  for (int64_t i = 0; i < rows; ++i) {
    if (lengths[i] <= 0.0) continue;  // a padding row
    sum += logps[rows + i] - reference_logps[rows + i];
    ++counted;
  }
  return counted == 0 ? 0.0 : std::max(0.0, sum / static_cast<double>(counted));
}

bool parse_preference_loss_type(const std::string& name, PreferenceLossType& type) {
  for (PreferenceLossType candidate : {PreferenceLossType::Dpo, PreferenceLossType::Ipo, PreferenceLossType::Simpo,
                                       PreferenceLossType::Orpo, PreferenceLossType::Kto}) {
    if (name == preference_loss_type_name(candidate)) {
      type = candidate;
      return true;
    }
  }
  return false;
}

const char* preference_loss_type_name(PreferenceLossType type) {
  switch (type) {
    case PreferenceLossType::Dpo: return "dpo";
    case PreferenceLossType::Ipo: return "ipo";
    case PreferenceLossType::Simpo: return "simpo";
    case PreferenceLossType::Orpo: return "orpo";
    case PreferenceLossType::Kto: return "kto";
  }
  return "dpo";
}

bool preference_loss_uses_reference(const PreferenceLossOptions& options) {
  if (options.type == PreferenceLossType::Simpo || options.type == PreferenceLossType::Orpo) return false;
  return !options.reference_free;
}

double preference_loss_forward(const PreferenceLossOptions& options, int64_t pairs, const double* logps,
                               const double* reference_logps, const double* lengths, const double* labels,
                               const double scales[2], std::vector<PreferencePairValues>* values) {
  const double kl = options.type == PreferenceLossType::Kto ? kto_reference_point(pairs, logps, reference_logps, lengths) : 0.0;
  double sum = 0.0, chosen_logps = 0.0;
  if (values != nullptr) values->assign(static_cast<size_t>(pairs), {});
  for (int64_t i = 0; i < pairs; ++i) {
    const PairTerms t = terms_of(options, pairs, i, logps, reference_logps, lengths, labels, kl);
    sum += t.loss;
    chosen_logps += logps[i];
    if (values != nullptr) (*values)[static_cast<size_t>(i)] = {t.loss, t.chosen_reward, t.rejected_reward};
  }
  double loss = scales[0] * sum;
  if (options.type == PreferenceLossType::Orpo) loss -= scales[1] * chosen_logps;
  return loss;
}

void preference_loss_backward(const PreferenceLossOptions& options, int64_t pairs, const double* logps,
                              const double* reference_logps, const double* lengths, const double* labels,
                              const double scales[2], double d_loss, double* d_logps) {
  const double kl = options.type == PreferenceLossType::Kto ? kto_reference_point(pairs, logps, reference_logps, lengths) : 0.0;
  for (int64_t i = 0; i < pairs; ++i) {
    const PairTerms t = terms_of(options, pairs, i, logps, reference_logps, lengths, labels, kl);
    d_logps[i] = d_loss * scales[0] * t.d_chosen;
    d_logps[pairs + i] = d_loss * scales[0] * t.d_rejected;  // KTO: the KL rows get no gradient
    if (options.type == PreferenceLossType::Orpo) d_logps[i] -= d_loss * scales[1];
  }
}

}  // namespace surogate::ops
