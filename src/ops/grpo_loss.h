// GRPO's clipped surrogate loss over per-token log-probabilities, term for term as TRL's
// GRPOTrainer._compute_loss (trl 1.16, importance_sampling_level "token"; the test
// tests/python/test_grpo_trl.py runs TRL's own method against it). Completions are [B, T]
// row-major (T: the longest completion; `mask` is 0 past each one's end and on masked rows).
//
//   ratio      r = exp(logp − old_logp)          (old_logp null: logp itself, so r = 1 with the
//                                                 gradient of exp(logp − stop_gradient(logp)))
//   clipped    c = clamp(r, 1 − epsilon_low, 1 + epsilon_high)
//   delta      r' = min(r, delta) when delta is set (INTELLECT-2's two-sided clipping), else r
//   token loss ℓ = −min(r'·A_b, c·A_b) + beta · kl
//   kl         = exp(ref − logp) − (ref − logp) − 1      (the k3 estimator; only when beta ≠ 0)
//   loss       = Σ_bt w_bt ℓ_bt with the loss_type's weights w_bt = mask_bt ·
//     grpo     1 / (B · max(Σ_t mask_bt, 1) · accumulation_steps)   (each sequence's mean, then the mean)
//     bnpo     1 / (max(Σ mask, 1) · accumulation_steps)
//     dr_grpo  1 / (B · max_completion_length · accumulation_steps)
//     dapo     1 / token_normalizer (TRL: the generation batch's masked tokens / processes ×
//              accumulation_steps / steps_per_generation; 0 here: max(Σ mask, 1))
// The gradient follows torch's rules where TRL's formula has kinks: min() of two equal terms
// sends half the gradient to each, clamp() passes it at its bounds, min(r, delta) passes it at delta.
// Metrics as TRL logs them: clip_ratio/low_mean (r < 1 − epsilon_low and A < 0), high_mean
// (r > 1 + epsilon_high and A > 0), region_mean (either), masked means over all tokens;
// low_min / high_max: the smallest / largest per-sequence masked mean (sequences with no masked-in
// token skipped, NaN when none is left); kl: the masked mean of kl.
#pragma once

#include <cstdint>
#include <optional>

namespace surogate::ops {

enum class GrpoLossType { Grpo, Bnpo, DrGrpo, Dapo };

struct GrpoLossOptions {
  GrpoLossType loss_type = GrpoLossType::Dapo;  // TRL's default
  double epsilon_low = 0.2;                     // TRL's `epsilon`
  double epsilon_high = 0.2;                    // TRL's `epsilon_high` (defaults to epsilon)
  std::optional<double> delta;                  // TRL's `delta`
  double beta = 0.0;                            // KL coefficient; 0: ref_logp is not read
  int64_t max_completion_length = 0;            // dr_grpo's constant (> 0 for dr_grpo)
  double accumulation_steps = 1.0;              // grpo / bnpo / dr_grpo divide by it
  double token_normalizer = 0.0;                // dapo's; 0: the batch's masked tokens
};

struct GrpoLossShape {
  int64_t sequences = 0;  // B
  int64_t tokens = 0;     // T
};

struct GrpoLossMetrics {
  double kl = 0.0;  // 0 when beta == 0
  double clip_low_mean = 0.0, clip_high_mean = 0.0, clip_region_mean = 0.0;
  double clip_low_min = 0.0, clip_high_max = 0.0;
};

struct GrpoLossResult {
  double loss = 0.0;
  GrpoLossMetrics metrics;
};

// The inputs of one micro-batch, each [B, T] but `advantages` [B]. old_logp may be null (the
// policy is its own old policy: num_iterations 1); ref_logp is read only when beta ≠ 0.
template <typename T>
struct GrpoLossInputs {
  const T* logp = nullptr;
  const T* old_logp = nullptr;
  const T* ref_logp = nullptr;
  const T* advantages = nullptr;
  const T* mask = nullptr;  // 0 or 1
};

// InternalError on a bad shape or option (the config layer refuses bad values with UserErrors).
template <typename T>
GrpoLossResult grpo_loss_forward(const GrpoLossShape& shape, const GrpoLossOptions& options,
                                 const GrpoLossInputs<T>& inputs);

// d_logp [B, T] = d_loss · ∂loss/∂logp (WRITTEN; 0 where mask is 0).
template <typename T>
void grpo_loss_backward(const GrpoLossShape& shape, const GrpoLossOptions& options, const GrpoLossInputs<T>& inputs,
                        T d_loss, T* d_logp);

}  // namespace surogate::ops
