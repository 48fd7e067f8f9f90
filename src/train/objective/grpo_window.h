// One optimizer step of `surogate grpo` laid out for the training graph: the step's completions
// (prompt + completion per row, group by group) in micro-batches of `batch` rows, each completion
// token labelled with itself and weighed so that the LM head's weighted cross-entropy
// (ops/cross_entropy.h, a graph op on both backends) has exactly the gradient of TRL's GRPO loss.
//
// Why that holds: with one policy update per generation batch (num_iterations 1) the ratio is
// r = exp(logp − stop_gradient(logp)) = 1, so ∂loss/∂logp_t = −A_b·w_t with the loss_type's token
// weight w_t (ops/grpo_loss.h), and beta 0 adds nothing; the weighted cross-entropy Σ u_t·(−logp_t)
// has ∂/∂logp_t = −u_t. So u_t = −∂loss/∂logp_t, which grpo_loss_backward gives for the very
// masks, advantages and normalisers TRL uses (tests/python/test_grpo_trl.py checks that op against
// TRL). The logits are scored at temperature 1 (the feature-support table refuses another).
// The loss reported is TRL's (grpo_loss_forward's), not the weighted cross-entropy's value.
//
// The window's loss-weight sum (the step loop's normaliser) is 1: the weights are already the
// normalised ones, so the step loop's scale is the loss scale itself.
#pragma once

#include <cstdint>
#include <vector>

#include "data/packing.h"
#include "ops/grpo_loss.h"
#include "rl/completion_batch.h"

namespace surogate::train {

// A window row holds one prompt + completion, then its padding if any: at most this many segments
// (documents and padding runs), the bound cuDNN's packed-documents attention is laid out for
// (train/run/start_prompts.cpp sets it before the plan).
inline constexpr int64_t kGrpoSegmentsPerRow = 2;

struct GrpoWindow {
  std::vector<data::PackedBatch> batches;
  double loss = 0.0;            // TRL's loss of the step (Σ of its micro-batches')
  ops::GrpoLossMetrics metrics; // the mean of the micro-batches' (kl and the clip ratios' means)
};

// `prompts[i]`: completion i's prompt ids, `completion_ids[i]` its own; `completions`:
// completion_batch() of them (the masks); `advantages[i]`: completion i's. `options.accumulation_steps` is the window's
// micro-batches; dapo's token_normalizer is set here to the window's masked tokens (TRL's
// num_items_in_batch on one process). InternalError when a row does not fit `sequence` tokens or
// the counts disagree.
GrpoWindow grpo_window(const std::vector<std::vector<int32_t>>& prompts,
                       const std::vector<std::vector<int32_t>>& completion_ids, const rl::CompletionBatch& completions,
                       const std::vector<double>& advantages, ops::GrpoLossOptions options, int64_t batch,
                       int64_t sequence, int32_t pad_id);

}  // namespace surogate::train
