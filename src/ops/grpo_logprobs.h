// GRPO's per-token log-probabilities of completion tokens, as TRL's selective_log_softmax computes
// them from the policy's logits (GRPOTrainer divides the logits by the sampling temperature first):
//
//   logp[n] = log_softmax(logits[n] / temperature)[labels[n]]
//
// logits [N, V] are the rows that predict the completion tokens (position t's logits score token
// t + 1: the shift is the caller's, as for cross_entropy.h). Rows whose label is ignore_index get
// logp 0 and no gradient (padding past a completion's end).
// Backward, for an upstream gradient d_logp [N]:
//   d_logits[n, v] = d_logp[n] · ([v == label_n] − softmax(logits[n] / temperature)_v) / temperature
// (WRITTEN). The cross-entropy op is the same quantity negated and summed; this one keeps each
// token's value because the GRPO loss (grpo_loss.h) needs every token's ratio to the old policy.
#pragma once

#include <cstdint>

#include "ops/cross_entropy.h"

namespace surogate::ops {

struct TokenLogprobShape {
  int64_t rows = 0;   // N
  int64_t vocab = 0;  // V
  double temperature = 1.0;  // > 0
  int32_t ignore_index = kIgnoreIndex;
};

// Writes logp [N]; `logsumexp` [N] (of logits / temperature) is saved for the backward.
template <typename T>
void token_logprobs_forward(const TokenLogprobShape& shape, const T* logits, const int32_t* labels, T* logp,
                            T* logsumexp);

template <typename T>
void token_logprobs_backward(const TokenLogprobShape& shape, const T* logits, const int32_t* labels,
                             const T* logsumexp, const T* d_logp, T* d_logits);

}  // namespace surogate::ops
