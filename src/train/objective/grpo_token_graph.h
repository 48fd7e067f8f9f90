// GRPO's loss graph when the importance ratio or the KL term is in play (num_iterations > 1 or
// beta ≠ 0): the LM head's cross-entropy becomes the per-token log-probabilities of the completion
// tokens, and the loss their sum weighed by host-computed coefficients:
//   grpo_token_logps, _, _ = sequence_logps(hidden, head, targets, grpo_token_ids){S = batch · W}
//   loss = sum(mul(grpo_token_logps, grpo_token_coefficients))
// New inputs, written per micro-batch of `batch` rows (grpo_iterations.h):
//   grpo_token_ids I32 [batch, sequence]     the position predicting completion token t of row r
//                                            holds r·W + t (W = max_completion_length), else −1
//   grpo_token_coefficients F32 [batch · W]  c_t = ∂(TRL's loss)/∂logp_t at the current weights
// Why it is exact: ∂(Σ c_t·logp_t)/∂θ = Σ c_t·∂logp_t/∂θ, which is TRL's gradient when c_t is TRL's
// ∂loss/∂logp_t evaluated at the logp_t the step's weights give; grpo_iterations.h computes those
// from a forward-only pass of this same graph (grpo_token_logps is a graph output) before the step.
// sequence_logps (ops/preference_logps.h) and the core ops mul / sum have CPU and CUDA kernels.
#pragma once

#include <cstdint>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "train/objective/training_objective.h"

namespace surogate::train {

inline constexpr const char* kGrpoTokenLogps = "grpo_token_logps";
inline constexpr const char* kGrpoTokenIds = "grpo_token_ids";
inline constexpr const char* kGrpoTokenCoefficients = "grpo_token_coefficients";

// `forward`'s loss must be lm_head_loss's output (after apply_grpo_temperature); UserError
// otherwise. `width`: the completion tokens a row can hold (max_completion_length).
ObjectiveGraph apply_grpo_token_loss(graph::Graph forward, graph::TensorId loss, const graph::OpRegistry& registry,
                                     int64_t batch, int64_t sequence, int64_t width);

}  // namespace surogate::train
