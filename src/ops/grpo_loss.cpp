// The GRPO loss, its gradient and metrics (see grpo_loss.h). Everything runs in double over the
// host arrays in a fixed order; a micro-batch's [B, T] is small beside the logits it came from.
#include "ops/grpo_loss.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace surogate::ops {
namespace {

void check_grpo_loss(const GrpoLossShape& shape, const GrpoLossOptions& options, bool has_ref) {
  SUROGATE_CHECK(shape.sequences >= 0 && shape.tokens >= 0, "bad GRPO loss shape [{}, {}]", shape.sequences,
                 shape.tokens);
  SUROGATE_CHECK(options.epsilon_low >= 0.0 && options.epsilon_high >= 0.0 && options.accumulation_steps > 0.0,
                 "bad GRPO loss options epsilon={} epsilon_high={} accumulation_steps={}", options.epsilon_low,
                 options.epsilon_high, options.accumulation_steps);
  SUROGATE_CHECK(options.loss_type != GrpoLossType::DrGrpo || options.max_completion_length > 0,
                 "dr_grpo needs max_completion_length");
  SUROGATE_CHECK(options.beta == 0.0 || has_ref, "beta {} needs the reference log-probs", options.beta);
}

// One token's loss ℓ and ∂ℓ/∂logp, before the mask and the loss_type's weight.
struct TokenTerm {
  double loss = 0.0, gradient = 0.0, kl = 0.0;
  double ratio = 1.0;  // r' (after delta): what the clip metrics test
};

TokenTerm token_term(const GrpoLossOptions& options, double logp, double old_logp, double advantage,
                     double ref_logp) {
  TokenTerm term;
  const double ratio = std::exp(logp - old_logp);
  const double low = 1.0 - options.epsilon_low, high = 1.0 + options.epsilon_high;
  const double clipped = std::clamp(ratio, low, high);
  const bool delta_passes = !options.delta || ratio <= *options.delta;
  term.ratio = options.delta ? std::min(ratio, *options.delta) : ratio;
  const double unclipped_term = term.ratio * advantage, clipped_term = clipped * advantage;
  // ∂/∂logp of each side of the min (d r / d logp = r), split as torch's minimum() splits ties.
  const double unclipped_gradient = delta_passes ? advantage * ratio : 0.0;
  const double clipped_gradient = ratio >= low && ratio <= high ? advantage * ratio : 0.0;
  if (unclipped_term < clipped_term) {
    term.gradient = -unclipped_gradient;
  } else if (clipped_term < unclipped_term) {
    term.gradient = -clipped_gradient;
  } else {
    term.gradient = -0.5 * (unclipped_gradient + clipped_gradient);
  }
  term.loss = -std::min(unclipped_term, clipped_term);
  if (options.beta != 0.0) {
    const double difference = ref_logp - logp;
    term.kl = std::exp(difference) - difference - 1.0;
    term.loss += options.beta * term.kl;
    term.gradient += options.beta * (1.0 - std::exp(difference));
  }
  return term;
}

template <typename T>
double masked_count(const GrpoLossShape& shape, const T* mask, int64_t sequence) {
  double count = 0.0;
  for (int64_t t = 0; t < shape.tokens; ++t) count += static_cast<double>(mask[sequence * shape.tokens + t]);
  return count;
}

// The weight of sequence b's masked-in tokens in the loss (grpo_loss.h's table).
template <typename T>
double sequence_weight(const GrpoLossShape& shape, const GrpoLossOptions& options, const T* mask, int64_t sequence,
                       double all_masked) {
  const double sequences = static_cast<double>(std::max<int64_t>(shape.sequences, 1));
  switch (options.loss_type) {
    case GrpoLossType::Grpo:
      return 1.0 / (sequences * std::max(masked_count(shape, mask, sequence), 1.0) * options.accumulation_steps);
    case GrpoLossType::Bnpo:
      return 1.0 / (std::max(all_masked, 1.0) * options.accumulation_steps);
    case GrpoLossType::DrGrpo:
      return 1.0 / (sequences * static_cast<double>(options.max_completion_length) * options.accumulation_steps);
    case GrpoLossType::Dapo:
      return 1.0 / (options.token_normalizer > 0.0 ? options.token_normalizer : std::max(all_masked, 1.0));
  }
  return 0.0;
}

template <typename T>
TokenTerm term_at(const GrpoLossOptions& options, const GrpoLossInputs<T>& in, int64_t sequence, int64_t index) {
  const double logp = static_cast<double>(in.logp[index]);
  const double old = in.old_logp != nullptr ? static_cast<double>(in.old_logp[index]) : logp;
  const double ref = options.beta != 0.0 ? static_cast<double>(in.ref_logp[index]) : 0.0;
  return token_term(options, logp, old, static_cast<double>(in.advantages[sequence]), ref);
}

double nan_or(double value, bool any) { return any ? value : std::numeric_limits<double>::quiet_NaN(); }

}  // namespace

template <typename T>
GrpoLossResult grpo_loss_forward(const GrpoLossShape& shape, const GrpoLossOptions& options,
                                 const GrpoLossInputs<T>& in) {
  check_grpo_loss(shape, options, in.ref_logp != nullptr);
  double all_masked = 0.0;
  for (int64_t b = 0; b < shape.sequences; ++b) all_masked += masked_count(shape, in.mask, b);
  GrpoLossResult result;
  GrpoLossMetrics& metrics = result.metrics;
  double low_min = std::numeric_limits<double>::infinity(), high_max = -low_min;
  bool any_sequence = false;
  for (int64_t b = 0; b < shape.sequences; ++b) {
    const double weight = sequence_weight(shape, options, in.mask, b, all_masked);
    double low = 0.0, high = 0.0;
    for (int64_t t = 0; t < shape.tokens; ++t) {
      const int64_t index = b * shape.tokens + t;
      const double mask = static_cast<double>(in.mask[index]);
      const TokenTerm term = term_at(options, in, b, index);
      const double advantage = static_cast<double>(in.advantages[b]);
      const double is_low = term.ratio < 1.0 - options.epsilon_low && advantage < 0.0 ? 1.0 : 0.0;
      const double is_high = term.ratio > 1.0 + options.epsilon_high && advantage > 0.0 ? 1.0 : 0.0;
      result.loss += weight * mask * term.loss;
      metrics.kl += mask * term.kl;
      metrics.clip_low_mean += mask * is_low;
      metrics.clip_high_mean += mask * is_high;
      metrics.clip_region_mean += mask * std::max(is_low, is_high);
      low += mask * is_low;
      high += mask * is_high;
    }
    const double count = masked_count(shape, in.mask, b);
    if (count == 0.0) continue;  // TRL's 0 / 0 = NaN, skipped by its nanmin / nanmax
    any_sequence = true;
    low_min = std::min(low_min, low / count);
    high_max = std::max(high_max, high / count);
  }
  const double denominator = std::max(all_masked, 1.0);
  metrics.kl /= denominator;
  metrics.clip_low_mean /= denominator;
  metrics.clip_high_mean /= denominator;
  metrics.clip_region_mean /= denominator;
  metrics.clip_low_min = nan_or(low_min, any_sequence);
  metrics.clip_high_max = nan_or(high_max, any_sequence);
  return result;
}

template <typename T>
void grpo_loss_backward(const GrpoLossShape& shape, const GrpoLossOptions& options, const GrpoLossInputs<T>& in,
                        T d_loss, T* d_logp) {
  check_grpo_loss(shape, options, in.ref_logp != nullptr);
  double all_masked = 0.0;
  for (int64_t b = 0; b < shape.sequences; ++b) all_masked += masked_count(shape, in.mask, b);
  for (int64_t b = 0; b < shape.sequences; ++b) {
    const double weight = static_cast<double>(d_loss) * sequence_weight(shape, options, in.mask, b, all_masked);
    for (int64_t t = 0; t < shape.tokens; ++t) {
      const int64_t index = b * shape.tokens + t;
      const double mask = static_cast<double>(in.mask[index]);
      d_logp[index] = mask == 0.0 ? T(0) : static_cast<T>(weight * mask * term_at(options, in, b, index).gradient);
    }
  }
}

#define SUROGATE_INSTANTIATE_GRPO_LOSS(T)                                                                       \
  template GrpoLossResult grpo_loss_forward<T>(const GrpoLossShape&, const GrpoLossOptions&,                    \
                                               const GrpoLossInputs<T>&);                                       \
  template void grpo_loss_backward<T>(const GrpoLossShape&, const GrpoLossOptions&, const GrpoLossInputs<T>&, T, \
                                      T*);
SUROGATE_INSTANTIATE_GRPO_LOSS(float)
SUROGATE_INSTANTIATE_GRPO_LOSS(double)
#undef SUROGATE_INSTANTIATE_GRPO_LOSS

}  // namespace surogate::ops
